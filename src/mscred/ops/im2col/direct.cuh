// conv_direct3x3: conv1-shaped layers as a direct convolution on the FP32 cores (harness rows only so far).
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"

namespace mscred_im2col {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// selu_fast(z) given u = z * log2(e) (a kernel that scaled its operands instead): one multiply fewer per output.
__device__ __forceinline__ float selu_of_log2(float u) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(u));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return u > 0.f ? (kSeluScale / kLog2e) * u : neg;
}

// ---------------------------------------------------------------------------------------------------------------
// Direct convolution on the FP32 cores for conv1-shaped layers: C <= 4 input channels, 3 x 3 kernel, stride 1, 32
// output channels (conv1 of the encoder: 3 -> 32 at n x n). The implicit GEMM is done with FFMA instead of the
// tensor cores. Why: conv1's reduction is only K = 27 deep, so the tensor-core kernels spend most of their
// instructions on everything around the MMAs (tap table, masks, gathers into shared memory, TF32 rounding,
// staging the output through shared memory: Nsight Compute found conv_pipelined issue-bound there, ~900
// instructions per warp per tile, results/conv_probe.md). Here each thread owns PIX output pixels of one warp's
// 32 * PIX consecutive pixels (lane, lane + 32, ...: every store of a warp is 128 contiguous bytes of one channel
// plane, whatever the image size) and all 32 channels of each: it loads its 9 * C input taps once (zero outside
// the image: TF "same" padding), then runs 32 * 9 * C FFMAs per pixel with the weights broadcast from shared memory
// (16-byte loads of 4 channels of one tap, shared by the PIX pixels), and stores bias + SELU straight from the
// registers. Exact float32 products (no TF32 rounding).
// ---------------------------------------------------------------------------------------------------------------
// HW > 0 fixes the image size at compile time (H = W = Ho = Wo = HW, "same" padding of 1: conv1 at n = HW), so that
// every tap's and every channel's offset is an immediate of the load or store instruction; HW = 0 reads the shape.
template <int C, int PIX, int HW = 0>
__global__ void __launch_bounds__(256) conv_direct3x3(const float* __restrict__ x, const float* __restrict__ w,
                                                      const float* __restrict__ bias, float* __restrict__ y,
                                                      ConvShape s, bool apply_selu) {
  constexpr int O = 32, TAPS = 9 * C;
  __shared__ __align__(16) float ws[TAPS * O];  // [tap][o]: one tap's 32 weights contiguous
  __shared__ __align__(16) float bs[O];
  // With SELU the weights and bias are staged times log2(e), so that the accumulators hold u = z * log2(e) and
  // exp(z) = 2^u is one MUFU.EX2 with no multiply before it (selu_of_log2).
  const float scale = apply_selu ? kLog2e : 1.f;
  for (int e = threadIdx.x; e < TAPS * O; e += blockDim.x) ws[e] = scale * __ldg(w + (e % O) * TAPS + e / O);
  if (threadIdx.x < O) bs[threadIdx.x] = bias != nullptr ? scale * __ldg(bias + threadIdx.x) : 0.f;
  __syncthreads();

  const int H = HW > 0 ? HW : s.H, W = HW > 0 ? HW : s.W, Wo = HW > 0 ? HW : s.Wo;
  const int pad_top = HW > 0 ? 1 : s.pad_top, pad_left = HW > 0 ? 1 : s.pad_left;
  const int P = HW > 0 ? HW * HW : s.P();
  const int64_t NP = (int64_t)s.N * P;
  const int lane = threadIdx.x % 32;
  const int64_t first = ((int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32) * (32 * PIX) + lane;

  float in[PIX][TAPS];
  float* yq[PIX];
  bool ok[PIX];
#pragma unroll
  for (int h = 0; h < PIX; ++h) {
    const int64_t q = first + 32 * h;
    ok[h] = q < NP;
    const int n = ok[h] ? (int)(q / P) : 0, p = ok[h] ? (int)(q - (int64_t)n * P) : 0;
    const int ho = p / Wo, wo = p - ho * Wo;
    const int hb = ho - pad_top, wb = wo - pad_left;
    yq[h] = y + (int64_t)n * O * P + p;
    // The window's top-left input element: only taps inside the image are read, so it may lie outside x.
    const float* xp = x + (int64_t)n * C * H * W + (int64_t)hb * W + wb;
#pragma unroll
    for (int c = 0; c < C; ++c)
#pragma unroll
      for (int i = 0; i < 3; ++i)
#pragma unroll
        for (int j = 0; j < 3; ++j) {
          const bool inside = ok[h] && (unsigned)(hb + i) < (unsigned)H && (unsigned)(wb + j) < (unsigned)W;
          in[h][c * 9 + i * 3 + j] = inside ? __ldg(xp + (c * H + i) * W + j) : 0.f;
        }
  }

  float acc[PIX][O];
#pragma unroll
  for (int o4 = 0; o4 < O / 4; ++o4) {
    const float4 b = *reinterpret_cast<const float4*>(&bs[4 * o4]);
#pragma unroll
    for (int h = 0; h < PIX; ++h) {
      acc[h][4 * o4] = b.x; acc[h][4 * o4 + 1] = b.y; acc[h][4 * o4 + 2] = b.z; acc[h][4 * o4 + 3] = b.w;
    }
  }
#pragma unroll
  for (int tap = 0; tap < TAPS; ++tap)
#pragma unroll
    for (int o4 = 0; o4 < O / 4; ++o4) {
      const float4 wv = *reinterpret_cast<const float4*>(&ws[tap * O + 4 * o4]);
#pragma unroll
      for (int h = 0; h < PIX; ++h) {
        acc[h][4 * o4] = fmaf(in[h][tap], wv.x, acc[h][4 * o4]);
        acc[h][4 * o4 + 1] = fmaf(in[h][tap], wv.y, acc[h][4 * o4 + 1]);
        acc[h][4 * o4 + 2] = fmaf(in[h][tap], wv.z, acc[h][4 * o4 + 2]);
        acc[h][4 * o4 + 3] = fmaf(in[h][tap], wv.w, acc[h][4 * o4 + 3]);
      }
    }

#pragma unroll
  for (int h = 0; h < PIX; ++h) {
    if (!ok[h]) continue;
#pragma unroll
    for (int o = 0; o < O; ++o) yq[h][o * P] = apply_selu ? selu_of_log2(acc[h][o]) : acc[h][o];
  }
}

}  // namespace
}  // namespace mscred_im2col
