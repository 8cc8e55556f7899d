// The thesis's explicit-im2col GEMMs: matrix views, epilogue, gemm_global (global memory) and gemm_shared
// (shared-memory tiles).
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Matrix views. Element (r, c) of a matrix that is either plain strided memory or an NCHW tensor (N, R, P) seen as
// an R x (N*P) matrix whose column c = n*P + p (channels x pixels: the layout of conv outputs and their grads).
// ---------------------------------------------------------------------------------------------------------------
struct View {
  const float* ptr;
  int64_t rs, cs;  // plain: address = r*rs + c*cs.    image: rs = P (channel stride), cs unused
  int P;           // image only: pixels per image
  int64_t ns;      // image only: image stride = R*P
};

template <bool IMG>
__device__ __forceinline__ int64_t offset(const View& v, int r, int c) {
  if (IMG) {
    const int n = c / v.P;
    return n * v.ns + r * v.rs + (c - n * v.P);
  }
  return r * v.rs + c * v.cs;
}

struct GemmArgs {
  View a, b;       // A (M, Kd), B (Kd, Nd)
  float* c;        // output, addressed through cview
  View cview;      // c's layout (ptr unused)
  const float* bias;  // per row m, or null
  int M, Nd, Kd;
  int kchunk;      // split-K: blockIdx.z handles [z*kchunk, min(Kd, (z+1)*kchunk))
  bool selu;
};

// Epilogue: ATOMIC accumulates a split-K partial; otherwise bias (+ SELU) then store.
template <bool C_IMG, bool ATOMIC>
__device__ __forceinline__ void store(const GemmArgs& g, int m, int n, float acc) {
  float* dst = g.c + offset<C_IMG>(g.cview, m, n);
  if (ATOMIC) {
    atomicAdd(dst, acc);
  } else {
    if (g.bias) acc += g.bias[m];
    *dst = g.selu ? selu(acc) : acc;
  }
}

// The thesis's first version: every thread computes one output element and reads its whole row of A and column
// of B from global memory (L1/L2 do what reuse they can). Block = 32 columns x 8 rows, so B reads are coalesced
// and A reads are warp-wide broadcasts.
template <bool A_IMG, bool B_IMG, bool C_IMG, bool ATOMIC>
__global__ void __launch_bounds__(256) gemm_global(GemmArgs g) {
  const int n = blockIdx.x * 32 + threadIdx.x;
  const int m = blockIdx.y * 8 + threadIdx.y;
  if (m >= g.M || n >= g.Nd) return;
  const int k0 = blockIdx.z * g.kchunk;
  const int k1 = min(g.Kd, k0 + g.kchunk);
  float acc = 0.f;
  for (int k = k0; k < k1; ++k)
    acc = fmaf(__ldg(g.a.ptr + offset<A_IMG>(g.a, m, k)), __ldg(g.b.ptr + offset<B_IMG>(g.b, k, n)), acc);
  store<C_IMG, ATOMIC>(g, m, n, acc);
}

// The thesis's optimised version: a 64 x 128 output tile per 256-thread block, K in steps of 16 staged in shared
// memory, each thread accumulating a 4 x 8 micro-tile in registers (rows ty + 16i, columns tx + 16j: interleaved so
// that shared-memory reads are conflict-free and the stores of a warp hit consecutive columns).
constexpr int SBM = 64, SBN = 128, SBK = 16;

template <bool A_IMG, bool B_IMG, bool C_IMG, bool ATOMIC>
__global__ void __launch_bounds__(256) gemm_shared(GemmArgs g) {
  // +4 padding: tiles filled along k (the contiguous index of W, and of col^T in the weight gradient) would
  // otherwise put 16 threads of a warp on one bank.
  __shared__ float As[SBK][SBM + 4];
  __shared__ float Bs[SBK][SBN + 4];
  const int tid = threadIdx.x;
  const int tx = tid % 16, ty = tid / 16;
  const int m0 = blockIdx.y * SBM, n0 = blockIdx.x * SBN;
  const int kbeg = blockIdx.z * g.kchunk;
  const int kend = min(g.Kd, kbeg + g.kchunk);
  // Global reads go along whichever index of the operand is contiguous in memory (uniform branch).
  const bool a_m_fast = !A_IMG && g.a.rs == 1;
  const bool b_k_fast = !B_IMG && g.b.rs == 1;

  float acc[4][8];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = 0.f;

  for (int k0 = kbeg; k0 < kend; k0 += SBK) {
#pragma unroll
    for (int r = 0; r < SBM * SBK / 256; ++r) {  // A tile: 1024 elements, 4 per thread
      const int e = tid + 256 * r;
      const int mm = a_m_fast ? e % SBM : e / SBK;
      const int kk = a_m_fast ? e / SBM : e % SBK;
      const int m = m0 + mm, k = k0 + kk;
      As[kk][mm] = (m < g.M && k < kend) ? __ldg(g.a.ptr + offset<A_IMG>(g.a, m, k)) : 0.f;
    }
#pragma unroll
    for (int r = 0; r < SBN * SBK / 256; ++r) {  // B tile: 2048 elements, 8 per thread
      const int e = tid + 256 * r;
      const int nn = b_k_fast ? e / SBK : e % SBN;
      const int kk = b_k_fast ? e % SBK : e / SBN;
      const int n = n0 + nn, k = k0 + kk;
      Bs[kk][nn] = (n < g.Nd && k < kend) ? __ldg(g.b.ptr + offset<B_IMG>(g.b, k, n)) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < SBK; ++kk) {
      float a[4], b[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 8; ++j) b[j] = Bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    if (m >= g.M) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n = n0 + tx + 16 * j;
      if (n < g.Nd) store<C_IMG, ATOMIC>(g, m, n, acc[i][j]);
    }
  }
}

}  // namespace
}  // namespace mscred_im2col
