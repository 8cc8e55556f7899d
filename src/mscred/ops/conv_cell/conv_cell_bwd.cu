// One backward step of the large level's training ConvLSTM in one kernel (conv_cell_step_backward; the default at
// level 1 since 2026-12-02, MSCRED_LSTM_CONV_CELL_BWD=0 keeps the split path; results/conv_cell_bwd/ and
// results/conv_cell_bwd_hoist/: the graphed bf16 step 2.679 / 2.683 ms split, 2.652 / 2.634 ms with it).
//
// The split path (ops/triton/convlstm_concat.py's backward) runs per step t: the Triton cell backward (dpre_t, dc),
// cuDNN's transposed convolution of dpre_t with the whole gate weight into a new [dx_t, dh_{t-1}] tensor, and a copy
// of dx_t into the bordered input gradient; at level 1 31 + 24.6 + 4.4 us a step (results/step_profile_final/).
// Here one kernel per step t = T - 2 .. 0 runs step t + 1's transposed convolution and step t's cell backward on
// the same rows of the bordered index, so that dh_t's recurrent part goes from the accumulators into the cell
// arithmetic without leaving registers, dx_{t+1} is stored where the input gradient wants it, and cuDNN's call, the
// copy and one launch go (docs/training-kernel-plan.md):
//   - the GEMM, per 64-row tile: dxh_{t+1}[q] = sum over taps (ky, kx) of dpre_{t+1}[q - ky Wp - kx] W_tap^T, M = 64
//     rows, N = C + Ch = 64 ([dx, dh]), K = 4 taps x 4Ch = 512, on wgmma m64n64k16 with A -- the tile's rows and the
//     Wp + 1 before them, gathered from dpre_{t+1} (stored per output pixel) by cp.async with zeros where a row is no
//     output pixel, in two 128-byte-swizzle halves -- read by the tensor cores through descriptors at each tap's
//     row, and B, the transposed weight, resident in shared memory (64 KB);
//   - the N columns permuted (bwd_column_channel) so that each thread's accumulators of dx and of dh are 8
//     consecutive channels of its two rows: the cell backward of those channels (the Triton kernel's arithmetic with
//     PRE_BIAS, RECOMPUTE_C and FAST_ACT: pre_t + bias rounded to bf16, the activations on tanh.approx, c_t
//     recomputed from c_{t-1}) runs in the epilogue with 16-byte loads and stores, and the bias gradient is summed
//     per thread, then per block, then added to the float32 total once per block;
//   - three warpgroups a block, persistent, each with its own double-buffered tiles, as the forward kernel.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>

#include "conv_cell.h"
#include "device_helpers.cuh"
#include "row_walk.h"
#include "../resident_lstm/shared_allowance.h"

namespace mscred_conv_cell {
namespace {

using mscred_resident::wgmma_m64n64k16_ss;

// MSCRED_CONV_CELL_BWD_HOIST 1 issues the epilogue's loads (pre_t, c_{t-1}, dout_t, dc_t of the thread's two rows)
// right after the tile's warpgroup MMAs, so that they are in flight while the tensor cores work and both rows'
// arrive together (168 registers, no spills); 0 (the default) loads each row's just before its arithmetic, after the
// previous row's stores (122 registers). Hoisting measured no gain: the kernel 232.0 against 227.8 us over four
// steps, the graphed bf16 step 2.659 / 2.654 against 2.652 / 2.634 ms in alternation (results/conv_cell_bwd_hoist/):
// these loads' latency is not what bounds it. A/B builds: -D flags from MSCRED_CONV_CELL_FLAGS (benchmarks).
#ifndef MSCRED_CONV_CELL_BWD_HOIST
#define MSCRED_CONV_CELL_BWD_HOIST 0
#endif
// MSCRED_CONV_CELL_BWD_ROW_STEPS 1 (the default) has the staging's threads decode their first row of a tile once and
// step to the next (8 rows on; 32 with the shared staging) by additions (row_walk.h); 0 decodes every 16-byte chunk's
// row by two integer divisions. The tile loop 2,770 -> 2,326 instructions a thread (results/conv_cell_ab_sass/) in a
// kernel bound by its instruction issue (results/conv_cell_bwd_ncu/): on the H200 the four steps' kernels 229.8 /
// 230.0 -> 200.6 us, the call 0.424 / 0.415 -> 0.397 ms, the default built before and after it in one process
// (results/conv_cell_bwd_steps/). Right on its first GPU run; replayed thread by thread on the CPU in CI
// (tests/test_conv_cell_layout.py, its row walk host-compiled).
#ifndef MSCRED_CONV_CELL_BWD_ROW_STEPS
#define MSCRED_CONV_CELL_BWD_ROW_STEPS 1
#endif
// MSCRED_CONV_CELL_BWD_TILE_WALK 1 steps from tile to tile too: the staging threads' first rows and the epilogue's
// rows are walks (row_walk.h) advanced by the fixed stride between a thread's units, found once (BorderedStep), so
// that the tile loop has no division left -- the default decodes each tile's staging row (2 divisions a thread) and
// each epilogue row's pixel and image (3 a row, 6 a thread). Needs the stepped staging (ROW_STEPS=1). The tile loop
// 2,326 -> 2,181 instructions (results/conv_cell_walk_sass/); on the H200 right (tests/test_conv_cell.py) and the
// four steps' kernels 201.3 / 202.1 -> 192.1 us, the step within its spread (results/conv_cell_tile_walk/). Not yet
// the default: the whole GPU suite has not run on it (its walks are checked on the CPU against division,
// tests/test_conv_cell_layout.py).
#ifndef MSCRED_CONV_CELL_BWD_TILE_WALK
#define MSCRED_CONV_CELL_BWD_TILE_WALK 0
#endif
#if MSCRED_CONV_CELL_BWD_TILE_WALK && !MSCRED_CONV_CELL_BWD_ROW_STEPS
#error "MSCRED_CONV_CELL_BWD_TILE_WALK needs MSCRED_CONV_CELL_BWD_ROW_STEPS"
#endif

// MSCRED_CONV_CELL_BWD_SHARED_STAGING 1 runs four warpgroups a block instead of three, sharing one double-buffered
// staging of the 4 x 64 rows of four consecutive tiles and the Wp + 1 before them (level 1: 2 x 73.7 KB beside the
// 64 KB weight, where four private double buffers would not fit), staged by all 512 threads and synchronised
// block-wide; 16 warps an SM instead of 12 for a kernel bound by its instruction issue at three warps a scheduler
// (results/conv_cell_bwd_ncu/), at most 128 registers a thread (the default build uses 122; not with
// MSCRED_CONV_CELL_BWD_HOIST). 0 (the default): each warpgroup its own tiles and buffers. Right on the H200 but no
// faster: four steps' kernels 237.4 against 229.8 / 230.0 us with divided rows, 221.2 against 200.6 us with stepped
// ones (results/conv_cell_bwd_steps/): the block-wide barriers cost more than the fourth warp a scheduler gains.
#ifndef MSCRED_CONV_CELL_BWD_SHARED_STAGING
#define MSCRED_CONV_CELL_BWD_SHARED_STAGING 0
#endif

// MSCRED_CONV_CELL_BWD_SINGLE_BUFFER 1 runs four warpgroups a block, each with ONE staging buffer of its own (level 1:
// 4 x 24,576 B beside the 64 KB weight, 173,568 B a block, where four double buffers would not fit): a warpgroup issues
// the next unit's copies as soon as its MMAs have read the buffer (after their wait and a warpgroup barrier), so that
// they fly under the epilogue as the double buffer's did under the MMAs and the epilogue, and no barrier spans more
// than a warpgroup (the shared staging's block-wide ones lost, above). 16 warps an SM instead of 12 for a kernel whose
// schedulers find no eligible warp half the time (results/conv_cell_bwd_ncu_rows/); at most 128 registers a thread (the
// default build uses 124). An A/B build written after 2026-12-02's evening session's device time was spent: compiled in
// CI without spills, NOT YET RUN ON A GPU.
#ifndef MSCRED_CONV_CELL_BWD_SINGLE_BUFFER
#define MSCRED_CONV_CELL_BWD_SINGLE_BUFFER 0
#endif
#if MSCRED_CONV_CELL_BWD_SINGLE_BUFFER && MSCRED_CONV_CELL_BWD_SHARED_STAGING
#error "MSCRED_CONV_CELL_BWD_SINGLE_BUFFER is for private staging buffers"
#endif

constexpr int kBwdRows = 64;        // dxh rows (of the bordered index) per warpgroup tile: wgmma's M
constexpr int kBwdWarpgroups = MSCRED_CONV_CELL_BWD_SHARED_STAGING || MSCRED_CONV_CELL_BWD_SINGLE_BUFFER ? 4 : 3;
constexpr int kBwdBuffers = MSCRED_CONV_CELL_BWD_SINGLE_BUFFER ? 1 : 2;  // staging buffers a staging group
// Warpgroups sharing one staging buffer (a "unit" of that many consecutive tiles): all of the block's, or each its own.
constexpr int kStageWarpgroups = MSCRED_CONV_CELL_BWD_SHARED_STAGING ? kBwdWarpgroups : 1;
static_assert(kBwdWarpgroups % kStageWarpgroups == 0, "whole staging groups a block");

template <int C, int CH>
struct BwdSizes {
  static constexpr int G4 = 4 * CH;                      // gate channels: a dpre row, the GEMM's K per tap
  static constexpr int K0 = C + CH;                      // the GEMM's N: [dx, dh]
  static constexpr int KC = G4 / 16;                     // k16 steps per tap
  static constexpr int KSTEPS = 4 * KC;
  static constexpr int HALVES = G4 / 64;                 // 128-byte halves of a staged dpre row
  static constexpr int WEIGHT_BYTES = KSTEPS * K0 * 32;  // 16 k x K0 columns x 2 bytes per k16 step
  static constexpr int SMALL_BYTES = (1 + 4 * kBwdWarpgroups) * G4 * 4;  // the bias, each warp's bias-gradient sums
  static_assert(C == 32 && CH == 32, "written for level 1's sizes: 64 accumulator columns, 256-byte dpre rows");
};

// What the cell backward of one row reads (a thread's 8 channels): step t's pre-activations of the 4 gates, c_{t-1},
// dout_t, dc_t (float32, two 16-byte halves).
struct CellRowIn {
  uint4 pre[4];
  uint4 c_prev;
  uint4 dout;
  uint4 dc[2];
};

// Rows of a unit's staging buffer: its tiles' rows and the Wp + 1 before them, in whole 8-row swizzle atoms -- whole
// rounds of the staging threads' rows (8 a warpgroup: 128 threads, 16 chunks a row).
__host__ __device__ constexpr int bwd_tile_rows(int w) {
  return (kStageWarpgroups * kBwdRows + (w + 1) + 1 + 8 * kStageWarpgroups - 1) / (8 * kStageWarpgroups) *
         (8 * kStageWarpgroups);
}

// The channel of dxh (part * C + channel) that GEMM column n = 8 nt + c holds: part nt / 4 (0: dx, 1: dh), channel
// 8 (c / 2) + 2 (nt % 4) + c % 2, so that a thread's accumulator columns 2 (lane % 4) + e of the four n8 tiles of a
// part are its channels 8 (lane % 4) .. + 7.
template <int C>
__host__ __device__ constexpr int bwd_column_channel(int n) {
  return (n >> 5) * C + ((n & 7) >> 1) * 8 + ((n >> 3) & 3) * 2 + (n & 1);
}

template <int C, int CH>
__global__ void __launch_bounds__(kBwdWarpgroups * 128, 1) conv_cell_bwd_kernel(ConvCellBwdParams p) {
  using S = BwdSizes<C, CH>;
  constexpr int G4 = S::G4, K0 = S::K0, KC = S::KC, KSTEPS = S::KSTEPS, NWG = kBwdWarpgroups;
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* w_s = smem;
  float* bias_s = reinterpret_cast<float*>(smem + S::WEIGHT_BYTES);  // [gate * CH + channel]
  float* db_s = bias_s + G4;                                          // [warp][gate column]: its bias-gradient sums
  // The staging buffers from the next 1,024-byte boundary (the swizzle atoms'; the block asks for 1 KB of slack).
  const unsigned a_start = smem_u32(smem) + S::WEIGHT_BYTES + S::SMALL_BYTES;
  unsigned char* a_all = smem + S::WEIGHT_BYTES + S::SMALL_BYTES + (((a_start + 1023) & ~1023u) - a_start);

  const int Wp = p.W + 1, HpWp = (p.H + 1) * Wp, HW = p.H * p.W;
  const int rows = p.B * HpWp, tiles = (rows + kBwdRows - 1) / kBwdRows;
  constexpr int SG = kStageWarpgroups, GROUPS = NWG / SG;  // warpgroups a staging buffer, staging groups a block
  const int units = (tiles + SG - 1) / SG;
  const int tile_rows = bwd_tile_rows(p.W), half_bytes = tile_rows * 128, a_bytes = S::HALVES * half_bytes;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;

  // The transposed weight as wgmma's B, no swizzle, K-major: k16 step ks = tap * KC + kc, element (k, n) =
  // w_t[tap][bwd_column_channel(n)][kc * 16 + k] at byte ks * K0 * 32 + (k / 8) * K0 * 16 + n * 16 + (k % 8) * 2
  // (the k halves K0 * 16 bytes apart: the leading byte offset; 8-column groups 128 bytes apart: the stride).
  for (int i = tid; i < KSTEPS * K0 * 2; i += NWG * 128) {
    const int ks = i / (K0 * 2), n = (i >> 1) % K0, half = i & 1;
    const int tap = ks / KC, kc = ks % KC;
    const uint4 v = load16(p.w_t + (static_cast<size_t>(tap) * K0 + bwd_column_channel<C>(n)) * G4 + kc * 16 + half * 8);
    *reinterpret_cast<uint4*>(w_s + ks * (K0 * 32) + half * (K0 * 16) + n * 16) = v;
  }
  fence_proxy_async_shared();  // the weight's stores, for the tensor cores' reads
  for (int i = tid; i < G4; i += NWG * 128) bias_s[i] = p.bias[i];
  __syncthreads();

  // The staging group's barrier: a warpgroup's own (id 1 + wg, 128 threads) or the block's four (id 1, 512).
  auto group_barrier = [](int id) {
    if constexpr (SG == 1) {
      warpgroup_barrier(id);
    } else {
      asm volatile("bar.sync %0, %1;\n" ::"r"(id), "n"(SG * 128) : "memory");
    }
  };
  const int group = wg / SG, member = wg % SG;      // this warpgroup's staging group, its tile in the group's unit
  unsigned char* my_a = a_all + group * kBwdBuffers * a_bytes;  // the group's staging buffers
  static_assert((SG & (SG - 1)) == 0, "a staging group's thread index is a mask");
  const int wg_tid = tid & (SG * 128 - 1), barrier = 1 + group;  // (wg_tid: the thread's index in its group)
  // Output pixel of row q of the bordered index (b * H * W + y * W + x), or -1 (a border row, before the first
  // row or past the last).
  auto pixel_of = [&](int q) {
    if (q < 0 || q >= rows) return -1;
    // (unsigned: q is known non-negative here, and unsigned division by a runtime value is the shorter sequence)
    const unsigned uq = static_cast<unsigned>(q), hpwp = static_cast<unsigned>(HpWp), wp = static_cast<unsigned>(Wp);
    const unsigned b = uq / hpwp, rem = uq - b * hpwp, y = rem / wp, x = rem - y * wp;
    return y < static_cast<unsigned>(p.H) && x < static_cast<unsigned>(p.W)
               ? static_cast<int>(b * HW + y * p.W + x) : -1;
  };
  // Staged row r holds row q0 - (Wp + 1) + r's dpre_{t+1} (zeros where that row is no output pixel), its 16-byte
  // chunk c in half c / 8 at chunk (c % 8) ^ (r % 8) of the row's 128 bytes there.
#if MSCRED_CONV_CELL_BWD_ROW_STEPS
  // A thread's chunk is the same in every row it copies (SG x 128 threads, 16 chunks a row: its rows are 8 SG apart,
  // so its swizzled offset is fixed too); its first row is decoded once and the rest stepped from it without a
  // division (row_walk.h).
  constexpr int CHUNKS = G4 / 8, ROW_STEP = SG * 128 / CHUNKS;
  static_assert(128 % CHUNKS == 0, "a warpgroup's threads cover whole rows");
#if MSCRED_CONV_CELL_BWD_TILE_WALK
  // (row: the thread's first staged row of the unit; the caller steps it from unit to unit)
  auto load_tile = [&](int buf, BorderedRowWalk row) {
    const int c = wg_tid % CHUNKS, r0 = wg_tid / CHUNKS;
#else
  auto load_tile = [&](int buf, int tile) {  // (tile: the unit's first, tile = unit * SG)
    const int c = wg_tid % CHUNKS, r0 = wg_tid / CHUNKS;
    BorderedRowWalk row(tile * kBwdRows - (Wp + 1) + r0, p.B, p.H, p.W);
#endif
    const unsigned at = smem_u32(my_a + buf * a_bytes) + (c >> 3) * half_bytes + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4);
    const __nv_bfloat16* from = p.dpre_next + c * 8;
    for (int k = 0; k < tile_rows / ROW_STEP; ++k) {  // (tile_rows is a whole number of the threads' rounds)
      const bool inside = row.inside();
      cp_async16_or_zero(at + k * (ROW_STEP * 128), from + static_cast<size_t>(inside ? row.pixel() : 0) * G4, inside);
      row.advance(ROW_STEP);  // (the loop form: mixed-radix steps here measured +36 instructions in machine code)
    }
  };
#else
  auto load_tile = [&](int buf, int tile) {
    constexpr int CHUNKS = G4 / 8;
    const int q_first = tile * kBwdRows - (Wp + 1);
    const unsigned dst = smem_u32(my_a + buf * a_bytes);
    for (int i = wg_tid; i < tile_rows * CHUNKS; i += SG * 128) {
      const int r = i / CHUNKS, c = i % CHUNKS, pix = pixel_of(q_first + r);
      cp_async16_or_zero(dst + (c >> 3) * half_bytes + r * 128 + (((c & 7) ^ (r & 7)) << 4),
                         p.dpre_next + static_cast<size_t>(pix < 0 ? 0 : pix) * G4 + c * 8, pix >= 0);
    }
  };
#endif

  const int quad = lane >> 2, lane_ch = (lane & 3) * 8;  // accumulator rows quad, quad + 8; first of 8 channels
  // The cell backward's operands of output pixel pix (b * H * W + y * W + x) for this thread's channels.
  auto load_row = [&](int pix, int image, CellRowIn& in) {  // (image: pix's, from the walk; else divided here)
#if MSCRED_CONV_CELL_BWD_TILE_WALK
    const int b = image;
#else
    const int b = pix / HW;
    (void)image;
#endif
#pragma unroll
    for (int j = 0; j < 4; ++j) in.pre[j] = load16(p.pre + static_cast<size_t>(pix) * G4 + j * CH + lane_ch);
    in.c_prev = p.c_prev != nullptr ? load16(p.c_prev + static_cast<size_t>(pix) * CH + lane_ch)
                                     : make_uint4(0, 0, 0, 0);
    in.dout = load16(p.dout + b * p.dout_sb + static_cast<size_t>(pix - b * HW) * CH + lane_ch);
    const uint4* dc_at = reinterpret_cast<const uint4*>(p.dc + static_cast<size_t>(pix) * CH + lane_ch);
    in.dc[0] = dc_at[0];  // (dc is written below: a coherent load, not load16's read-only path)
    in.dc[1] = dc_at[1];
  };
  const unsigned w_base = smem_u32(w_s);
  const int stride = gridDim.x * GROUPS;  // in units
  float db[4][8];  // this thread's bias-gradient sums: gate j, channel lane_ch + k
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int k = 0; k < 8; ++k) db[j][k] = 0.f;
  int unit = blockIdx.x * GROUPS + group;
#if MSCRED_CONV_CELL_BWD_TILE_WALK
  // From unit to unit + stride: stride * SG tiles of rows, in the bordered index's radix.
  const BorderedStep unit_step = bordered_step(stride * SG * kBwdRows, p.H, p.W);
  const BorderedStep eight_rows = bordered_step(8, p.H, p.W);
  BorderedRowWalk stage_row(unit * SG * kBwdRows - (Wp + 1) + wg_tid / CHUNKS, p.B, p.H, p.W);  // load_tile's next
  BorderedRowWalk out_row((unit * SG + member) * kBwdRows + wq * 16 + quad, p.B, p.H, p.W);   // this unit's row quad
  if (unit < units) load_tile(0, stage_row);
  stage_row.advance(unit_step);
#else
  if (unit < units) load_tile(0, unit * SG);
#endif
  cp_async_commit();
  // (uniform over the staging group: its barriers need all of its threads, each warpgroup's wgmma all 128 of its own)
  // unit + stride's rows into staging buffer buf, if there is such a unit (the walk steps either way)
#if MSCRED_CONV_CELL_BWD_TILE_WALK
  auto load_next_unit = [&](int buf) {
    if (unit + stride < units) load_tile(buf, stage_row);
    stage_row.advance(unit_step);
  };
  for (int it = 0; unit < units; ++it, unit += stride, out_row.advance(unit_step)) {
#else
  auto load_next_unit = [&](int buf) {
    if (unit + stride < units) load_tile(buf, (unit + stride) * SG);
  };
  for (int it = 0; unit < units; ++it, unit += stride) {
#endif
#if MSCRED_CONV_CELL_BWD_SINGLE_BUFFER
    cp_async_wait<0>();          // this unit's rows (this thread's copies, issued after the last unit's MMAs) ...
#else
    group_barrier(barrier);  // every warp is done with the buffer the next unit goes into
    load_next_unit((it + 1) & 1);
    cp_async_commit();
    cp_async_wait<1>();          // this unit's rows (this thread's copies) ...
#endif
    fence_proxy_async_shared();  // ... visible to the tensor cores' reads ...
    group_barrier(barrier);      // ... every thread's
    const int tile = unit * SG + member;
    if (SG > 1 && tile >= tiles) continue;  // (the last unit's warpgroups past the last tile)
    const unsigned a_base = smem_u32(my_a + (it % kBwdBuffers) * a_bytes) + member * (kBwdRows * 128);  // its rows
    float acc[8][4];
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < KSTEPS; ++ks) {
      const int tap = ks / KC, kc = ks % KC;
      // output row m reads staged row m + (Wp + 1) - (ky Wp + kx): dpre_{t+1} at q - ky Wp - kx
      const int row0 = (Wp + 1) - ((tap >> 1) * Wp + (tap & 1));
      const unsigned a_at = a_base + (kc >> 2) * half_bytes + row0 * 128 + (kc & 3) * 32;
      wgmma_m64n64k16_ss(acc, wgmma_desc_sw128(a_at, false), wgmma_desc(w_base + ks * (K0 * 32), K0 * 16, 128),
                         ks > 0);
    }
    wgmma_commit();
    // acc[nt][2 hh + e]: row quad + 8 hh of this warp's 16; dx channel lane_ch + 2 nt + e for nt < 4, dh channel
    // lane_ch + 2 (nt - 4) + e for nt >= 4.
    int pix_of_row[2], image_of_row[2];  // the rows' output pixels (-1: a border row or past the last), images
    CellRowIn in[2];
#if MSCRED_CONV_CELL_BWD_TILE_WALK
    BorderedRowWalk walk = out_row;  // row quad, then quad + 8
#endif
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
#if MSCRED_CONV_CELL_BWD_TILE_WALK
      pix_of_row[hh] = walk.inside() ? walk.pixel() : -1;
      image_of_row[hh] = walk.b;
      walk.advance(eight_rows);
#else
      pix_of_row[hh] = pixel_of(tile * kBwdRows + wq * 16 + quad + 8 * hh);
      image_of_row[hh] = 0;  // (unused: load_row divides)
#endif
#if MSCRED_CONV_CELL_BWD_HOIST
      if (pix_of_row[hh] >= 0) load_row(pix_of_row[hh], image_of_row[hh], in[hh]);
#endif
    }
    wgmma_wait_all();
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) keep_in_registers(acc[nt][i]);
#if MSCRED_CONV_CELL_BWD_SINGLE_BUFFER
    group_barrier(barrier);  // every warp's MMAs have read the buffer: the next unit's rows go in, under the epilogue
    load_next_unit(0);
    cp_async_commit();
#endif

#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {  // dx_{t+1} first: its accumulators free before the cell arithmetic
      const int q = tile * kBwdRows + wq * 16 + quad + 8 * hh;
      if (q >= rows) continue;
      store16(p.dx_next + static_cast<size_t>(q) * C + lane_ch,
              make_uint4(bits(__floats2bfloat162_rn(acc[0][2 * hh], acc[0][2 * hh + 1])),
                         bits(__floats2bfloat162_rn(acc[1][2 * hh], acc[1][2 * hh + 1])),
                         bits(__floats2bfloat162_rn(acc[2][2 * hh], acc[2][2 * hh + 1])),
                         bits(__floats2bfloat162_rn(acc[3][2 * hh], acc[3][2 * hh + 1]))));
    }
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const int pix = pix_of_row[hh];
      if (pix < 0) continue;
#if !MSCRED_CONV_CELL_BWD_HOIST
      load_row(pix, image_of_row[hh], in[hh]);
#endif
      const uint4* pre_v = in[hh].pre;
      const uint4 c_prev_v = in[hh].c_prev, dout_v = in[hh].dout;
      float* dc_at = p.dc + static_cast<size_t>(pix) * CH + lane_ch;
      const float dc_in[8] = {__uint_as_float(in[hh].dc[0].x), __uint_as_float(in[hh].dc[0].y),
                              __uint_as_float(in[hh].dc[0].z), __uint_as_float(in[hh].dc[0].w),
                              __uint_as_float(in[hh].dc[1].x), __uint_as_float(in[hh].dc[1].y),
                              __uint_as_float(in[hh].dc[1].z), __uint_as_float(in[hh].dc[1].w)};
      float dc_out[8];
      uint32_t dpre_w[4][4];
#pragma unroll
      for (int kp = 0; kp < 4; ++kp) {  // channels lane_ch + 2 kp + {0, 1}
        float2 z[4];  // gates i, g, f, o: pre + bias rounded to bf16, as the forward took them
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const float2 pv = bf16x2_bits_to_float2(reinterpret_cast<const uint32_t*>(&pre_v[j])[kp]);
#if MSCRED_CONV_CELL_PRE_WITH_BIAS
          z[j] = pv;  // the forward stored the gates with the bias (conv_cell.h)
#else
          const float b0 = bias_s[j * CH + lane_ch + 2 * kp], b1 = bias_s[j * CH + lane_ch + 2 * kp + 1];
          z[j] = __bfloat1622float2(__floats2bfloat162_rn(pv.x + b0, pv.y + b1));
#endif
        }
        const float2 cp = half2_bits_to_float2(reinterpret_cast<const uint32_t*>(&c_prev_v)[kp]);
        const float2 dout2 = bf16x2_bits_to_float2(reinterpret_cast<const uint32_t*>(&dout_v)[kp]);
        float d[4][2];
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const float zi = e ? z[0].y : z[0].x, zg = e ? z[1].y : z[1].x, zf = e ? z[2].y : z[2].x;
          const float zo = e ? z[3].y : z[3].x, c_prev = e ? cp.y : cp.x;
          const float i = sigmoid_fast(zi), g = tanh_fast(zg), f = sigmoid_fast(zf + p.forget_bias);
          const float o = sigmoid_fast(zo);
          const float c = p.c_prev != nullptr ? fmaf(f, c_prev, i * g) : i * g;  // c_t recomputed
          const float tc = tanh_fast(c);
          const float dh = (e ? dout2.y : dout2.x) + acc[4 + kp][2 * hh + e];  // + the recurrent part
          const float dc = fmaf(dh * o, 1.f - tc * tc, dc_in[2 * kp + e]);
          d[3][e] = dh * tc * o * (1.f - o);
          d[0][e] = dc * g * i * (1.f - i);
          d[1][e] = dc * i * (1.f - g * g);
          d[2][e] = p.c_prev != nullptr ? dc * c_prev * f * (1.f - f) : 0.f;  // c_{-1} = 0
          dc_out[2 * kp + e] = dc * f;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          dpre_w[j][kp] = bits(__floats2bfloat162_rn(d[j][0], d[j][1]));
          db[j][2 * kp] += d[j][0];
          db[j][2 * kp + 1] += d[j][1];
        }
      }
      store16(dc_at, make_uint4(__float_as_uint(dc_out[0]), __float_as_uint(dc_out[1]), __float_as_uint(dc_out[2]),
                                __float_as_uint(dc_out[3])));
      store16(dc_at + 4, make_uint4(__float_as_uint(dc_out[4]), __float_as_uint(dc_out[5]),
                                    __float_as_uint(dc_out[6]), __float_as_uint(dc_out[7])));
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        store16(p.dpre + static_cast<size_t>(pix) * G4 + j * CH + lane_ch,
                make_uint4(dpre_w[j][0], dpre_w[j][1], dpre_w[j][2], dpre_w[j][3]));
      }
    }
  }
  cp_async_wait<0>();  // (the last commit was empty)

  // The bias gradient: each thread's sums over the warp's eight row quads (the lanes of one lane % 4 share their
  // channels), each warp's into its own row of db_s (no shared-memory float atomics: sm_90 makes them a
  // compare-and-swap loop), then the warps' rows summed and added once per block to the float32 total.
#pragma unroll
  for (int j = 0; j < 4; ++j) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      float v = db[j][k];
      v += __shfl_xor_sync(0xffffffffu, v, 4);
      v += __shfl_xor_sync(0xffffffffu, v, 8);
      v += __shfl_xor_sync(0xffffffffu, v, 16);
      db[j][k] = v;
    }
  }
  if (lane < 4) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int k = 0; k < 8; ++k) db_s[warp * G4 + j * CH + lane * 8 + k] = db[j][k];
  }
  __syncthreads();
  for (int i = tid; i < G4; i += NWG * 128) {
    float sum = 0.f;
#pragma unroll
    for (int w = 0; w < NWG * 4; ++w) sum += db_s[w * G4 + i];
    atomicAdd(p.dbias + i, sum);
  }
}

template <int C, int CH>
size_t shared_bytes_backward_of(int w) {
  using S = BwdSizes<C, CH>;
  return S::WEIGHT_BYTES + S::SMALL_BYTES + 1024 +
         static_cast<size_t>(kBwdWarpgroups / kStageWarpgroups) * kBwdBuffers * S::HALVES * bwd_tile_rows(w) * 128;
}

}  // namespace

bool pre_with_bias_backward() { return MSCRED_CONV_CELL_PRE_WITH_BIAS != 0; }

size_t shared_bytes_backward(int c, int ch, int w) {
  return c == 32 && ch == 32 ? shared_bytes_backward_of<32, 32>(w) : 0;
}

cudaError_t conv_cell_step_backward(const ConvCellBwdParams& p, int c, int ch, int sms, cudaStream_t stream) {
  if (p.B <= 0) return cudaSuccess;
#if defined(MSCRED_SM90A)
  if (c == 32 && ch == 32) {
    const size_t smem = shared_bytes_backward_of<32, 32>(p.W);
    cudaError_t err = mscred_resident::allow_shared_memory<conv_cell_bwd_kernel<32, 32>>(smem);
    if (err != cudaSuccess) return err;
    conv_cell_bwd_kernel<32, 32><<<sms, kBwdWarpgroups * 128, smem, stream>>>(p);
    return cudaGetLastError();
  }
#else
  (void)c;
  (void)ch;
  (void)sms;
  (void)stream;
#endif
  return cudaErrorInvalidValue;
}

}  // namespace mscred_conv_cell
