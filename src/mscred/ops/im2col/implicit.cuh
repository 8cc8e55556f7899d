// The TF32 tensor-core implicit GEMM (conv_implicit) and what the later kernels share with it: TF32
// rounding, mma.sync, the warps' MMA tiles (ldmatrix forms too), the output-tile epilogues.
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Implicit GEMM with TF32 tensor cores. Block = 8 warps laid out WARPS_M x WARPS_N; each warp owns MT x NT
// m16n8 accumulator tiles, so the block tile is BM = WARPS_M*MT*16 output channels by BN = WARPS_N*NT*8 pixels.
// KH/KW > 0 fix the kernel size at compile time (divisions by constants); 0 reads it from the shape.
// K-steps of 32 are double-buffered through registers: the gathers of step t+1 are in flight while step t's MMAs run.
// ---------------------------------------------------------------------------------------------------------------
// float32 -> TF32 (as a 32-bit pattern with the low 13 bits clear), rounded to nearest. sm_90 has this as one
// instruction (F2FP.TF32) for round-to-nearest-even; older GPUs only have cvt.rna (ties away), emulated in 2-3.
// MSCRED_TF32_TRUNCATE (harness builds only, an experiment): no rounding instruction at all; the tensor core then
// ignores the low 13 bits, i.e. truncates (error up to 1 TF32 ulp instead of 1/2). Measured on the H200
// (benchmarks/gpu_tf32_truncate_probe.sh): 1-2% faster on the four encoder layers, 2.4x the error; not adopted.
__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t u;
#if defined(MSCRED_TF32_TRUNCATE)
  u = __float_as_uint(v);
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
#else
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(u) : "f"(v));
#endif
  return u;
}

__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// d = a * b + {c0, c0, c1, c1}: the first K-step starts from the bias without copying it into the accumulators.
__device__ __forceinline__ void mma_tf32_bias(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2], float c0,
                                              float c1) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%10,%10,%11,%11};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c0), "f"(c1));
}

// One warp's MMAs over a BK-deep K-slice held in shared memory: A rows (this warp's MT*16 output channels, k
// contiguous, leading dimension LDA) times B (k rows, this warp's NT*8 pixels, leading dimension LDB).
// The register-staged kernel rounds to TF32 when it stages, so the tiles already hold TF32 values.
template <int MT, int NT, int BK, int LDA, int LDB>
__device__ __forceinline__ void warp_mma_tile(float (&acc)[MT][NT][4], const uint32_t* __restrict__ a,
                                              const uint32_t* __restrict__ b, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int k8 = 0; k8 < BK; k8 += 8) {
    uint32_t af[MT][4], bf[NT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      const uint32_t* pa = a + (i * 16 + g) * LDA + k8 + t;
      af[i][0] = pa[0];
      af[i][1] = pa[8 * LDA];
      af[i][2] = pa[4];
      af[i][3] = pa[8 * LDA + 4];
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint32_t* pb = b + (k8 + t) * LDB + j * 8 + g;
      bf[j][0] = pb[0];
      bf[j][1] = pb[4 * LDB];
    }
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) mma_tf32(acc[i][j], af[i], bf[j]);
  }
}

// The pipelined kernel's warp MMAs. Its tiles hold raw float32 (cp.async copies bytes), so each fragment is rounded
// to TF32 here (to nearest; the tensor core would otherwise truncate). 4x fewer shared-memory instructions than
// scalar fragment loads, which kept conv4's warps ~1/3 of their cycles waiting on a full MIO queue (Nsight Compute
// on the H200); this removed that stall, though alone it moved layer times by only 0-3% (results/conv_probe.md):
//   * A (row-major, k contiguous) by ldmatrix.x4: read as 8x8 b16 matrices, a 16-byte row is 4 TF32 values and
//     thread (g, t) receives the 32-bit word (row g, column t) of each matrix — exactly m16n8k8's a0..a3 when the
//     four matrices are rows 0-7/8-15 x k 0-3/4-7. Rows are LDA = BK + 4 words apart: 8 rows hit banks 4r..4r+3,
//     conflict-free;
//   * B (k rows, pixel columns) with the columns of each warp's NT*8-wide slice permuted (b_column below), so that
//     a thread's b-values for all its n-blocks j are adjacent words: one 8- or 16-byte load per k row instead of NT.
template <int NT>
__device__ __forceinline__ int b_column(int c) {  // column c = j*8 + g of a warp slice -> its word in the slice
  constexpr int W4 = NT < 4 ? NT : 4;
  const int j = c / 8, g = c % 8;
  return (j / 4) * 32 + g * W4 + (j % 4);
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], const uint32_t* p) {
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// NT consecutive words from shared memory (NT = 1, 2, 4 or 8; 8 as two 16-byte halves 32 words apart).
template <int NT>
__device__ __forceinline__ void lds_row(uint32_t (&v)[NT], const uint32_t* p) {
  if constexpr (NT == 1) {
    v[0] = p[0];
  } else if constexpr (NT == 2) {
    const uint2 u = *reinterpret_cast<const uint2*>(p);
    v[0] = u.x; v[1] = u.y;
  } else {
    static_assert(NT % 4 == 0, "NT = 1, 2, 4 or 8");
#pragma unroll
    for (int h = 0; h < NT / 4; ++h) {
      const uint4 u = *reinterpret_cast<const uint4*>(p + 32 * h);
      v[4 * h] = u.x; v[4 * h + 1] = u.y; v[4 * h + 2] = u.z; v[4 * h + 3] = u.w;
    }
  }
}

template <int MT, int NT, int BK, int LDA, int LDB>
__device__ __forceinline__ void warp_mma_tile_ldsm(float (&acc)[MT][NT][4], const uint32_t* __restrict__ a,
                                                   const uint32_t* __restrict__ b, int lane) {
  static_assert(LDA % 4 == 0 && LDB % 4 == 0, "16-byte aligned rows");
  const int g = lane / 4, t = lane % 4;
  const int mat = lane / 8, arow = lane % 8 + (mat & 1) * 8, acol = (mat >> 1) * 4;
  constexpr int W4 = NT < 4 ? NT : 4;
#pragma unroll
  for (int k8 = 0; k8 < BK; k8 += 8) {
    uint32_t af[MT][4], b0[NT], b1[NT];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      ldsm_x4(af[i], a + (i * 16 + arow) * LDA + k8 + acol);
#pragma unroll
      for (int v = 0; v < 4; ++v) af[i][v] = to_tf32(__uint_as_float(af[i][v]));
    }
    lds_row<NT>(b0, b + (k8 + t) * LDB + g * W4);
    lds_row<NT>(b1, b + (k8 + t + 4) * LDB + g * W4);
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint32_t bf[2] = {to_tf32(__uint_as_float(b0[j])), to_tf32(__uint_as_float(b1[j]))};
#pragma unroll
      for (int i = 0; i < MT; ++i) mma_tf32(acc[i][j], af[i], bf);
    }
  }
}

// The same with B stored pixel-major too ([n][k], rows LDB words apart, as A): b0/b1 of two n-blocks per
// ldmatrix.x4 (matrices: n 0-7 x k 0-3 = b0 of block j, n 8-15 x k 0-3 = b0 of j+1, then k 4-7 = the b1s).
template <int MT, int NT, int BK, int LDA, int LDB>
__device__ __forceinline__ void warp_mma_tile_nk(float (&acc)[MT][NT][4], const uint32_t* __restrict__ a,
                                                 const uint32_t* __restrict__ b, int lane) {
  static_assert(LDA % 4 == 0 && LDB % 4 == 0 && NT % 2 == 0, "16-byte aligned rows, n-blocks in pairs");
  const int mat = lane / 8, row = lane % 8 + (mat & 1) * 8, col = (mat >> 1) * 4;
#pragma unroll
  for (int k8 = 0; k8 < BK; k8 += 8) {
    uint32_t af[MT][4], bq[NT / 2][4];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
      ldsm_x4(af[i], a + (i * 16 + row) * LDA + k8 + col);
#pragma unroll
      for (int v = 0; v < 4; ++v) af[i][v] = to_tf32(__uint_as_float(af[i][v]));
    }
#pragma unroll
    for (int jp = 0; jp < NT / 2; ++jp) {
      ldsm_x4(bq[jp], b + (jp * 16 + row) * LDB + k8 + col);
#pragma unroll
      for (int v = 0; v < 4; ++v) bq[jp][v] = to_tf32(__uint_as_float(bq[jp][v]));
    }
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const uint32_t bf[2] = {bq[j / 2][j % 2], bq[j / 2][2 + j % 2]};
#pragma unroll
      for (int i = 0; i < MT; ++i) mma_tf32(acc[i][j], af[i], bf);
    }
  }
}

template <int MT, int NT>
__device__ __forceinline__ void zero_accumulators(float (&acc)[MT][NT][4]) {
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j)
#pragma unroll
      for (int v = 0; v < 4; ++v) acc[i][j][v] = 0.f;
}

// Epilogues shared by the implicit kernels. First the accumulators go to a shared tile c (BM x LDC floats, free to
// overwrite: the caller has synchronised), so that the NCHW stores can be coalesced.
template <int MT, int NT, int LDC>
__device__ __forceinline__ void stage_accumulators(const float (&acc)[MT][NT][4], float* c, int warp_m, int warp_n,
                                                   int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int r = warp_m * MT * 16 + i * 16 + g;
      const int cc = warp_n * NT * 8 + j * 8 + 2 * t;
      *reinterpret_cast<float2*>(&c[r * LDC + cc]) = make_float2(acc[i][j][0], acc[i][j][1]);
      *reinterpret_cast<float2*>(&c[(r + 8) * LDC + cc]) = make_float2(acc[i][j][2], acc[i][j][3]);
    }
  __syncthreads();
}

// Shared tile -> bias + SELU -> NCHW, one float per store: thread tid owns pixel column tid % BN, so consecutive
// threads write consecutive pixels of one channel.
template <int BM, int BN, int MT, int NT, int LDC>
__device__ __forceinline__ void store_output_tile(const float (&acc)[MT][NT][4], float* c, int warp_m, int warp_n,
                                                  int lane, int tid, bool q_ok, int o0, const float* __restrict__ bias,
                                                  float* __restrict__ y, int64_t ybase, int O, int P,
                                                  bool apply_selu) {
  constexpr int KSTEP = 256 / BN;
  stage_accumulators<MT, NT, LDC>(acc, c, warp_m, warp_n, lane);
  if (!q_ok) return;
  const int bcol = tid % BN;
#pragma unroll 4
  for (int mm = tid / BN; mm < BM; mm += KSTEP) {
    const int o = o0 + mm;
    if (o >= O) break;
    float v = c[mm * LDC + bcol];
    if (bias) v += __ldg(bias + o);
    y[ybase + (int64_t)o * P] = apply_selu ? selu(v) : v;
  }
}

// The pipelined kernel's epilogues: the bias of tile row mm comes from shared memory (bs[mm], 0 without bias or
// past O), the row bound is taken once, and SELU is branch-free (fast exp: TF32 kernel). One float per store:
template <int BM, int BN, int MT, int NT, int LDC>
__device__ __forceinline__ void store_tile_rows(const float (&acc)[MT][NT][4], float* c, const float* bs, int warp_m,
                                                int warp_n, int lane, int tid, bool q_ok, int o0,
                                                float* __restrict__ y, int64_t ybase, int O, int P, bool apply_selu) {
  constexpr int KSTEP = 256 / BN;
  stage_accumulators<MT, NT, LDC>(acc, c, warp_m, warp_n, lane);
  if (!q_ok) return;
  const int bcol = tid % BN, mend = min(BM, O - o0);
  float* yp = y + ybase + (int64_t)o0 * P;
#pragma unroll 4
  for (int mm = tid / BN; mm < mend; mm += KSTEP) {
    const float v = c[mm * LDC + bcol] + bs[mm];
    yp[(int64_t)mm * P] = apply_selu ? selu_fast(v) : v;
  }
}

// ... or four pixels per store (16-byte loads from the tile, 16-byte stores: a warp writes 512 contiguous bytes of
// one channel for BN = 128). Needs P % 4 == 0 and a 16-byte aligned y: pixel groups q0 + 4c then never straddle
// two images and every group starts 16-byte aligned.
template <int BM, int BN, int MT, int NT, int LDC>
__device__ __forceinline__ void store_tile_rows_vec4(const float (&acc)[MT][NT][4], float* c, const float* bs,
                                                     int warp_m, int warp_n, int lane, int tid, int q0, int NP,
                                                     int o0, float* __restrict__ y, int O, int P, bool apply_selu) {
  constexpr int TPR = BN / 4;      // threads per tile row
  constexpr int ROWS = 256 / TPR;  // tile rows per pass
  static_assert(BN % 32 == 0 && (LDC % 4) == 0, "16-byte rows");
  stage_accumulators<MT, NT, LDC>(acc, c, warp_m, warp_n, lane);
  const int c4 = tid % TPR;
  const int q = q0 + 4 * c4;
  if (q >= NP) return;  // NP = N*P is a multiple of 4: q < NP means q + 3 < NP
  const int n = q / P, p = q - n * P, mend = min(BM, O - o0);
  float* yq = y + ((int64_t)n * O + o0) * P + p;
#pragma unroll 2
  for (int mm = tid / TPR; mm < mend; mm += ROWS) {
    float4 v = *reinterpret_cast<const float4*>(&c[mm * LDC + 4 * c4]);
    const float b = bs[mm];
    v.x += b; v.y += b; v.z += b; v.w += b;
    if (apply_selu) {
      v.x = selu_fast(v.x); v.y = selu_fast(v.y); v.z = selu_fast(v.z); v.w = selu_fast(v.w);
    }
    // Explicit vector store: through a float4 lvalue the front end split this into four 4-byte stores.
    asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(yq + (int64_t)mm * P), "f"(v.x), "f"(v.y),
                 "f"(v.z), "f"(v.w)
                 : "memory");
  }
}

template <int WARPS_M, int MT, int NT, int BK, int MIN_BLOCKS, int KH_, int KW_>
__global__ void __launch_bounds__(256, MIN_BLOCKS) conv_implicit(const float* __restrict__ x, const float* __restrict__ w,
                                                     const float* __restrict__ bias, float* __restrict__ y,
                                                     ConvShape s, bool apply_selu) {
  constexpr int WARPS_N = 8 / WARPS_M;
  constexpr int BM = WARPS_M * MT * 16;
  constexpr int BN = WARPS_N * NT * 8;
  constexpr int LDA = BK + 4;   // fragment reads (row g, col t) hit bank (BK+4)g + t mod 32: conflict-free
  constexpr int LDB = BN + 8;   // fragment reads (row t, col g) hit bank 8t + g: conflict-free
  constexpr int LDC = BN + 8;   // float2 accumulator stores of a half-warp hit distinct banks
  constexpr int KSTEP = 256 / BN;            // B-tile rows loaded per pass (each thread owns one pixel column)
  constexpr int B_PER_THREAD = BK / KSTEP;
  constexpr int A_PER_THREAD = BM * BK / 256;
  static_assert(256 % BN == 0 && BK % KSTEP == 0 && (BM * BK) % 256 == 0, "tile shape");

  struct Tiles { uint32_t a[BM * LDA]; uint32_t b[BK * LDB]; };
  union Smem { Tiles t; float c[BM * LDC]; };
  __shared__ __align__(16) Smem sm;

  const int KH = KH_ > 0 ? KH_ : s.KH;
  const int KW = KW_ > 0 ? KW_ : s.KW;
  const int KK = KH * KW;
  const int K = s.C * KK;
  const int P = s.P(), NP = s.NP();
  const int64_t HW = (int64_t)s.H * s.W;

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
  const int o0 = blockIdx.y * BM;
  const int q0 = blockIdx.x * BN;

  // This thread's pixel column of the B tile (and of the output tile in the epilogue): decoded once.
  const int bcol = tid % BN, brow0 = tid / BN;
  const int q = q0 + bcol;
  const bool q_ok = q < NP;
  int hb = 0, wb = 0;
  int64_t xbase = 0, ybase = 0;
  if (q_ok) {
    const int n = q / P, p = q - n * P, ho = p / s.Wo, wo = p - ho * s.Wo;
    hb = ho * s.stride - s.pad_top;
    wb = wo * s.stride - s.pad_left;
    xbase = (int64_t)n * s.C * HW + (int64_t)hb * s.W + wb;
    ybase = (int64_t)n * s.O * P + p;
  }

  float ra[A_PER_THREAD], rb[B_PER_THREAD];
  auto gather = [&](int k0) {
#pragma unroll
    for (int r = 0; r < A_PER_THREAD; ++r) {
      const int e = tid + 256 * r, mm = e / BK, kk = e % BK;
      const int o = o0 + mm, k = k0 + kk;
      ra[r] = (o < s.O && k < K) ? __ldg(w + (int64_t)o * K + k) : 0.f;
    }
#pragma unroll
    for (int r = 0; r < B_PER_THREAD; ++r) {
      const int k = k0 + brow0 + KSTEP * r;
      const int c = k / KK, rem = k - c * KK, i = rem / KW, j = rem - i * KW;
      const bool ok = q_ok && k < K && (unsigned)(hb + i) < (unsigned)s.H && (unsigned)(wb + j) < (unsigned)s.W;
      rb[r] = ok ? __ldg(x + xbase + c * HW + i * s.W + j) : 0.f;
    }
  };

  float acc[MT][NT][4];
  zero_accumulators(acc);

  const int ksteps = (K + BK - 1) / BK;
  gather(0);
  for (int ks = 0; ks < ksteps; ++ks) {
#pragma unroll
    for (int r = 0; r < A_PER_THREAD; ++r) {
      const int e = tid + 256 * r;
      sm.t.a[(e / BK) * LDA + e % BK] = to_tf32(ra[r]);
    }
#pragma unroll
    for (int r = 0; r < B_PER_THREAD; ++r) sm.t.b[(brow0 + KSTEP * r) * LDB + bcol] = to_tf32(rb[r]);
    __syncthreads();
    if (ks + 1 < ksteps) gather((ks + 1) * BK);
    warp_mma_tile<MT, NT, BK, LDA, LDB>(acc, sm.t.a + warp_m * MT * 16 * LDA, sm.t.b + warp_n * NT * 8, lane);
    __syncthreads();
  }

  store_output_tile<BM, BN, MT, NT, LDC>(acc, sm.c, warp_m, warp_n, lane, tid, q_ok, o0, bias, y, ybase, s.O, P,
                                         apply_selu);
}

}  // namespace
}  // namespace mscred_im2col
