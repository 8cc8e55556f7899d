// The pipelined implicit GEMM (conv_pipelined, variant "implicit-pipe"): cp.async helpers, the K loop
// shared with conv_patch, the table-driven gather.
// Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <algorithm>
#include <cstdint>

#include "im2col.h"
#include "implicit.cuh"

namespace mscred_im2col {
namespace {

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

// PROBE (harness builds only, rows p424_no*: timings that bound the kernel, outputs wrong): 1 = no copies (the stages
// hold whatever shared memory held), 2 = no MMAs, 3 = no epilogue (no staging, bias, SELU or stores). The product
// instantiates 0 only.
template <int WARPS_M, int MT, int NT, int BK, int STAGES, int MIN_BLOCKS, bool PAIR, int PROBE = 0>
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
    if (PROBE == 1) return;
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
    if constexpr (PROBE == 2)
      return;
    else if constexpr (PAIR)
      warp_mma_tile_nk<MT, NT, BK, LDA, LDBT>(acc, As + warp_m * MT * 16 * LDA,
                                              As + T::A_WORDS + warp_n * NT * 8 * LDBT, lane);
    else
      warp_mma_tile_ldsm<MT, NT, BK, LDA, LDB>(acc, As + warp_m * MT * 16 * LDA,
                                               As + T::A_WORDS + warp_n * NT * 8, lane);
  });
  __syncthreads();  // every warp's last MMAs have read their tiles, every thread its last table entries
  if constexpr (PROBE == 3) {  // no epilogue (the accumulators kept live)
    if (acc[0][0][0] == 1.2345f) y[0] = acc[MT - 1][NT - 1][3];
    return;
  }

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

}  // namespace
}  // namespace mscred_im2col
