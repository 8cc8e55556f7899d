// SELU and its fast forms, shared by every kernel's epilogue.
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"

namespace mscred_im2col {
namespace {

constexpr float kSeluAlpha = 1.6732632423543772848170429916717f;
constexpr float kSeluScale = 1.0507009873554804934193349852946f;
constexpr float kLog2e = 1.4426950408889634f;

__device__ __forceinline__ float selu(float z) {
  return z > 0.f ? kSeluScale * z : kSeluScale * kSeluAlpha * (expf(z) - 1.f);
}

// The same with the hardware exponential (MUFU.EX2, ~2 ulp): for epilogues of TF32 GEMMs, whose operands are
// already rounded to 2^-11, where the accurate expf (~10 instructions per output, with a branch) is a sizeable part
// of the instructions of an output-bound layer (conv1).
// Branch-free: exp(z) through ex2.approx.ftz (one MUFU.EX2; underflow to 0 gives the -scale*alpha asymptote,
// overflow for large z is not selected, NaN propagates), then a select.
__device__ __forceinline__ float selu_fast(float z) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * kLog2e));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return z > 0.f ? kSeluScale * z : neg;
}

// The same given u = z * log2(e), for kernels that fold log2(e) into their weights and bias (conv_halo3x3): the
// multiply before the exponential is then free.
__device__ __forceinline__ float selu_of_log2(float u) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(u));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return u > 0.f ? (kSeluScale / kLog2e) * u : neg;
}

}  // namespace
}  // namespace mscred_im2col
