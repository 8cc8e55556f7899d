// im2col + GEMM convolution kernels for MSCRED's encoder, forward and backward (see im2col.h for the maths).
//
// One templated source for all variants:
//   * im2col_kernel / col2im_kernel      explicit column matrix and its adjoint;
//   * gemm_global<...>                   one thread per output element, operands read straight from global memory
//                                        (the thesis's first GPU version);
//   * gemm_shared<...>                   64x128 tiles staged in shared memory, 4x8 register micro-tile per thread
//                                        (the thesis's optimised version);
//     both are templated on how each operand is laid out (plain strided matrix, or an NCHW tensor seen as a
//     channels x pixels matrix) and on the epilogue (bias + SELU scatter to NCHW, or split-K atomic accumulate),
//     so the same two kernels serve the forward GEMM and both backward GEMMs;
//   * conv_implicit<...>                 implicit GEMM: the im2col tile is gathered from x into shared memory per
//                                        K-step (padding by bounds checks, nothing written to global memory), TF32
//                                        tensor-core mma.sync, bias + SELU fused in the epilogue, NCHW stores staged
//                                        through shared memory so that they are coalesced;
//   * conv_pipelined<...>                the same implicit GEMM with a table-driven gather, a 2-3 stage cp.async
//                                        pipeline, ldmatrix fragment loads and a cheaper epilogue (variant
//                                        "implicit-pipe"); with PAIR, two taps per 8-byte copy into a pixel-major
//                                        B tile; it shares the output staging with conv_implicit;
//   * conv_patch<...>                    "implicit-pipe" for non-overlapping 2x2 patches of 8x8 images (conv4 at
//                                        n = 30): whole images per tile, whole channel planes per 16-byte copy, the
//                                        im2col order made in the fragment loads, bias + SELU from the accumulators.
// (Kernels of their own for conv1 and conv2 were measured and not adopted: benchmarks/conv_variants.cuh.)
#include "im2col.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <tuple>

namespace mscred_im2col {
namespace {

constexpr float kSeluAlpha = 1.6732632423543772848170429916717f;
constexpr float kSeluScale = 1.0507009873554804934193349852946f;

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
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(z * 1.4426950408889634f));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return z > 0.f ? kSeluScale * z : neg;
}

constexpr float kLog2e = 1.4426950408889634f;

// selu_fast(z) given u = z * log2(e) (a kernel that scaled its operands instead): one multiply fewer per output.
__device__ __forceinline__ float selu_of_log2(float u) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(u));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return u > 0.f ? (kSeluScale / kLog2e) * u : neg;
}

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

// ---------------------------------------------------------------------------------------------------------------
// im2col / col2im. One thread per element; q (the pixel) is the fastest index so that col rows are written and
// read coalesced.
// ---------------------------------------------------------------------------------------------------------------
__global__ void im2col_kernel(const float* __restrict__ x, float* __restrict__ col, ConvShape s) {
  const int64_t NP = s.NP();
  const int64_t total = NP * s.K();
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int k = (int)(e / NP);
    const int q = (int)(e - k * NP);
    const int c = k / (s.KH * s.KW), r = k - c * s.KH * s.KW, i = r / s.KW, j = r - i * s.KW;
    const int n = q / s.P(), p = q - n * s.P(), ho = p / s.Wo, wo = p - ho * s.Wo;
    const int h = ho * s.stride - s.pad_top + i, w = wo * s.stride - s.pad_left + j;
    float v = 0.f;
    if ((unsigned)h < (unsigned)s.H && (unsigned)w < (unsigned)s.W)
      v = __ldg(x + (((int64_t)n * s.C + c) * s.H + h) * s.W + w);
    col[e] = v;
  }
}

__global__ void col2im_kernel(const float* __restrict__ gcol, float* __restrict__ gx, ConvShape s) {
  const int64_t NP = s.NP();
  const int64_t total = (int64_t)s.N * s.C * s.H * s.W;
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < total; e += (int64_t)gridDim.x * blockDim.x) {
    const int w = (int)(e % s.W);
    const int h = (int)((e / s.W) % s.H);
    const int c = (int)((e / ((int64_t)s.W * s.H)) % s.C);
    const int n = (int)(e / ((int64_t)s.W * s.H * s.C));
    float acc = 0.f;
    for (int i = 0; i < s.KH; ++i) {
      const int hs = h + s.pad_top - i;  // = ho * stride when this tap came from output row ho
      if (hs < 0 || hs % s.stride) continue;
      const int ho = hs / s.stride;
      if (ho >= s.Ho) continue;
      for (int j = 0; j < s.KW; ++j) {
        const int ws = w + s.pad_left - j;
        if (ws < 0 || ws % s.stride) continue;
        const int wo = ws / s.stride;
        if (wo >= s.Wo) continue;
        const int k = (c * s.KH + i) * s.KW + j;
        acc += __ldg(gcol + k * NP + (int64_t)n * s.P() + ho * s.Wo + wo);
      }
    }
    gx[e] = acc;
  }
}

__global__ void selu_backward_kernel(const float* __restrict__ gy, const float* __restrict__ y,
                                     float* __restrict__ gz, int64_t n) {
  for (int64_t e = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; e < n; e += (int64_t)gridDim.x * blockDim.x) {
    const float v = y[e];
    // y = scale*alpha*(exp(z)-1) for z <= 0, so dy/dz = scale*alpha*exp(z) = y + scale*alpha (as PyTorch's
    // elu_backward on the result).
    gz[e] = gy[e] * (v > 0.f ? kSeluScale : v + kSeluScale * kSeluAlpha);
  }
}

// gb[o] += sum over the images [blockIdx.y*chunk, ...) and their pixels of gz[n, o, :]; one block per (o, chunk).
__global__ void __launch_bounds__(256) grad_bias_kernel(const float* __restrict__ gz, float* __restrict__ gb,
                                                        ConvShape s, int chunk) {
  const int o = blockIdx.x;
  const int n0 = blockIdx.y * chunk, n1 = min(s.N, n0 + chunk);
  const int P = s.P();
  float acc = 0.f;
  for (int64_t e = threadIdx.x; e < (int64_t)(n1 - n0) * P; e += blockDim.x) {
    const int n = n0 + (int)(e / P), p = (int)(e % P);
    acc += gz[((int64_t)n * s.O + o) * P + p];
  }
  __shared__ float warp_sums[8];
  for (int d = 16; d > 0; d >>= 1) acc += __shfl_down_sync(0xffffffffu, acc, d);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = acc;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int i = 0; i < 8; ++i) t += warp_sums[i];
    atomicAdd(gb + o, t);
  }
}

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

// ---------------------------------------------------------------------------------------------------------------
// Implicit GEMM, pipelined (variant "implicit-pipe"). Same warp tiling, MMAs and epilogue as conv_implicit, but
//   * the im2col gather is table-driven: each block first writes, for every k of the (BK-padded) reduction, the
//     offset of tap k = (c, i, j) relative to the pixel's top-left input element (c*H*W + i*W + j) and its tap
//     index i*KW + j; each thread keeps one 32-bit mask of which taps of its pixel fall inside the image (padding).
//     A gathered element then costs a broadcast shared load, a shift-and-test of the mask, an address multiply-add
//     and the copy, instead of the divisions and bounds arithmetic per element;
//   * tiles go global -> shared with cp.async (zero-fill for padding, K tail and pixel tail), STAGES deep, no
//     register staging, so several K-steps of loads are in flight per block and fewer registers allow more blocks;
//     the weights come in 16-byte copies when K % 4 == 0 and the pointer is 16-byte aligned (w_vec);
//   * dynamic shared memory: table (Kpad int2) + min(STAGES, K-steps) stage buffers, aliased by the output tile;
//   * epilogue: 16-byte stores when P % 4 == 0 (y_vec), hardware exp in SELU.
// Taps per kernel window must be <= 32 (one mask bit each); the host checks.
// ---------------------------------------------------------------------------------------------------------------
__device__ __forceinline__ void cp_async4(uint32_t* dst, const float* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  // src-size 0: nothing is read, the 4 destination bytes are zero-filled.
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 4 : 0));
}

// 8 bytes, of which the first `bytes` (0, 4 or 8) are read and the rest zero-filled: a tap pair of which only the
// first tap, or neither, lies inside the image.
__device__ __forceinline__ void cp_async8(uint32_t* dst, const float* src, int bytes) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;\n" ::"r"(d), "l"(src), "r"(bytes));
}

__device__ __forceinline__ void cp_async16(uint32_t* dst, const float* src, bool ok) {
  const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(ok ? 16 : 0));
}

// No "memory" clobber on the copies themselves: the shared-memory reads of a stage are ordered after its copies by
// wait_group (clobbers memory) and __syncthreads, and the volatile asm statements keep their order.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory"); }

// The K loop of both cp.async kernels (conv_pipelined, conv_patch). Prologue: STAGES-1 K-steps in flight; one commit
// group per K-step (empty past the end) keeps the count exact, so wait_group<STAGES-2> always means "K-step ks has
// landed". Each K-step then waits for its copies, refills the buffer of K-step ks-1 (every warp is past it: the
// barrier) with K-step ks+STAGES-1, and runs its MMAs. load_stage(ks, slot) issues K-step ks's copies into buffer
// slot; compute(slot) runs the MMAs on a landed buffer. On return every copy has landed (only empty groups could
// still be pending); the caller synchronises before reusing the buffers.
template <int STAGES, typename Load, typename Compute>
__device__ __forceinline__ void cp_async_k_loop(int ksteps, Load& load_stage, Compute&& compute) {
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < ksteps) load_stage(st, st);
    cp_async_commit();
  }
  int read_slot = 0, write_slot = STAGES - 1;  // = ks % STAGES and (ks + STAGES - 1) % STAGES
  for (int ks = 0; ks < ksteps; ++ks) {
    cp_async_wait<STAGES - 2>();  // this thread's copies of K-step ks have landed ...
    __syncthreads();              // ... and everyone's; everyone is also done with K-step ks-1's buffer
    if (ks + STAGES - 1 < ksteps) load_stage(ks + STAGES - 1, write_slot);  // refills K-step ks-1's buffer
    cp_async_commit();
    compute(read_slot);
    read_slot = read_slot + 1 == STAGES ? 0 : read_slot + 1;
    write_slot = write_slot + 1 == STAGES ? 0 : write_slot + 1;
  }
  cp_async_wait<0>();
}

// PAIR: the B tile is stored pixel-major ([BN][BK + 4], k contiguous) and gathered two taps (j, j+1) per 8-byte
// copy; see conv_pipelined.
template <int WARPS_M, int MT, int NT, int BK, int STAGES, bool PAIR = false>
struct PipeTile {
  static constexpr int WARPS_N = 8 / WARPS_M;
  static constexpr int BM = WARPS_M * MT * 16, BN = WARPS_N * NT * 8;
  static constexpr int LDA = BK + 4, LDB = BN + 8, LDC = BN + 8;  // conflict-free fragment reads (see above)
  static constexpr int LDBT = BK + 4;                              // PAIR: pixel-major B rows, as A's
  static constexpr int A_WORDS = BM * LDA, B_WORDS = PAIR ? BN * LDBT : BK * LDB, STAGE_WORDS = A_WORDS + B_WORDS;
  static constexpr int UNITS = PAIR ? BK / 2 : BK;  // table entries (gathered units) per K-step
  // Words before the stage buffers: the table (one int2 per unit), which after the K loop holds the BM biases.
  __host__ __device__ static int table_words(int Kpad) {
    const int words = 2 * (Kpad / BK) * UNITS;
    return words > BM ? words : BM;
  }
  // Dynamic shared memory for a reduction of K: table, then the stage buffers (or the output tile, after the loop).
  static size_t smem_bytes(int K) {
    const int ksteps = (K + BK - 1) / BK;
    const int stages = ksteps < STAGES ? ksteps : STAGES;
    const size_t tiles = std::max<size_t>((size_t)stages * STAGE_WORDS, (size_t)BM * LDC) * 4;
    return (size_t)table_words(ksteps * BK) * 4 + tiles;
  }
};

template <int WARPS_M, int MT, int NT, int BK, int STAGES, int MIN_BLOCKS, bool PAIR>
__global__ void __launch_bounds__(256, MIN_BLOCKS)
    conv_pipelined(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ y, ConvShape s, bool apply_selu, bool w_vec, bool y_vec) {
  using T = PipeTile<WARPS_M, MT, NT, BK, STAGES, PAIR>;
  constexpr int BM = T::BM, BN = T::BN, LDA = T::LDA, LDB = T::LDB, LDBT = T::LDBT, UNITS = T::UNITS;
  constexpr int KSTEP = 256 / BN;            // B-tile rows (units) per pass (each thread owns one pixel column)
  constexpr int B_PER_THREAD = UNITS / KSTEP;
  constexpr int A_VEC = BM * BK / 4 / 256;   // 16-byte weight copies per thread per stage
  constexpr int A_SCALAR = BM * BK / 256;    // 4-byte weight copies per thread per stage
  static_assert(STAGES >= 2 && 256 % BN == 0 && BN >= 32 && B_PER_THREAD % (PAIR ? 2 : 8) == 0 && BK % 8 == 0,
                "tile shape");
  static_assert(!PAIR || NT % 2 == 0, "PAIR reads B fragments of two n-blocks per ldmatrix");
  static_assert((BM * BK / 4) % 256 == 0, "16-byte weight copies must cover the A tile evenly");

  extern __shared__ __align__(16) uint32_t smem[];
  const int KK = s.KH * s.KW;
  const int K = s.C * KK;
  const int ksteps = (K + BK - 1) / BK;
  const int Kpad = ksteps * BK;
  const int Kunits = ksteps * UNITS;
  int2* table = reinterpret_cast<int2*>(smem);
  uint32_t* stage0 = smem + T::table_words(Kpad);
  const int P = s.P(), NP = s.NP();
  const int HW = s.H * s.W;  // host: C*H*W < 2^30, so every table offset fits an int

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
  const int o0 = blockIdx.y * BM;
  const int q0 = blockIdx.x * BN;

  // k -> (offset, tap's mask bit); k >= K gets no bit, so the K tail is zero-filled. Within each BK block the
  // entries are stored in the order the threads read them: thread row brow0 copies k = k0 + brow0 + KSTEP*r for
  // r = 0..B_PER_THREAD-1, so its entries are contiguous (16-byte loads, and no table load between two copies).
  // PAIR: one entry per tap pair (k, k+1) = (c, i, j) and (c, i, j+1), j even (KW even: a pair never straddles
  // two rows), with both taps' bits.
  for (int u = tid; u < Kunits; u += 256) {
    int2 e = make_int2(0, 0);
    const int k = PAIR ? 2 * u : u;
    if (k < K) {
      const int c = k / KK, tap = k - c * KK, i = tap / s.KW, j = tap - i * s.KW;
      e = make_int2(c * HW + i * s.W + j, (int)((PAIR ? 3u : 1u) << tap));
    }
    const int uu = u % UNITS;
    table[u - uu + (uu % KSTEP) * B_PER_THREAD + uu / KSTEP] = e;
  }

  // This thread's pixel column of the B tile: its top-left input element and which taps are inside the image.
  const int bcol = tid % BN, brow0 = tid / BN;  // brow0 is warp-uniform (BN >= 32): table reads broadcast
  // Where column bcol lives in the B tile: permuted within each warp's NT*8-wide slice (see warp_mma_tile_ldsm).
  const int bslot = bcol - bcol % (NT * 8) + b_column<NT>(bcol % (NT * 8));
  const int q = q0 + bcol;
  const bool q_ok = q < NP;
  const float* xp = x;
  int64_t ybase = 0;
  uint32_t mask = 0;
  if (q_ok) {
    const int n = q / P, p = q - n * P, ho = p / s.Wo, wo = p - ho * s.Wo;
    const int hb = ho * s.stride - s.pad_top, wb = wo * s.stride - s.pad_left;
    // Only taps with their bit set are dereferenced, so xp may point outside x when the window overhangs.
    xp = x + ((int64_t)n * s.C * HW + (int64_t)hb * s.W + wb);
    ybase = (int64_t)n * s.O * P + p;
    for (int i = 0; i < s.KH; ++i)
      if ((unsigned)(hb + i) < (unsigned)s.H)
        for (int j = 0; j < s.KW; ++j)
          if ((unsigned)(wb + j) < (unsigned)s.W) mask |= 1u << (i * s.KW + j);
  }
  __syncthreads();  // table complete

  auto load_stage = [&](int ks, int slot) {
    uint32_t* As = stage0 + slot * T::STAGE_WORDS;
    uint32_t* Bs = As + T::A_WORDS;
    const int k0 = ks * BK;
    if (w_vec) {
#pragma unroll
      for (int r = 0; r < A_VEC; ++r) {
        const int e = tid + 256 * r, mm = e / (BK / 4), kc = (e % (BK / 4)) * 4;
        const int o = o0 + mm, k = k0 + kc;
        const bool ok = o < s.O && k < K;  // K % 4 == 0: a 16-byte chunk is all in or all out
        cp_async16(As + mm * LDA + kc, w + (ok ? (int64_t)o * K + k : 0), ok);
      }
    } else {
#pragma unroll
      for (int r = 0; r < A_SCALAR; ++r) {
        const int e = tid + 256 * r, mm = e / BK, kk = e % BK;
        const int o = o0 + mm, k = k0 + kk;
        const bool ok = o < s.O && k < K;
        cp_async4(As + mm * LDA + kk, w + (ok ? (int64_t)o * K + k : 0), ok);
      }
    }
    if constexpr (PAIR) {
      // Tap pairs: 8-byte copies into the pixel's row of the pixel-major tile; a pair outside the image (both
      // taps: see pairable) or past K is zero-filled. The byte count, 4 x the pair's bits inside the image, would
      // also be right for a pair cut after its first tap.
      const int4* entries = reinterpret_cast<const int4*>(table + ks * UNITS + brow0 * B_PER_THREAD);
      uint32_t* Bp = Bs + bcol * LDBT + 2 * brow0;
#pragma unroll
      for (int r = 0; r < B_PER_THREAD / 2; ++r) {
        const int4 e = entries[r];
        cp_async8(Bp + 2 * KSTEP * (2 * r), xp + e.x, 4 * __popc(mask & (uint32_t)e.y));
        cp_async8(Bp + 2 * KSTEP * (2 * r + 1), xp + e.z, 4 * __popc(mask & (uint32_t)e.w));
      }
      return;
    }
    // Entries in groups of 8 (4 x 16-byte broadcast loads), then the group's 8 copies back to back: few
    // registers held, and no shared load between two copies (ptxas pads each LDS -> LDGSTS switch with 3 slots).
    const int4* entries = reinterpret_cast<const int4*>(table + k0 + brow0 * B_PER_THREAD);
#pragma unroll
    for (int r0 = 0; r0 < B_PER_THREAD / 2; r0 += 4) {
      int4 e[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) e[r] = entries[r0 + r];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        uint32_t* dst = Bs + (brow0 + 2 * (r0 + r) * KSTEP) * LDB + bslot;
        cp_async4(dst, xp + e[r].x, (mask & (uint32_t)e[r].y) != 0u);
        cp_async4(dst + KSTEP * LDB, xp + e[r].z, (mask & (uint32_t)e[r].w) != 0u);
      }
    }
  };

  float acc[MT][NT][4];
  zero_accumulators(acc);

  cp_async_k_loop<STAGES>(ksteps, load_stage, [&](int slot) {
    const uint32_t* As = stage0 + slot * T::STAGE_WORDS;
    if constexpr (PAIR)
      warp_mma_tile_nk<MT, NT, BK, LDA, LDBT>(acc, As + warp_m * MT * 16 * LDA,
                                              As + T::A_WORDS + warp_n * NT * 8 * LDBT, lane);
    else
      warp_mma_tile_ldsm<MT, NT, BK, LDA, LDB>(acc, As + warp_m * MT * 16 * LDA,
                                               As + T::A_WORDS + warp_n * NT * 8, lane);
  });
  __syncthreads();  // every warp's last MMAs have read their tiles, every thread its last table entries

  // The table's space (>= BM words) now holds the tile's bias; stage_accumulators' barrier publishes it.
  float* bs = reinterpret_cast<float*>(smem);
  if (tid < BM) bs[tid] = (bias != nullptr && o0 + tid < s.O) ? __ldg(bias + o0 + tid) : 0.f;
  float* c = reinterpret_cast<float*>(stage0);
  if (y_vec)  // block-uniform
    store_tile_rows_vec4<BM, BN, MT, NT, T::LDC>(acc, c, bs, warp_m, warp_n, lane, tid, q0, NP, o0, y, s.O, P,
                                                 apply_selu);
  else
    store_tile_rows<BM, BN, MT, NT, T::LDC>(acc, c, bs, warp_m, warp_n, lane, tid, q_ok, o0, y, ybase, s.O, P,
                                            apply_selu);
}

// ---------------------------------------------------------------------------------------------------------------
// Implicit GEMM for non-overlapping 2 x 2 patches (kernel 2 x 2, stride 2, no padding, H = 2*HO, W = 2*WO; conv4 of
// the encoder at n = 30: 8 x 8 -> 4 x 4, and conv3 at n = 16), variant "implicit-pipe" for these shapes.
// Here the im2col matrix needs no gather at all: every input element is used exactly once, so a block's pixel tile
// is IMGS whole images and each K-step is CK = 8 whole channel planes of each of them (HW contiguous floats,
// copied as they are, 16 bytes per cp.async, no table and no mask), into planes PS words apart in shared memory.
// The rearrangement into im2col order happens in the fragment loads instead, by choosing which k each of the
// m16n8k8 MMA's eight k-slots stands for: slots t and t+4 (t = 0..3) of k8-block kb are the horizontal tap pair
// j = 0, 1 of row i = t % 2 of channel 2*kb + t/2, so that
//   * B's b0/b1 (rows t and t+4 of the 8 x 8 B fragment, pixel g) are two adjacent floats of one input row: one
//     8-byte shared load per n8-block, no permuted copy; and
//   * A's a0/a2 (row g, slots t and t+4) are weights k = 4c + 2i + {0, 1}, adjacent in W's natural (c, i, j) order:
//     the weights are copied as they are too, and a0/a2 (a1/a3 for row g+8) come in one 8-byte load each.
// Banks: B words (2*ho + t%2)*W + 2*wo + (t/2)*PS with PS = 16 mod 32, A rows LDA = 40 = 8 mod 32 words apart: for
// 4 x 4 output images each half-warp's 16 8-byte loads cover the 32 banks once (conflict-free; other image sizes
// are correct, maybe with conflicts).
// The epilogue stores straight from the accumulators (bias + SELU in registers): a warp's 8-byte stores cover 8
// output rows x 32 contiguous, 32-byte aligned bytes (P % 8 == 0), so every sector is written whole and no shared
// staging or extra barrier is needed.
// Why: the generic kernel gathers conv4's taps with a per-element table lookup and mask test and rounds every
// fragment it reads; on the H200 it ran 15.6M warp instructions (12 per MMA) and 320 tiles on 264 block slots
// (results/conv_probe.md). Tiles here are whole images: at batch 640, 64 tiles of 10 images x 2 of 128 channels
// (128 x 160, one block of 8 warps per SM, 4 stages) fill the 132 SMs in one wave; 0.0276 ms against 0.0437
// (10.0M warp instructions with the ldmatrix A loads, LDSM_A).
// ---------------------------------------------------------------------------------------------------------------
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int HO, int WO, bool LDSM_A, int NWARPS = 8>
struct PatchTile {
  static constexpr int WARPS_N = NWARPS / WARPS_M, THREADS = 32 * NWARPS;
  static constexpr int BM = WARPS_M * MT * 16, BN = WARPS_N * NT * 8;
  static constexpr int W = 2 * WO, HW = 4 * HO * WO, P = HO * WO;
  static constexpr int CK = 8;                               // channels per K-step: BK = 4 * CK = 32
  // A rows: = 8 mod 32 words for conflict-free 8-byte loads, = 4 mod 32 for conflict-free ldmatrix (LDSM_A)
  static constexpr int LDA = LDSM_A ? 4 * CK + 4 : 4 * CK + 8;
  static constexpr int PS = (HW + 15) / 32 * 32 + 16;        // = 16 mod 32 words: conflict-free 8-byte B loads
  static constexpr int A_WORDS = BM * LDA, B_WORDS = IMGS * CK * PS, STAGE_WORDS = A_WORDS + B_WORDS;
  static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_WORDS * 4;
  static_assert(BN == IMGS * P, "a pixel tile is IMGS whole images");
  static_assert(P % 8 == 0 && HW % 4 == 0, "n8-blocks within one image; planes in 16-byte chunks");
};

__device__ __forceinline__ uint2 lds64(const uint32_t* p) { return *reinterpret_cast<const uint2*>(p); }

template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO, bool LDSM_A, int NWARPS>
__global__ void __launch_bounds__(32 * NWARPS, MIN_BLOCKS)
    conv_patch(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
               float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = PatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO, LDSM_A, NWARPS>;
  constexpr int TH = T::THREADS;
  constexpr int BM = T::BM, LDA = T::LDA, PS = T::PS, CK = T::CK, HW = T::HW, P = T::P, W = T::W;
  constexpr int A_CHUNKS = BM * CK;             // 16-byte weight chunks per K-step: BM rows of 4*CK weights
  constexpr int B_CHUNKS = IMGS * CK * HW / 4;  // 16-byte input chunks per K-step: IMGS x CK planes
  static_assert(A_CHUNKS % TH == 0, "weight chunks spread evenly over the threads");

  extern __shared__ __align__(16) uint32_t smem[];
  const int C = s.C, K = 4 * C, O = s.O, N = s.N;
  const int ksteps = C / CK;  // host: C % CK == 0

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
  const int g = lane / 4, t = lane % 4;
  const int o0 = blockIdx.y * BM;
  const int n0 = blockIdx.x * IMGS;

  // This thread's copies, set up once: element offsets of its weight chunks (row o0 + tid / CK + r * TH / CK) and
  // input chunks (plane (tid + TH r) / (HW / 4) of the tile: image, channel) at K-step 0, which then advance by
  // 4*CK weights and CK planes per K-step, and whether each is in range (channel rows past O, images past N: the
  // copy zero-fills and reads nothing). Offsets fit an int (host: N*C*HW and O*K < 2^31).
  constexpr int A_PER = A_CHUNKS / TH, B_PER = (B_CHUNKS + TH - 1) / TH;
  int a_src[A_PER], b_src[B_PER];
  uint32_t ok_bits = 0;
#pragma unroll
  for (int r = 0; r < A_PER; ++r) {
    const int row = (tid + TH * r) / CK, q = (tid + TH * r) % CK;
    a_src[r] = (o0 + row) * K + 4 * q;
    if (o0 + row < O) ok_bits |= 1u << r;
  }
#pragma unroll
  for (int r = 0; r < B_PER; ++r) {
    const int e = tid + TH * r, plane = e / (HW / 4), q = e % (HW / 4), img = plane / CK, c = plane % CK;
    b_src[r] = ((n0 + img) * C + c) * HW + 4 * q;
    if ((B_CHUNKS % TH == 0 || e < B_CHUNKS) && n0 + img < N) ok_bits |= 1u << (A_PER + r);
  }

  auto load_stage = [&](int ks, int slot) {
    uint32_t* As = smem + slot * T::STAGE_WORDS;
    uint32_t* Bs = As + T::A_WORDS;
    const int k0 = ks * 4 * CK, x0 = ks * CK * HW;
#pragma unroll
    for (int r = 0; r < A_PER; ++r) {
      const int e = tid + TH * r;
      const bool ok = (ok_bits >> r) & 1u;
      cp_async16(As + (e / CK) * LDA + 4 * (e % CK), w + (ok ? a_src[r] + k0 : 0), ok);
    }
#pragma unroll
    for (int r = 0; r < B_PER; ++r) {
      const int e = tid + TH * r;
      if (B_CHUNKS % TH != 0 && e >= B_CHUNKS) continue;  // past the tile: no copy at all
      const bool ok = (ok_bits >> (A_PER + r)) & 1u;
      cp_async16(Bs + (e / (HW / 4)) * PS + 4 * (e % (HW / 4)), x + (ok ? b_src[r] + x0 : 0), ok);
    }
  };

  // This thread's fragment offsets inside a stage (k8-block 0): A rows g (+8) of each m16 tile at slots t, t+4;
  // B: for each n8-block j, pixel g's tap pair in row t % 2 of channel t / 2.
  // LDSM_A: the k-slots are W's natural order instead (slot s of k8-block kb = weight 8 kb + s: tap s % 4 of
  // channel 2 kb + s / 4), so that A comes by ldmatrix.x4 straight into the MMA's register quad (the 8-byte pair
  // loads need register moves to form it: ~20 per k8-block in the SASS); B's b0/b1 are then tap t of channels
  // 2 kb and 2 kb + 1, two 4-byte loads (lanes: pixel offsets {0,2,4,6,16,18,20,22} + tap offsets {0,1,8,9},
  // conflict-free).
  const int mat = lane / 8;
  const int a_off = LDSM_A ? (warp_m * MT * 16 + lane % 8 + (mat & 1) * 8) * LDA + (mat >> 1) * 4
                           : (warp_m * MT * 16 + g) * LDA + (t / 2) * 4 + (t % 2) * 2;
  int b_off[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int nb = warp_n * NT + j, img = nb / (P / 8), p = (nb % (P / 8)) * 8 + g, ho = p / WO, wo = p % WO;
    b_off[j] = LDSM_A ? img * CK * PS + (2 * ho + t / 2) * W + 2 * wo + t % 2
                      : img * CK * PS + (t / 2) * PS + (2 * ho + t % 2) * W + 2 * wo;
  }

  float acc[MT][NT][4];
  zero_accumulators(acc);

  cp_async_k_loop<STAGES>(ksteps, load_stage, [&](int slot) {
    const uint32_t* As = smem + slot * T::STAGE_WORDS;
    const uint32_t* Bs = As + T::A_WORDS;
#pragma unroll
    for (int kb = 0; kb < CK / 2; ++kb) {
      uint32_t af[MT][4], bf[NT][2];
      if constexpr (LDSM_A) {
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          ldsm_x4(af[i], As + a_off + i * 16 * LDA + kb * 8);
#pragma unroll
          for (int v = 0; v < 4; ++v) af[i][v] = to_tf32(__uint_as_float(af[i][v]));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          bf[j][0] = to_tf32(__uint_as_float(Bs[b_off[j] + 2 * kb * PS]));
          bf[j][1] = to_tf32(__uint_as_float(Bs[b_off[j] + (2 * kb + 1) * PS]));
        }
      } else {
#pragma unroll
        for (int i = 0; i < MT; ++i) {
          const uint2 lo = lds64(As + a_off + i * 16 * LDA + kb * 8);
          const uint2 hi = lds64(As + a_off + (i * 16 + 8) * LDA + kb * 8);
          af[i][0] = to_tf32(__uint_as_float(lo.x));
          af[i][1] = to_tf32(__uint_as_float(hi.x));
          af[i][2] = to_tf32(__uint_as_float(lo.y));
          af[i][3] = to_tf32(__uint_as_float(hi.y));
        }
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          const uint2 v = lds64(Bs + b_off[j] + kb * 2 * PS);
          bf[j][0] = to_tf32(__uint_as_float(v.x));
          bf[j][1] = to_tf32(__uint_as_float(v.y));
        }
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_tf32(acc[i][j], af[i], bf[j]);
    }
  });  // nothing reads shared memory after this

  // Epilogue from the accumulators: c0/c1 are (row g, pixels 2t, 2t+1), c2/c3 row g + 8.
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = o0 + warp_m * MT * 16 + i * 16 + g + 8 * h;
      if (o >= O) continue;
      const float bv = bias != nullptr ? __ldg(bias + o) : 0.f;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int nb = warp_n * NT + j, n = n0 + nb / (P / 8), p = (nb % (P / 8)) * 8 + 2 * t;
        if (n >= N) continue;
        float v0 = acc[i][j][2 * h] + bv, v1 = acc[i][j][2 * h + 1] + bv;
        if (apply_selu) {
          v0 = selu_fast(v0);
          v1 = selu_fast(v1);
        }
        *reinterpret_cast<float2*>(y + ((int64_t)n * O + o) * P + p) = make_float2(v0, v1);
      }
    }
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

// ---------------------------------------------------------------------------------------------------------------
// Host-side helpers.
// ---------------------------------------------------------------------------------------------------------------
int num_sms() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms > 0 ? sms : 1;
}

unsigned grid_1d(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return (unsigned)std::max<int64_t>(1, std::min<int64_t>(blocks, (int64_t)num_sms() * 32));
}

View plain(const float* p, int64_t rs, int64_t cs) { return View{p, rs, cs, 1, 0}; }
// NCHW tensor (N, R, P) as an R x (N*P) matrix.
View image(const float* p, int R, int P) { return View{p, P, 0, P, (int64_t)R * P}; }

template <bool A_IMG, bool B_IMG, bool C_IMG, bool ATOMIC>
cudaError_t launch_gemm(Gemm which, const GemmArgs& args, int splits, cudaStream_t stream) {
  if (which == Gemm::Global) {
    dim3 grid((args.Nd + 31) / 32, (args.M + 7) / 8, splits);
    gemm_global<A_IMG, B_IMG, C_IMG, ATOMIC><<<grid, dim3(32, 8), 0, stream>>>(args);
  } else {
    dim3 grid((args.Nd + SBN - 1) / SBN, (args.M + SBM - 1) / SBM, splits);
    gemm_shared<A_IMG, B_IMG, C_IMG, ATOMIC><<<grid, 256, 0, stream>>>(args);
  }
  return cudaGetLastError();
}

template <int WARPS_M, int MT, int NT, int BK, int MIN_BLOCKS>
cudaError_t launch_implicit_tile(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                                 bool selu_, cudaStream_t stream) {
  constexpr int BM = WARPS_M * MT * 16, BN = (8 / WARPS_M) * NT * 8;
  dim3 grid((s.NP() + BN - 1) / BN, (s.O + BM - 1) / BM);
  if (s.KH == 3 && s.KW == 3)
    conv_implicit<WARPS_M, MT, NT, BK, MIN_BLOCKS, 3, 3><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  else if (s.KH == 2 && s.KW == 2)
    conv_implicit<WARPS_M, MT, NT, BK, MIN_BLOCKS, 2, 2><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  else  // other kernel sizes: runtime index arithmetic needs more registers, so K-steps of 16 keep it spill-free
    conv_implicit<WARPS_M, MT, NT, 16, MIN_BLOCKS, 0, 0><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  return cudaGetLastError();
}

// Blocks of `kernel` that fit on one SM of the current device with `bytes` of dynamic shared memory (0 if none).
// Asked once per (kernel, device, bytes) and cached, so that repeated launches (and launches inside CUDA-graph
// capture, after an eager warm-up) make no runtime calls besides the launch. A failed query's error is cleared so
// that the launch check after it does not report it.
template <typename Kernel>
int resident_blocks(Kernel kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t>, int> cache;
  int dev = 0;
  cudaGetDevice(&dev);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), dev, bytes);
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    blocks = 0;
  }
  cache.emplace(key, blocks);
  return blocks;
}

// Dynamic shared memory above 48 KiB must be opted into per kernel and device; false if `bytes` cannot be had.
// The limit is raised once per (kernel, device), to the device's opt-in maximum (so callers with different shapes
// never undo each other); each launch still asks only for what it needs.
template <typename Kernel>
bool smem_fits(Kernel kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> optin_of;  // -> opt-in maximum, or -1 if raising it failed
  int dev = 0;
  cudaGetDevice(&dev);
  int optin = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), dev);
    auto it = optin_of.find(key);
    if (it == optin_of.end()) {
      int max_optin = 0;
      cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_optin) != cudaSuccess) {
        (void)cudaGetLastError();
        max_optin = -1;
      }
      it = optin_of.emplace(key, max_optin).first;
    }
    optin = it->second;
  }
  return optin >= 0 ? bytes <= (size_t)std::max(optin, 48 * 1024) : bytes <= 48 * 1024;
}

template <int WARPS_M, int MT, int NT, int BK, int STAGES, int MIN_BLOCKS, bool PAIR = false>
struct PipeLaunch {
  using T = PipeTile<WARPS_M, MT, NT, BK, STAGES, PAIR>;
  static constexpr auto kernel = conv_pipelined<WARPS_M, MT, NT, BK, STAGES, MIN_BLOCKS, PAIR>;

  static bool prepare(const ConvShape& s, size_t* bytes) {
    *bytes = T::smem_bytes(s.K());
    return smem_fits(kernel, *bytes);
  }
  static int64_t tiles(const ConvShape& s) {
    return (int64_t)((s.NP() + T::BN - 1) / T::BN) * ((s.O + T::BM - 1) / T::BM);
  }
  // Issue cost of the busiest SM, in warp-instructions: waves x resident blocks x per-tile instructions, with
  // kstep_insns the main loop's executed SASS per K-step and ~300 for table, mask and epilogue (sm_90, nvcc 13.0;
  // counted with cuobjdump on the w_vec path). Infinite when the block does not fit.
  static double cost(const ConvShape& s, size_t bytes, double kstep_insns) {
    const int per_sm = resident_blocks(kernel, bytes);
    if (per_sm <= 0) return 1e300;
    const int64_t slots = (int64_t)per_sm * num_sms(), waves = (tiles(s) + slots - 1) / slots;
    const int ksteps = (s.K() + BK - 1) / BK;
    return (double)waves * per_sm * 8.0 * (ksteps * kstep_insns + 300.0);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, size_t bytes, cudaStream_t stream) {
    const bool w_vec = s.K() % 4 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
    const bool y_vec = s.P() % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    dim3 grid((s.NP() + T::BN - 1) / T::BN, (s.O + T::BM - 1) / T::BM);
    kernel<<<grid, 256, bytes, stream>>>(x, w, bias, y, s, selu_, w_vec, y_vec);
    return cudaGetLastError();
  }
};

// Layers with <= 32 filters (conv1: K = 27, one K-step): 32 x 128 tiles, 4 blocks per SM so that one block's
// gather overlaps the others' MMAs and stores. Otherwise 64 x 128 tiles (3 stages, 2 blocks per SM; 290 SASS
// instructions per 32-deep K-step for 32 MMAs) or 64 x 64 (3 stages, 3 blocks per SM; 217 for 16 MMAs), whichever
// costs the busiest SM fewer issue slots (PipeLaunch::cost): the wide tile unless it leaves most SMs idle.
// Layers with >= 128 filters (conv3, conv4): 128 x 64 tiles (3 stages, 2 blocks per SM), 11% faster than 64 x 128
// on conv3 and conv4 on the H200 (benchmarks/conv_harness.cu sweep, results/conv_probe.md); and where the taps
// pair up (pairable below: conv4 at sizes conv_patch does not take), the same tile gathering two taps per 8-byte
// copy into a pixel-major B tile.
using PipeSmallO = PipeLaunch<2, 1, 8, 32, 2, 2>;
using PipeWide = PipeLaunch<2, 2, 4, 32, 3, 2>;
using PipeNarrow = PipeLaunch<2, 2, 2, 32, 3, 3>;
using PipeTall = PipeLaunch<4, 2, 4, 32, 3, 2>;
using PipeTallPair = PipeLaunch<4, 2, 4, 32, 3, 2, true>;

// Taps (j, j+1) of a window can be copied as one 8-byte unit when every pair starts 8-byte aligned: KW even (pairs
// never straddle rows), W even (rows and channels start aligned), stride and left padding even (windows, hence
// pairs, start at even columns), x 8-byte aligned. A pair then never straddles the image's left or right edge
// (it starts at an even column and W is even): both taps are in or both out, 8 bytes copied or zero-filled.
bool pairable(const float* x, const ConvShape& s) {
  return s.KW % 2 == 0 && s.W % 2 == 0 && s.stride % 2 == 0 && s.pad_left % 2 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 8 == 0;
}

// The 2 x 2 patch kernel (conv_patch) for (HO, WO) outputs: it takes kernel 2 x 2, stride 2, no top/left padding,
// an input of exactly 2*HO x 2*WO (a bottom/right padding row or column would never be read), C a multiple of 8
// (whole K-steps), x and w 16-byte aligned (plane and weight-row copies), y 8-byte aligned (pixel-pair stores).
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO, bool LDSM_A,
          int NWARPS = 8>
struct PatchLaunch {
  using T = PatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO, LDSM_A, NWARPS>;
  static constexpr auto kernel = conv_patch<WARPS_M, MT, NT, IMGS, STAGES, MIN_BLOCKS, HO, WO, LDSM_A, NWARPS>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return s.KH == 2 && s.KW == 2 && s.stride == 2 && s.pad_top == 0 && s.pad_left == 0 && s.Ho == HO &&
           s.Wo == WO && s.H == 2 * HO && s.W == 2 * WO && s.C % T::CK == 0 &&
           reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
           reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
           (int64_t)(s.N + IMGS) * s.C * T::HW < (int64_t(1) << 31) &&  // 32-bit copy offsets, tails included
           (int64_t)(s.O + T::BM) * s.K() < (int64_t(1) << 31) && smem_fits(kernel, T::SMEM_BYTES);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    dim3 grid((s.N + IMGS - 1) / IMGS, (s.O + T::BM - 1) / T::BM);
    kernel<<<grid, T::THREADS, T::SMEM_BYTES, stream>>>(x, w, bias, y, s, selu_);
    return cudaGetLastError();
  }
};

// The product's two patch tiles (harness names R245_10_4_1 and R425_5_3_2).
using PatchBig = PatchLaunch<2, 4, 5, 10, 4, 1, 4, 4, true>;
using PatchSmall = PatchLaunch<4, 2, 5, 5, 3, 2, 4, 4, true>;

// The direct FP32 kernel (conv_direct3x3) for C input channels and PIX pixels per thread: it takes 3 x 3 kernels at
// stride 1 with 32 output channels (any padding, any image size).
// The n = 30 geometry (conv1 of the thesis workload) gets its compile-time instantiation, other sizes the generic one.
template <int C, int PIX, int THREADS = 256>
struct DirectLaunch {
  static bool takes(const ConvShape& s) {
    return s.C == C && s.O == 32 && s.KH == 3 && s.KW == 3 && s.stride == 1 &&
           (int64_t)s.N * s.C * s.H * s.W < (int64_t(1) << 31) && (int64_t)s.O * s.P() < (int64_t(1) << 31);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    constexpr int PIXELS_PER_BLOCK = THREADS * PIX;
    const unsigned blocks = (unsigned)(((int64_t)s.NP() + PIXELS_PER_BLOCK - 1) / PIXELS_PER_BLOCK);
    const bool n30 = s.H == 30 && s.W == 30 && s.Ho == 30 && s.Wo == 30 && s.pad_top == 1 && s.pad_left == 1;
    if (n30)
      conv_direct3x3<C, PIX, 30><<<blocks, THREADS, 0, stream>>>(x, w, bias, y, s, selu_);
    else
      conv_direct3x3<C, PIX, 0><<<blocks, THREADS, 0, stream>>>(x, w, bias, y, s, selu_);
    return cudaGetLastError();
  }
};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Launchers (im2col.h).
// ---------------------------------------------------------------------------------------------------------------
cudaError_t im2col(const float* x, float* col, const ConvShape& s, cudaStream_t stream) {
  im2col_kernel<<<grid_1d((int64_t)s.K() * s.NP(), 256), 256, 0, stream>>>(x, col, s);
  return cudaGetLastError();
}

cudaError_t gemm_forward(Gemm which, const float* w, const float* col, const float* bias, float* y,
                         const ConvShape& s, bool selu_, cudaStream_t stream) {
  GemmArgs a{};
  a.a = plain(w, s.K(), 1);           // W (O, K)
  a.b = plain(col, s.NP(), 1);        // col (K, NP)
  a.c = y;
  a.cview = image(y, s.O, s.P());     // Y (O, NP) stored NCHW
  a.bias = bias;
  a.M = s.O; a.Nd = s.NP(); a.Kd = s.K(); a.kchunk = s.K(); a.selu = selu_;
  return launch_gemm<false, false, true, false>(which, a, 1, stream);
}

cudaError_t implicit_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                             bool selu_, cudaStream_t stream) {
  // Tile choice. Few output channels and a short K (conv1: 32 channels, K = 27): 32 x 128 tiles with K-steps of
  // 32, so the whole reduction is one gather (one memory latency per tile, not two), 2 blocks per SM — the
  // layer is bound by writing its output. Otherwise 64 x 128 tiles (K-steps of 16, 2 blocks per SM, under 128
  // registers without spills), or 64 x 64 when 64 x 128 tiles would fill the chip less than ~3 times over.
  if (s.O <= 32) return launch_implicit_tile<2, 1, 4, 32, 2>(x, w, bias, y, s, selu_, stream);
  const int64_t tiles = (int64_t)((s.NP() + 127) / 128) * ((s.O + 63) / 64);
  if (tiles < 3 * num_sms()) return launch_implicit_tile<2, 2, 2, 16, 2>(x, w, bias, y, s, selu_, stream);
  return launch_implicit_tile<2, 2, 4, 16, 2>(x, w, bias, y, s, selu_, stream);
}

cudaError_t implicit_pipelined_forward(const float* x, const float* w, const float* bias, float* y,
                                      const ConvShape& s, bool selu_, cudaStream_t stream) {
  // Non-overlapping 2 x 2 patches of 8 x 8 images (conv4 at n = 30, conv3 at n = 16): the whole-plane kernel. Its
  // 128 x 160 tile (10 images) when that still gives most SMs a block, else 128 x 80 (5 images, 2 blocks per SM):
  // at batch 7, 0.018 against 0.024 ms (results/conv_probe.md).
  if (PatchBig::takes(x, w, y, s)) {
    const int64_t big_tiles = (int64_t)((s.N + 9) / 10) * ((s.O + 127) / 128);
    if (4 * big_tiles >= 3 * (int64_t)num_sms()) return PatchBig::launch(x, w, bias, y, s, selu_, stream);
    if (PatchSmall::takes(x, w, y, s)) return PatchSmall::launch(x, w, bias, y, s, selu_, stream);
  }
  // Shapes the table-driven kernel does not take fall back to the register-staged one: more than 32 taps per
  // window (the mask is 32 bits) or an image too large for 32-bit table offsets.
  const bool fits = s.KH * s.KW <= 32 && (int64_t)s.C * s.H * s.W < (int64_t(1) << 30);
  size_t bytes = 0;
  if (fits && s.O <= 32 && PipeSmallO::prepare(s, &bytes))
    return PipeSmallO::launch(x, w, bias, y, s, selu_, bytes, stream);
  if (fits && s.O >= 128) {
    if (pairable(x, s) && PipeTallPair::prepare(s, &bytes))
      return PipeTallPair::launch(x, w, bias, y, s, selu_, bytes, stream);
    if (PipeTall::prepare(s, &bytes)) return PipeTall::launch(x, w, bias, y, s, selu_, bytes, stream);
  }
  size_t wide_bytes = 0, narrow_bytes = 0;
  const bool wide_ok = fits && PipeWide::prepare(s, &wide_bytes);
  const bool narrow_ok = fits && PipeNarrow::prepare(s, &narrow_bytes);
  const double wide_cost = wide_ok ? PipeWide::cost(s, wide_bytes, 290.0) : 1e300;
  const double narrow_cost = narrow_ok ? PipeNarrow::cost(s, narrow_bytes, 217.0) : 1e300;
  if (wide_cost < 1e300 && wide_cost <= narrow_cost)
    return PipeWide::launch(x, w, bias, y, s, selu_, wide_bytes, stream);
  if (narrow_cost < 1e300) return PipeNarrow::launch(x, w, bias, y, s, selu_, narrow_bytes, stream);
  return implicit_forward(x, w, bias, y, s, selu_, stream);
}

cudaError_t selu_backward(const float* gy, const float* y, float* gz, int64_t n, cudaStream_t stream) {
  selu_backward_kernel<<<grid_1d(n, 256), 256, 0, stream>>>(gy, y, gz, n);
  return cudaGetLastError();
}

cudaError_t grad_col(Gemm which, const float* w, const float* gz, float* gcol, const ConvShape& s,
                     cudaStream_t stream) {
  GemmArgs a{};
  a.a = plain(w, 1, s.K());           // W^T (K, O)
  a.b = image(gz, s.O, s.P());        // gz (O, NP) stored NCHW
  a.c = gcol;
  a.cview = plain(gcol, s.NP(), 1);   // gcol (K, NP)
  a.M = s.K(); a.Nd = s.NP(); a.Kd = s.O; a.kchunk = s.O;
  return launch_gemm<false, true, false, false>(which, a, 1, stream);
}

cudaError_t col2im(const float* gcol, float* gx, const ConvShape& s, cudaStream_t stream) {
  col2im_kernel<<<grid_1d((int64_t)s.N * s.C * s.H * s.W, 256), 256, 0, stream>>>(gcol, gx, s);
  return cudaGetLastError();
}

cudaError_t grad_weight(Gemm which, const float* gz, const float* col, float* gw, const ConvShape& s,
                        cudaStream_t stream) {
  GemmArgs a{};
  a.a = image(gz, s.O, s.P());        // gz (O, NP) stored NCHW
  a.b = plain(col, 1, s.NP());        // col^T (NP, K)
  a.c = gw;
  a.cview = plain(gw, s.K(), 1);      // gw (O, K)
  a.M = s.O; a.Nd = s.K(); a.Kd = s.NP();
  // The reduction (all pixels of the batch) is long and the output small: split it so that ~4 blocks per SM run.
  const int tiles = which == Gemm::Global ? ((s.K() + 31) / 32) * ((s.O + 7) / 8)
                                          : ((s.K() + SBN - 1) / SBN) * ((s.O + SBM - 1) / SBM);
  int splits = std::max(1, 4 * num_sms() / tiles);
  splits = std::min(splits, std::max(1, s.NP() / (8 * SBK)));
  a.kchunk = ((s.NP() + splits - 1) / splits + SBK - 1) / SBK * SBK;
  splits = (s.NP() + a.kchunk - 1) / a.kchunk;
  return launch_gemm<true, false, false, true>(which, a, splits, stream);
}

cudaError_t grad_bias(const float* gz, float* gb, const ConvShape& s, cudaStream_t stream) {
  const int chunks = std::max(1, std::min(s.N, 4 * num_sms() / std::max(1, s.O)));
  const int chunk = (s.N + chunks - 1) / chunks;
  grad_bias_kernel<<<dim3(s.O, (s.N + chunk - 1) / chunk), 256, 0, stream>>>(gz, gb, s, chunk);
  return cudaGetLastError();
}

}  // namespace mscred_im2col
