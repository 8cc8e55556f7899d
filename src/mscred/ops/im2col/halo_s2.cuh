// conv_halo3x3s2: conv2-shaped layers (32 -> 64 channels, 3 x 3, stride 2, TF "same") with the input rows staged
// in shared memory by producer warps and the MMAs run by consumer warps. Part of the im2col extension: im2col.cu
// includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"
#include "implicit.cuh"
#include "halo.cuh"
#include "pipelined.cuh"
#include "barriers.cuh"
#include "wgmma.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Why a kernel of its own: the generic kernel (conv_pipelined) runs conv2 at batch 640, n = 30 in 40.5M warp
// instructions, ~20% of them 4-byte gathers and their masks, ~20% TF32 rounding at every fragment use, and stalls
// on shared-memory fragment loads at 25% occupancy (results/conv_source/summary.md). An earlier kernel of this kind
// (conv_band, benchmarks/conv_variants.cuh: weights resident, 4-row bands) lost, 0.117 against 0.083 ms: each
// band's copy latency exposed, outputs scattered from the accumulators. Here:
//   * a tile is R whole output rows of one image (R * Wo <= 128 pixels, columns padded to Wp, a multiple of 8, so
//     that the 8 pixels of an MMA column block share a row); the 2R + 1 input rows it reads are staged in shared
//     memory in two stages of 16 channels (35 KB a stage buffer, three buffers);
//   * the warps are specialised: 4 producer warps copy a stage by 4-byte cp.async straight into the pair planes
//     (two each, 68 copies a thread, no registers held: up to three stages in flight); 8 consumer warps (rounding
//     their B fragments to TF32) in two groups of 4 run the MMAs and the epilogue, the groups on alternate tiles
//     ("ping-pong", as CUTLASS schedules Hopper GEMMs): while one group runs its epilogue the other runs its MMAs.
//     They hand buffers over by shared-memory barriers (mbarrier: FULL when staged, EMPTY when read), so a consumer
//     waits only for its data, never for the other consumers;
//   * the weights (64 x 288 TF32, 75 KB) are staged once per persistent block and read by ldmatrix; one block per SM;
//   * K is ordered tap-major, and within a tap the K-slots are a permutation of the channels chosen for the banks
//     and for 8-byte loads: slot t + 4h of K-step s (h, s in {0, 1}) is channel P[t] + 2h + 4s of the stage,
//     P = {0, 1, 8, 9}. Channels c and c + 2 (bit 1 of c clear) share a pair plane, interleaved word by word, so a
//     lane's two B words of a K-step (h = 0, 1) are one 8-byte load; the pair planes of P[t] start at banks
//     {0, 2, 16, 18} (stride CS2 = 2 mod 32, planes 4-7 shifted by kH2Shift), the 8 pixels of a fragment are 4
//     words apart (stride 2, two words per cell), so each half-warp's 16 loads hit 32 distinct banks;
//   * every B address is a per-thread base (pixel, tap row, lane's pair plane) plus an immediate (K-step, tap
//     column): no table, no mask, no division in the K loop; each consumer warp owns 64 channels x 32 pixels (4 x 4
//     m16n8 tiles), so a K-step is 4 ldmatrix + 4 8-byte loads for 16 MMAs (32 x 32 warp tiles took 2 shared-memory
//     wavefronts per MMA, these 1.5);
//   * bias as the accumulators' initial value, SELU on the accumulators (weights and bias scaled by log2(e)); each
//     consumer warp's 32 pixels are whole output rows, so its outputs of one channel are one contiguous run in y:
//     they go through the warp's own 16-channel slice of shared memory (four passes; 8-byte conflict-free stores)
//     and out by one store per channel, no block barrier.
// How it got here, measured on the H200 with the harness at batch 640 (results/conv2_halo*/, conv2_pingpong/): all
// warps staging and computing between block barriers, 0.067 ms (IPC 0.29, the tensor pipe idle while they stage);
// producers by 4-byte cp.async, 0.079 (they could not keep up with all warps staging and computing); producers
// through registers with named barriers, 0.066; with mbarriers and a per-warp epilogue, 0.063 (8 producer and 8
// consumer warps of 32 x 32), against the generic kernel's 0.083; the two consumer groups of 64 x 32 warps, 0.0573;
// the slice's conflict-free 8-byte stores, 16-channel passes and the first stage's loads issued before the weights
// are staged, 0.0553; the producers by cp.async again, now that nothing else waits on them, 0.0534 (whole-image
// tiles with 64 x 64 consumer warps, a third less shared-memory traffic, lost: 0.0586; 8-channel stages with buffers
// and producers per consumer group, 0.0555; docs/kernel-experiments.md).
// Its bounds, from probes that drop one part (harness rows halo2_*): MMAs and epilogue without copies 0.048 ms, the
// copies and epilogue without MMAs 0.042: the consumers' side was the longer. With the consumers on wgmma (WGMMA,
// sm_90a builds; results/conv2_wgmma/): 0.0521 ms waiting for each tap's wgmmas, 0.0503 with one tap's in flight
// while the next tap's A registers load, against 0.0534.
// Limits: Wo <= 15 (a staged row is at most 31 cells: one lane per column), any top/left padding. The layout's
// constants and index arithmetic are replayed on the CPU by tests/test_halo_s2_layout.py (keep them in step).
// ---------------------------------------------------------------------------------------------------------------
constexpr int kH2C = 32, kH2O = 64, kH2K = 9 * kH2C;
constexpr int kH2Groups = 2, kH2GroupWarps = 4;  // consumer groups on alternate tiles x warps (64 ch x 32 px each)
constexpr int kH2Consumers = kH2Groups * kH2GroupWarps * 32, kH2Producers = 128;
constexpr int kH2Threads = kH2Consumers + kH2Producers;
constexpr int kH2Pixels = 128;             // tile pixels at most: a group's 4 warps of 32 pixels
static_assert(kH2Pixels == 32 * kH2GroupWarps, "a consumer warp takes 32 pixels of a tile");
constexpr int kH2StageC = 16;              // input channels per stage
constexpr int kH2Buffers = 3;              // stage buffers
constexpr int kH2MaxR = 8;                 // output rows per tile at most: 2R + 1 <= 17 staged rows
constexpr int kH2MaxNR = 2 * kH2MaxR + 1;
constexpr int kH2MaxSW = 31;               // staged row width 2 Wo + 1 at most (Wo <= 15)
constexpr int kH2Pairs = kH2StageC / 2;    // pair planes per stage (channels c, c + 2)
// Pair-plane stride in words: 2 mod 32, and room for 16 staged rows of 31 cells plus the 32 cells a padded
// column block reads past the last row's start (two words per cell): (16 * 31 + 32) * 2 = 1,056.
constexpr int kH2CS2 = 1058;
constexpr int kH2Shift = 8;                // pair planes 4..7 start kH2Shift words later (see the bank note above)
constexpr int kH2Buf = kH2Pairs * kH2CS2 + kH2Shift;  // words per stage buffer (16-byte multiple)
constexpr int kH2Ldw = kH2K + 4;           // weight row stride: conflict-free ldmatrix (292 = 4 mod 32)
constexpr int kH2Ldo = 40;                 // output slice: words per channel run (32 pixels), = 8 mod 32
constexpr int kH2LdoWgmma = 36;            // the same for WGMMA's 4-byte slice stores (channel-major lanes): 4 mod 32
constexpr int kH2WgmmaWeightWords = kH2O * kH2K;  // weights in wgmma's 128-byte swizzle: 9 K-blocks of 64 x 32
constexpr int kH2SliceC = 16;              // channels of a consumer warp's output slice (its epilogue in 4 passes)
constexpr int kH2SmemWords = kH2Buffers * kH2Buf + kH2O * kH2Ldw + (kH2Consumers / 32) * kH2SliceC * kH2Ldo + kH2O;

// Word offset of pair plane pp (0..7) in a stage buffer; stage channel c lives in pair plane h2_pair(c), word
// (c >> 1) & 1 of each cell.
MSCRED_HD constexpr int h2_pair_plane(int pp) { return pp * kH2CS2 + (pp >= 4 ? kH2Shift : 0); }
MSCRED_HD constexpr int h2_pair(int c) { return (c & 1) + 2 * (c >> 2); }
// Stage channel of K-slot t + 4h of K-step s within a tap (the permutation above); the weights follow it.
MSCRED_HD constexpr int h2_slot_channel(int t, int h, int s) { return (t & 1) + 8 * (t >> 1) + 2 * h + 4 * s; }
static_assert(h2_pair_plane(0) % 32 == 0 && h2_pair_plane(1) % 32 == 2 && h2_pair_plane(4) % 32 == 16 &&
                  h2_pair_plane(5) % 32 == 18 && h2_pair_plane(2) % 32 == 4,
              "pair planes of P[t] at banks 0, 2, 16, 18; the next K-step's 4 words further");
static_assert(kH2CS2 % 2 == 0 && kH2CS2 >= ((kH2MaxNR - 1) * kH2MaxSW + 32) * 2 && kH2Buf % 4 == 0, "plane size");

struct Halo2Geom {
  int Wp;   // output columns padded to a multiple of 8
  int R;    // output rows per tile
  int SW;   // staged row width 2 Wo + 1
  int NR;   // staged rows per tile 2 R + 1
  int tiles_per_image;
  static constexpr size_t smem_bytes() { return (size_t)kH2SmemWords * 4; }
  // WGMMA: the weights first, 1024-byte aligned (1 KB of room to align the base), the slices of kH2LdoWgmma words.
  static constexpr size_t smem_bytes_wgmma() {
    return 1024 + (size_t)(kH2WgmmaWeightWords + kH2Buffers * kH2Buf +
                           (kH2Consumers / 32) * kH2SliceC * kH2LdoWgmma + kH2O) * 4;
  }
  MSCRED_HD static Halo2Geom of(const ConvShape& s) {
    Halo2Geom g;
    g.Wp = (s.Wo + 7) / 8 * 8;
    g.R = kH2Pixels / (g.Wp > 0 ? g.Wp : 8);
    g.R = g.R < kH2MaxR ? g.R : kH2MaxR;
    g.R = g.R < s.Ho ? g.R : s.Ho;
    g.SW = 2 * s.Wo + 1;
    g.NR = 2 * g.R + 1;
    g.tiles_per_image = g.R >= 1 ? (s.Ho + g.R - 1) / g.R : 0;
    return g;
  }
};

// ---- Pieces of the kernel below.

// The weights in the kernel's K order: k = tap * 32 + stage * 16 + s * 8 + t + 4h holds channel
// stage * 16 + h2_slot_channel(t, h, s) of tap (i, j) = (tap / 3, tap % 3), times `scale`, as TF32. Each thread takes
// a whole column of w seen as 64 x 288 (coalesced across threads, 16 loads in flight, one index computation per
// column): read one at a time in the kernel's order they were 10% of a first version's stall samples
// (results/conv2_halo/). Consumer warps alone, two half-columns (64 values) in flight each, were slower: 0.0565
// against 0.0553 ms (results/conv2_pingpong/). The caller's barrier publishes them.
// SW128 (the WGMMA variant): the same values in wgmma's K-major 128-byte swizzle (sw128_offset: a tap's 32 K-slots
// are one 128-byte row per channel o, 64 rows a tap).
template <int NTHREADS, bool SW128 = false>
__device__ __forceinline__ void h2_stage_weights(uint32_t* ws, const float* __restrict__ w, float scale, int tid) {
  for (int r = tid; r < kH2K; r += NTHREADS) {
    // inverse of h2_slot_channel: cl = (t & 1) + 8 (t >> 1) + 2h + 4s
    const int c = r / 9, tap = r - c * 9, cl = c % 16;
    const int k = tap * 32 + (c / 16) * 16 + ((cl >> 2) & 1) * 8 + (cl & 1) + 2 * ((cl >> 3) & 1) + 4 * ((cl >> 1) & 1);
#pragma unroll 16
    for (int o = 0; o < kH2O; ++o)
      ws[SW128 ? sw128_offset<kH2O>(o, k) / 4 : o * kH2Ldw + k] = to_tf32(scale * __ldg(w + o * kH2K + r));
  }
}

// What a producer lane (staged column `lane`, input column lane - pad) copies of pair plane c0 (stage channels c0 and
// c0 + 2) for stage q of this block (half q % 2 of tile blockIdx.x + (q / 2) * gridDim.x): a pointer to its column of
// staged row 0 in channel c0, and which staged rows lie inside the image (bit sr; none when the column is padding).
struct H2StageSource {
  const float* src;
  uint32_t rows_in;
};
__device__ __forceinline__ H2StageSource h2_stage_source(const float* x, const ConvShape& s, const Halo2Geom& geo,
                                                         int q, int c0, int lane, bool lane_ok) {
  const int tpi = geo.tiles_per_image;
  const int tile = blockIdx.x + (q >> 1) * gridDim.x, n = tile / tpi, r0 = (tile - n * tpi) * geo.R;
  const int top = 2 * r0 - s.pad_top;  // input row of staged row 0
  const int lo = top < 0 ? -top : 0, hi = s.H - top < geo.NR ? s.H - top : geo.NR;  // staged rows in the image
  const uint32_t rows_in = lane_ok && hi > lo ? (((1u << hi) - 1u) & ~((1u << lo) - 1u)) : 0u;
  const float* src = x + ((int64_t)n * kH2C + (q & 1) * kH2StageC + c0) * (s.H * s.W) + (int64_t)top * s.W +
                     (lane - s.pad_left);
  return {src, rows_in};
}

// That pair plane for this lane into shared memory at `dst` (its staged column's cell of row 0), by 4-byte cp.async,
// a pointer per channel stepped a row at a time; zero-filled outside the image and for rows past NR (inside the pair
// plane: see kH2CS2), so no test per row beyond the mask. The copies hold no registers: with the values loaded into
// registers and stored (68 a thread, one stage in flight per SM) the producers were the kernel's bound (0.051 of its
// 0.055 ms without MMAs; 0.042 this way, results/conv2_pingpong/probe_async.txt). COPIES false (a probe): zeros only.
template <bool COPIES = true>
__device__ __forceinline__ void h2_copy_pair(uint32_t* dst, const H2StageSource& in, const float* any, int plane, int W,
                                             int SW) {
#pragma unroll
  for (int pc = 0; pc < 2; ++pc) {
    const float* p = in.src + 2 * pc * (int64_t)plane;
#pragma unroll
    for (int sr = 0; sr < kH2MaxNR; ++sr, p += W) {
      const bool ok = COPIES && (in.rows_in & (1u << sr));
      cp_async4(dst + 2 * sr * SW + pc, ok ? p : any, ok);
    }
  }
}

// 16 output channels of a consumer warp's tile (one m16 tile's accumulators), SELU'd (on log2(e)-scaled
// accumulators) into the warp's slice `wout`: accumulator (j, v) is slice channel g + 8(v / 2) at pixel px = j*8 + 2t +
// v % 2 of the warp's 32, the slice word px of that channel (local row px / Wp, column px % Wp: the slice keeps the
// padded columns). v = 0, 1 are adjacent pixels: one 8-byte store, and with kH2Ldo = 8 mod 32 a half-warp's 16
// stores (g = 0..3 or 4..7, t = 0..3) cover the 32 banks once. (A slice of unpadded rows, Wo words apart, took
// 4-byte stores with up to 4-way conflicts.) The caller syncs the warp and sends the slice out (h2_slice_word says
// where each output is).
template <bool SELU, int NT>
__device__ __forceinline__ void h2_write_slice(const float (&acc)[NT][4], float* wout, int g, int t) {
  const unsigned at = smem_addr(wout + g * kH2Ldo + 2 * t);
#pragma unroll
  for (int hi = 0; hi < 2; ++hi)
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      float z0 = acc[j][2 * hi], z1 = acc[j][2 * hi + 1];
      if (SELU) z0 = selu_of_log2(z0), z1 = selu_of_log2(z1);
      asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(at + 4 * (8 * hi * kH2Ldo + j * 8)), "f"(z0), "f"(z1)
                   : "memory");
    }
}

// The same for the WGMMA consumers' accumulators (wgmma's layout, acc[mb][4j + 2v + h] = pixel 16 mb + 8v + g of
// the warp's 32, channel 8j + 2t + h): pass i's 16 channels, one word each (adjacent words are adjacent channels
// here, not pixels), with kH2LdoWgmma = 4 mod 32 so that a warp's 32 stores (t: 8 banks apart, g: one each) cover
// the 32 banks once.
template <bool SELU>
__device__ __forceinline__ void h2_write_slice_wgmma(const float (&acc)[2][32], int i, float* wout, int g, int t) {
  const unsigned at = smem_addr(wout + 2 * t * kH2LdoWgmma + g);
#pragma unroll
  for (int jj = 0; jj < 2; ++jj)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int mb = 0; mb < 2; ++mb)
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          float z = acc[mb][4 * (2 * i + jj) + 2 * v + h];
          if (SELU) z = selu_of_log2(z);
          asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(at + 4 * ((8 * jj + h) * kH2LdoWgmma + 16 * mb + 8 * v)),
                       "f"(z)
                       : "memory");
        }
}

// Where output `lane` of a warp's run (its rows in the image, Wo pixels each) lies in its slice: row lane / Wo,
// column lane % Wo of the padded rows.
__device__ __forceinline__ int h2_slice_word(int lane, int Wo, int wp_log2) {
  const int row = lane / Wo;
  return (row << wp_log2) + (lane - row * Wo);
}

// This thread's index, read afresh: the compiler cannot keep it, or what is derived from it, in a register across
// a loop, so per-thread epilogue indices are recomputed in the epilogue (hoisted out of the tile loop, they were
// spilled at the 168-register cap).
__device__ __forceinline__ int tid_fresh() {
  int tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  return tid;
}

// PROBE (harness builds only, benchmarks/conv_harness.cu rows halo2_*: timings that find the bound, outputs wrong):
// 1 = the producers load nothing (zeros), 2 = the consumers skip the MMAs, 3 = no loads and no epilogue, 4 = no
// epilogue, 5 = no loads and no output stores, 6 = no loads and no SELU. The product instantiates 0 only.
// Measured and not kept: the producers rounding their own copies in place (0.0670 against 0.0535 ms), registers moved
// from the producers to the consumers by setmaxnreg with the B words loaded a K-step ahead (0.0532 against 0.0537:
// within 1%, not worth sm_90a builds; commit a2c7d4f has it), whole-image tiles and per-group buffers (above), the
// weights copied as they are and ordered in shared memory (0.0567, commit 7f4e427); docs/kernel-experiments.md.
// WGMMA (sm_90a builds only; the harness's row halo2_wgmma): the consumer groups, one warpgroup each, run wgmma
// instead of mma.sync: M = the group's 128 pixels as two m64 blocks (warp w's rows 16 mb + r are its pixels
// 32 w + 16 mb + r: the B fragments above become the A registers, a0..a3 = b0 of pixel blocks 2 mb and 2 mb + 1, then
// their b1), N = the 64 channels from the weights in the 128-byte swizzle, one wgmma m64n64k8 per M block and K-step,
// a tap's 4 committed together and waited for before its A registers are reloaded.
template <bool SELU, int PROBE = 0, bool WGMMA = false>
__global__ void __launch_bounds__(kH2Threads, 1)
    conv_halo3x3s2(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                   float* __restrict__ y, ConvShape s) {
  constexpr int MT = 4, NT = 4, LDO = WGMMA ? kH2LdoWgmma : kH2Ldo;
  constexpr bool kLoads = PROBE != 1 && PROBE != 3 && PROBE != 5 && PROBE != 6;
  static_assert(!WGMMA || PROBE == 0, "the probes are the mma.sync kernel's");
  extern __shared__ __align__(16) uint32_t smem[];
  // mma.sync: stage buffers, weights [o][k], slices, bias. WGMMA: weights (1024-byte aligned), stage buffers, ...
  uint32_t* const ws =
      WGMMA ? reinterpret_cast<uint32_t*>((reinterpret_cast<uintptr_t>(smem) + 1023) & ~uintptr_t(1023))
            : smem + kH2Buffers * kH2Buf;
  uint32_t* const stage_buf = WGMMA ? ws + kH2WgmmaWeightWords : smem;    // kH2Buffers stage buffers
  float* const out_s = reinterpret_cast<float*>(WGMMA ? stage_buf + kH2Buffers * kH2Buf : ws + kH2O * kH2Ldw);
  float* const bias_s = out_s + (kH2Consumers / 32) * kH2SliceC * LDO;  // the bias, scaled
  const Halo2Geom geo = Halo2Geom::of(s);
  const int H = s.H, W = s.W, Wo = s.Wo, P = s.Ho * s.Wo, SW = geo.SW;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const float scale = SELU ? kLog2e : 1.f;
  // Block tile k is tile blockIdx.x + k * gridDim.x; its stages 2k and 2k + 1 are its two halves of 16 channels.
  const int tpi = geo.tiles_per_image, ntiles = s.N * tpi;
  if ((int)blockIdx.x >= ntiles) return;
  const int tiles = (ntiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x, stages = 2 * tiles;
  // FULL[b]: the producers' 128 threads arrive when buffer b holds its next stage; EMPTY[b]: the 128 threads of the
  // group that read it arrive when done. Stage q uses buffer q % 3, the (q / 3)-th phase of both (the hand-over with
  // two groups is simulated in tests/test_halo_s2_protocol.py).
  __shared__ uint64_t full_bar[kH2Buffers], empty_bar[kH2Buffers];
  if (tid < kH2Buffers) {
    mbar_init(&full_bar[tid], kH2Producers);
    mbar_init(&empty_bar[tid], kH2GroupWarps * 32);
  }

  // ---- producers: warp pw stages pair planes 2 pw and 2 pw + 1 (each: stage channels c0, c0 + 2), all NR rows,
  // lane = staged column, by cp.async; each thread arrives on FULL when its copies of the stage have landed.
  const bool producer = warp >= kH2Consumers / 32;
  const int pw = warp - kH2Consumers / 32;
  const bool lane_in = lane < SW;
  const bool lane_ok = lane_in && (unsigned)(lane - s.pad_left) < (unsigned)W;
  auto issue = [&](int q) {
#pragma unroll
    for (int pp2 = 0; pp2 < 2; ++pp2) {
      const int pp = 2 * pw + pp2;
      const H2StageSource in = h2_stage_source(x, s, geo, q, (pp & 1) + 4 * (pp >> 1), lane, lane_ok);
      if (lane_in)
        h2_copy_pair<kLoads>(stage_buf + (q % kH2Buffers) * kH2Buf + h2_pair_plane(pp) + 2 * lane, in, x, H * W, W,
                             SW);
    }
  };
  if (producer) issue(0);  // the first stage's copies in flight while the block stages the weights
  if (tid < kH2O) bias_s[tid] = bias != nullptr ? scale * __ldg(bias + tid) : 0.f;
  h2_stage_weights<kH2Threads, WGMMA>(ws, w, scale, tid);
  // wgmma reads the weights through the async proxy: each writer fences before the barrier that publishes them
  if constexpr (WGMMA) fence_proxy_async_shared();
  __syncthreads();  // the weights, the bias and the barriers' initialisation are published

  if (producer) {
    // Measured and not kept (H200, harness, results/conv2_pingpong/): the producers loading into registers and
    // storing (one stage in flight: 0.0551 against 0.0534 ms this way), then loading the next stage's first plane
    // while storing this stage's second (0.0650 against 0.0576), or two whole stages in registers (0.0570 against
    // 0.0555); a fourth stage buffer (0.0565 against 0.0555).
    for (int q = 0; q < stages; ++q) {
      if (q > 0) {
        if (q >= kH2Buffers) mbar_wait(&empty_bar[q % kH2Buffers], (q / kH2Buffers - 1) & 1);  // stage q - 3 read
        issue(q);
      }
      asm volatile("cp.async.mbarrier.arrive.noinc.shared.b64 [%0];\n" ::"r"(smem_addr(&full_bar[q % kH2Buffers]))
                   : "memory");
    }
    return;
  }

  // ---- consumers: group warp / 4 takes this block's tiles group, group + 2, ... (so that one group's epilogue runs
  // under the other's MMAs); warp_n = warp % 4 its 32 pixels, all 64 channels.
  const int g = lane / 4, t = lane % 4, group = warp / kH2GroupWarps, warp_n = warp % kH2GroupWarps;
  // ldmatrix.x4 gives an m16n8k8 TF32 A-fragment: lanes 8m..8m+7 address the rows of 8 x 4-word matrix m.
  const int mat = lane / 8, arow = lane % 8 + (mat & 1) * 8, acol = (mat >> 1) * 4;
  const uint32_t* const a_base = ws + arow * kH2Ldw + acol;
  // B operand: pixel px = warp_n*32 + j*8 + g of the tile (row px / Wp, column px % Wp), tap (i, jj), K-slots
  // (t, h = 0, 1) of K-step s are the two words at h2_pair_plane(h2_pair(P[t])) + 2s * CS2 + 2 ((2 row + i) * SW +
  // 2 col + jj). The pair plane and the cell's row and column are this thread's row base (bytes, tap row 0: a tap
  // row further is 2 SW words, row_step bytes; 4 registers, not 12, at the 168-register cap); the K-step and the tap
  // column are immediates. Pixels past R rows read pixel 0; columns past Wo read cells past the row (never stored).
  int rowbase[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int px = warp_n * 32 + j * 8 + g;
    int row = px / geo.Wp, col = px - row * geo.Wp;
    if (row >= geo.R) row = col = 0;
    rowbase[j] = 4 * (h2_pair_plane(h2_pair(h2_slot_channel(t, 0, 0))) + 2 * (2 * row * SW + 2 * col));
  }
  const int row_step = 8 * SW;

  // The tile's epilogue: SELU, then this warp's 64 channels x 32 pixels (whole output rows from wrow0 on: one
  // contiguous run of up to 32 floats per channel in y) out in four passes of 16 channels through its own
  // 16-channel slice (larger slices left no room for a fourth stage buffer, which did not pay either), one store
  // per channel. No block barrier: the other group keeps computing meanwhile. Each accumulator's place is worked
  // out here, not kept in registers across the K loop. write_pass(i, wout, lane) writes channels 16i.. to the slice.
  auto epilogue = [&](int k, auto&& write_pass) {
    const int etid = tid_fresh(), elane = etid % 32, ewarp = etid / 32;
    const int wrow0 = ewarp % kH2GroupWarps * 32 / geo.Wp, wp_log2 = geo.Wp == 16 ? 4 : 3;
    float* const wout = out_s + ewarp * kH2SliceC * LDO;
    const int tile = blockIdx.x + k * gridDim.x, n = tile / tpi, r0 = (tile - n * tpi) * geo.R;
    const int rows = s.Ho - r0 < geo.R ? s.Ho - r0 : geo.R;
    const int wrows = rows - wrow0 < 32 / geo.Wp ? rows - wrow0 : 32 / geo.Wp;  // this warp's rows in the image
    const int run = wrows > 0 ? wrows * Wo : 0;
    const float* const rd = wout + h2_slice_word(elane, Wo, wp_log2);
#pragma unroll
    for (int i = 0; i < MT; ++i) {  // 16 channels a pass
      write_pass(i, wout, elane);
      __syncwarp();
      float* yp = y + ((int64_t)n * kH2O + i * 16) * P + (int64_t)(r0 + wrow0) * Wo + elane;
      if (PROBE == 5) {  // read the slice, store nothing
        float sum = 0.f;
#pragma unroll
        for (int c = 0; c < kH2SliceC; ++c) sum += rd[c * LDO];
        if (sum == 1.2345f) *yp = sum;
      } else if (elane < run) {
#pragma unroll
        for (int c = 0; c < kH2SliceC; ++c, yp += P) *yp = rd[c * LDO];
      }
      __syncwarp();  // the slice is read before the next pass (or the next tile) writes it
    }
  };

  if constexpr (WGMMA) {
#if defined(MSCRED_WGMMA_DEVICE)
    static_assert(sw128_offset<kH2O>(0, 32) == kH2O * 128 && sw128_offset<kH2O>(0, 16) == 64 &&
                      sw128_offset<kH2O>(0, 8) == 32,
                  "a tap's, a stage half's and a K-step's first K-slot where h2_stage_weights puts them");
    const uint64_t wdesc = wgmma_desc_sw128(ws);
    float acc[2][32];  // [M block][4j + 2v + h]: pixel 32 warp_n + 16 mb + g + 8v, channel 8j + 2t + h
    for (int k = group; k < tiles; k += kH2Groups) {
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the bias as initial value
          const float b = bias_s[8 * j + 2 * t + h];
#pragma unroll
          for (int mb = 0; mb < 2; ++mb) acc[mb][4 * j + h] = acc[mb][4 * j + 2 + h] = b;
        }
      for (int half = 0; half < 2; ++half) {
        const int q = 2 * k + half;
        mbar_wait(&full_bar[q % kH2Buffers], (q / kH2Buffers) & 1);  // stage q is staged
        const unsigned buf_at = smem_addr(stage_buf + (q % kH2Buffers) * kH2Buf);
        unsigned rbase[NT];
        uint32_t a_tap[2][2][2][4];  // two taps' A registers: one tap's loads while the other's wgmmas run
#pragma unroll
        for (int tap = 0; tap < 9; ++tap) {
          const int ti = tap / 3, tj = tap % 3;
          if (tj == 0) {
#pragma unroll
            for (int j = 0; j < NT; ++j) rbase[j] = buf_at + rowbase[j] + ti * row_step;
          }
          uint32_t(&a)[2][2][4] = a_tap[tap % 2];  // [K-step][M block]
#pragma unroll
          for (int ks = 0; ks < 2; ++ks)
#pragma unroll
            for (int j = 0; j < NT; ++j) {
              uint32_t bf[2];
              lds_u32x2(bf, rbase[j] + 4 * (2 * ks * kH2CS2 + 2 * tj));
              a[ks][j / 2][j % 2] = to_tf32(__uint_as_float(bf[0]));
              a[ks][j / 2][2 + j % 2] = to_tf32(__uint_as_float(bf[1]));
            }
          wgmma_fence();
#pragma unroll
          for (int ks = 0; ks < 2; ++ks)
#pragma unroll
            for (int mb = 0; mb < 2; ++mb)  // K-slots tap * 32 + half * 16 + ks * 8: the staging's offsets
              wgmma_m64n64k8_tf32(acc[mb], a[ks][mb], wdesc + ((tap * kH2O * 128 + 64 * half + 32 * ks) >> 4));
          wgmma_commit();
          // The previous tap's wgmmas are done; its A registers, in flight until now, may be reused from here (the
          // empty asm keeps them live to this point: the compiler does not know the wgmma reads them late).
          wgmma_wait<1>();
          if (tap > 0) wgmma_keep(a_tap[(tap - 1) % 2]);
        }
        wgmma_wait<0>();
        wgmma_keep(a_tap);
        wgmma_keep(acc);
        if (q + kH2Buffers < stages) mbar_arrive(&empty_bar[q % kH2Buffers]);  // buffer free for stage q + 3
      }
      epilogue(k, [&](int i, float* wout, int elane) {
        h2_write_slice_wgmma<SELU>(acc, i, wout, elane / 4, elane % 4);
      });
    }
#endif  // MSCRED_WGMMA_DEVICE
  } else {  // mma.sync
    float acc[MT][NT][4];
    for (int k = group; k < tiles; k += kH2Groups) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // the bias as initial value, read per tile (kept in registers, ptxas spilled it)
          const float b = bias_s[i * 16 + g + 8 * h];
#pragma unroll
          for (int j = 0; j < NT; ++j) acc[i][j][2 * h] = acc[i][j][2 * h + 1] = b;
        }
      for (int half = 0; half < 2; ++half) {
        const int q = 2 * k + half;
        mbar_wait(&full_bar[q % kH2Buffers], (q / kH2Buffers) & 1);  // stage q is staged
        const unsigned buf_at = smem_addr(stage_buf + (q % kH2Buffers) * kH2Buf);
        const uint32_t* const a_half = a_base + half * kH2StageC;
        unsigned rbase[NT];
#pragma unroll
        for (int tap = 0; tap < (PROBE == 2 ? 0 : 9); ++tap) {
          const int ti = tap / 3, tj = tap % 3;
          if (tj == 0) {
#pragma unroll
            for (int j = 0; j < NT; ++j) rbase[j] = buf_at + rowbase[j] + ti * row_step;
          }
#pragma unroll
          for (int ks = 0; ks < 2; ++ks) {
            uint32_t bf[NT][2];
#pragma unroll
            for (int j = 0; j < NT; ++j) {  // staged as they are: rounded to TF32 here
              lds_u32x2(bf[j], rbase[j] + 4 * (2 * ks * kH2CS2 + 2 * tj));
              bf[j][0] = to_tf32(__uint_as_float(bf[j][0]));
              bf[j][1] = to_tf32(__uint_as_float(bf[j][1]));
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
              uint32_t af[4];
              ldsm_x4(af, a_half + i * 16 * kH2Ldw + tap * 32 + ks * 8);
#pragma unroll
              for (int j = 0; j < NT; ++j) mma_tf32(acc[i][j], af, bf[j]);
            }
          }
        }
        if (q + kH2Buffers < stages) mbar_arrive(&empty_bar[q % kH2Buffers]);  // buffer free for stage q + 3
      }
      if (PROBE == 3 || PROBE == 4) {  // no epilogue (the accumulators kept live)
        if (acc[0][0][0] == 1.2345f) y[0] = acc[3][3][3];
        continue;
      }

      epilogue(k, [&](int i, float* wout, int elane) {
        h2_write_slice<SELU && PROBE != 6>(acc[i], wout, elane / 4, elane % 4);
      });
    }
  }
}

}  // namespace
}  // namespace mscred_im2col
