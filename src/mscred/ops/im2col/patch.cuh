// conv_patch: the implicit GEMM for non-overlapping 2 x 2 patches (conv4 at n = 30).
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "pipelined.cuh"

namespace mscred_im2col {
namespace {

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

// Pieces of conv_patch that conv_patch_pad (patch_pad.cuh: conv3's 15 x 15 inputs) shares.

// This thread's fragment offsets inside a stage (k8-block 0): A rows g (+8) of each m16 tile at slots t, t+4;
// B: for each n8-block j, pixel g's tap pair in row t % 2 of channel t / 2.
// LDSM_A: the k-slots are W's natural order instead (slot s of k8-block kb = weight 8 kb + s: tap s % 4 of
// channel 2 kb + s / 4), so that A comes by ldmatrix.x4 straight into the MMA's register quad (the 8-byte pair
// loads need register moves to form it: ~20 per k8-block in the SASS); B's b0/b1 are then tap t of channels
// 2 kb and 2 kb + 1, two 4-byte loads (lanes: pixel offsets {0,2,4,6,16,18,20,22} + tap offsets {0,1,8,9},
// conflict-free).
template <typename T, int MT, int NT, int WO, bool LDSM_A>
__device__ __forceinline__ void patch_fragment_offsets(int lane, int warp_m, int warp_n, int& a_off, int (&b_off)[NT]) {
  constexpr int LDA = T::LDA, PS = T::PS, CK = T::CK, P = T::P, W = T::W;
  const int g = lane / 4, t = lane % 4, mat = lane / 8;
  a_off = LDSM_A ? (warp_m * MT * 16 + lane % 8 + (mat & 1) * 8) * LDA + (mat >> 1) * 4
                 : (warp_m * MT * 16 + g) * LDA + (t / 2) * 4 + (t % 2) * 2;
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int nb = warp_n * NT + j, img = nb / (P / 8), p = (nb % (P / 8)) * 8 + g, ho = p / WO, wo = p % WO;
    b_off[j] = LDSM_A ? img * CK * PS + (2 * ho + t / 2) * W + 2 * wo + t % 2
                      : img * CK * PS + (t / 2) * PS + (2 * ho + t % 2) * W + 2 * wo;
  }
}

// The MMAs of one K-step (CK channels: CK / 2 k8-blocks) on a landed stage: A at As, B at Bs. MASKED (LDSM_A only):
// this lane's B values of n-block j count as zero unless bit j of b_valid is set (a tap on a padding row or column
// of an input staged without its padding: patch_pad.cuh).
template <typename T, int MT, int NT, bool LDSM_A, bool MASKED = false>
__device__ __forceinline__ void patch_stage_mma(float (&acc)[MT][NT][4], const uint32_t* As, const uint32_t* Bs,
                                                int a_off, const int (&b_off)[NT], uint32_t b_valid = ~0u) {
  static_assert(!MASKED || LDSM_A, "masking is written for the ldmatrix variant's B loads");
  constexpr int LDA = T::LDA, PS = T::PS, CK = T::CK;
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
        if (MASKED && !((b_valid >> j) & 1u)) bf[j][0] = bf[j][1] = 0u;
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
}

// Epilogue from the accumulators: c0/c1 are (row g, pixels 2t, 2t+1), c2/c3 row g + 8. NOSTORE: a probe.
template <int MT, int NT, int P, bool NOSTORE = false>
__device__ __forceinline__ void patch_epilogue(const float (&acc)[MT][NT][4], float* __restrict__ y,
                                               const float* __restrict__ bias, int O, int N, int o_warp, int n0,
                                               int nb0, int lane, bool apply_selu) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int o = o_warp + i * 16 + g + 8 * h;
      if (o >= O) continue;
      const float bv = bias != nullptr ? __ldg(bias + o) : 0.f;
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int nb = nb0 + j, n = n0 + nb / (P / 8), p = (nb % (P / 8)) * 8 + 2 * t;
        if (n >= N) continue;
        float v0 = acc[i][j][2 * h] + bv, v1 = acc[i][j][2 * h + 1] + bv;
        if (apply_selu) {
          v0 = selu_fast(v0);
          v1 = selu_fast(v1);
        }
        if (NOSTORE && v0 != 1.2345f) continue;  // no store (unless a value no run produces)
        *reinterpret_cast<float2*>(y + ((int64_t)n * O + o) * P + p) = make_float2(v0, v1);
      }
    }
}

// PROBE (harness builds only, rows R245_no*: timings that bound the kernel, outputs wrong): 1 = no copies (the
// stages hold whatever shared memory held), 2 = no MMAs, 3 = no output stores. The product instantiates 0 only.
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO, bool LDSM_A, int NWARPS,
          int PROBE = 0>
__global__ void __launch_bounds__(32 * NWARPS, MIN_BLOCKS)
    conv_patch(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
               float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = PatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO, LDSM_A, NWARPS>;
  constexpr int TH = T::THREADS;
  constexpr int BM = T::BM, LDA = T::LDA, PS = T::PS, CK = T::CK, HW = T::HW, P = T::P;
  constexpr int A_CHUNKS = BM * CK;             // 16-byte weight chunks per K-step: BM rows of 4*CK weights
  constexpr int B_CHUNKS = IMGS * CK * HW / 4;  // 16-byte input chunks per K-step: IMGS x CK planes
  static_assert(A_CHUNKS % TH == 0, "weight chunks spread evenly over the threads");

  extern __shared__ __align__(16) uint32_t smem[];
  const int C = s.C, K = 4 * C, O = s.O, N = s.N;
  const int ksteps = C / CK;  // host: C % CK == 0

  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
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
    if (PROBE == 1) return;
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

  int a_off, b_off[NT];
  patch_fragment_offsets<T, MT, NT, WO, LDSM_A>(lane, warp_m, warp_n, a_off, b_off);

  float acc[MT][NT][4];
  zero_accumulators(acc);

  cp_async_k_loop<STAGES>(ksteps, load_stage, [&](int slot) {
    const uint32_t* As = smem + slot * T::STAGE_WORDS;
    if (PROBE != 2) patch_stage_mma<T, MT, NT, LDSM_A>(acc, As, As + T::A_WORDS, a_off, b_off);
  });  // nothing reads shared memory after this

  patch_epilogue<MT, NT, P, PROBE == 3>(acc, y, bias, O, N, o0 + warp_m * MT * 16, n0, warp_n * NT, lane,
                                        apply_selu);
}

}  // namespace
}  // namespace mscred_im2col
