// One training forward step of a large ConvLSTM level in one kernel: the gate convolution over the zero-bordered
// [x_t, h_{t-1}] rows and the cell update in its epilogue (conv_cell_step; the concatenated-gates path of
// ops/triton/convlstm_concat.py, which otherwise runs cuDNN's convolution and the Triton cell kernel per step).
//
// Measured on the H200 (results/conv_cell_stages/, conv_cell_final/): level 1's five forward steps 142.9 us against
// 107.7 + 71.8 for cuDNN's convolutions and the cell kernels; the graphed training step 2.680 / 2.661 against 2.736 /
// 2.728 ms. Level 2's build 0.96x the split path (results/conv_cell_cuda/): off unless MSCRED_LSTM_CONV_CELL=all.
//
// Why: at level 1 (batch 128, 32 channels, 30 x 30) cuDNN's convolution takes ~21.5 us a step and the cell kernel
// ~17 us, and between them the gates (29.5 MB in bf16) go to HBM and come back; the Triton kernel that fused the
// two (a `tl.dot` tile with the cell update after it, removed in 52b2057) ran 43-44 us at 22.9% occupancy: the
// accumulators of its tile left no room for warps to cover the epilogue. Here the design of the resident inference
// kernel (ops/resident_lstm/) carries over:
//   - persistent blocks, one per SM, the gate weight of one 32-channel group (128 gate columns x 4 K0) resident in
//     shared memory for the whole step (64 KB at level 1, 128 KB at level 2), read by the tensor cores;
//   - each warpgroup takes 64-row tiles on its own: the 64 + Wp + 1 rows that a tile's four taps read are ONE
//     contiguous block of the row matrix (tap (ky, kx) of row q is row q + ky * Wp + kx), brought in by cp.async
//     into a double buffer (the next tile's rows arrive while this one computes), the GEMM on wgmma m64n128k16 with
//     B (the weight) in shared memory and A read by the tensor cores from the row buffer through a 128-byte-swizzle
//     descriptor starting at the tap's row (level 1, MSCRED_CONV_CELL_SMEM_A), or ldmatrix'ed into registers at
//     that row (level 2, whose 256-byte rows are no 128-byte swizzle atom's; XOR-swizzled chunks, conflict-free);
//   - three warpgroups a block at level 1 (two at level 2, whose weight is twice the size): while one runs its
//     MMAs the others run their epilogues, so the cell arithmetic overlaps the tensor cores;
//   - the gate columns interleaved as in the resident kernel (column n = 32 gate + 8 q + c holds channel
//     8 (c / 2) + 2 q + c % 2 of gate n / 32): every thread's accumulators hold all four gates of 8 consecutive
//     channels of two pixels, so the update is thread-local and every load and store is 16 bytes.
// The epilogue stores what the backward needs as the split path does: the pre-activations without the bias rounded
// to bf16 (cuDNN's output), c_t in float16 (MSCRED_LSTM_HALF_CELL_TRAIN), h_t into the level's output and into the
// next step's rows at channel C -- zeros on their border rows, the rows of the bordered index that are no output
// pixel, so the next step reads a zero border without a fill. Numerics as the Triton cell kernel's FAST_ACT path:
// z = bf16(bf16(conv) + bias), sigmoid(z) = (1 + tanh.approx(z / 2)) / 2, tanh.approx, c in float32 until stored.
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

using mscred_resident::wgmma_tile;
using mscred_resident::wgmma_m64n128k16_ss;

constexpr int kTileRows = 64;  // output rows (of the bordered index) per warpgroup tile: wgmma's M

// MSCRED_CONV_CELL_SMEM_A 1 (the default) has the tensor cores read the A operand (the row tiles) from shared memory
// through 128-byte-swizzle descriptors (wgmma.h's wgmma_desc_sw128: a tap's rows start at any row of the tile; the
// hardware swizzles by the absolute address, so the descriptor's base offset stays 0) instead of ldmatrix'ing it
// into registers: no A fragments in registers (64 at level 1), no spills at three warpgroups' 168 registers, no
// ldmatrix. Rows of 128 bytes only (C + Ch = 64: level 1; level 2 keeps ldmatrix). Measured on the H200
// (results/conv_cell_stages/): level 1's five steps 142.9 against 159.5 us with three warpgroups (four: no faster,
// results/conv_cell_smem/). 0 keeps ldmatrix (A/B builds: -D flags from MSCRED_CONV_CELL_FLAGS, benchmarks).
#ifndef MSCRED_CONV_CELL_SMEM_A
#define MSCRED_CONV_CELL_SMEM_A 1
#endif
// MSCRED_CONV_CELL_BASE_OFFSET: the descriptors' base offset for a tap's rows that start inside a swizzle atom (1: the
// PTX ISA's (addr >> 7) % 8; 0: none). With 1 the H200 computed wrong gates (relative difference 1.5, results/
// conv_cell_smem_first/ and conv_cell_smem/), with 0 the same as the ldmatrix build: the swizzle follows the
// absolute shared address, as for TMA's stores.
#ifndef MSCRED_CONV_CELL_BASE_OFFSET
#define MSCRED_CONV_CELL_BASE_OFFSET 0
#endif
template <int C, int CH>
__host__ __device__ constexpr bool smem_a() {
  return MSCRED_CONV_CELL_SMEM_A && C + CH == 64;
}

// Warpgroups per block: three at 32 hidden channels (64 KB of weight, 168 registers a thread), two at 64 (128 KB
// of weight leaves room for two warpgroups' double buffers; the 32 k16 steps' A fragments take 128 registers).
// MSCRED_CONV_CELL_WARPGROUPS sets level 1's count (A/B builds, as the switch above). Four measured slower on the H200:
// level 1's five steps 156.5 against 143.6 us, the 128-register cap spilling (results/conv_cell_next/, fwd4_sass/).
template <int C, int CH>
__host__ __device__ constexpr int warpgroups_of() {
#ifdef MSCRED_CONV_CELL_WARPGROUPS
  if (CH == 32) return MSCRED_CONV_CELL_WARPGROUPS;
#endif
  return CH == 32 ? 3 : 2;
}

template <int C, int CH>
struct Sizes {
  static constexpr int K0 = C + CH;         // channels of a row
  static constexpr int KSTEPS = 4 * K0 / 16;  // k16 steps over the four taps
  static constexpr int TAP_STEPS = K0 / 16;
  static constexpr int CHUNKS = K0 / 8;     // 16-byte chunks of a row
  static constexpr int WEIGHT_BYTES = KSTEPS * 4096;  // 128 gate columns x 16 k x 2 bytes per k16 step
  static constexpr int BIAS_BYTES = 128 * 4;
  static_assert(CHUNKS == 8 || CHUNKS == 16, "rows of 64 or 128 channels");
  static_assert(CH % 32 == 0, "32-channel groups");
};

// MSCRED_CONV_CELL_STAGES: level 1's row buffers per warpgroup (2: the next tile's rows arrive while this one
// computes; 3: the next two). Nsight Compute on the first build (ldmatrix, results/conv_cell_ncu/): 18% occupancy,
// 0.42 issued warps per scheduler, long-scoreboard, wait and barrier stalls first; 3 buffers took it from 159.5 to
// 150.8 us, but with the A operand in shared memory 142.3 against 142.9 us (results/conv_cell_stages/): 2 stays.
// An A/B switch as the ones above.
#ifndef MSCRED_CONV_CELL_STAGES
#define MSCRED_CONV_CELL_STAGES 2
#endif
template <int C, int CH>
__host__ __device__ constexpr int stages_of() {
  return CH == 32 ? MSCRED_CONV_CELL_STAGES : 2;
}

// Rows of a tile's buffer: the 64 output rows and the Wp + 1 more its taps read; whole 8-row swizzle atoms (1,024
// bytes) with the A operand in shared memory, so that every buffer starts on an atom.
template <int C, int CH>
__host__ __device__ constexpr int tile_rows_of(int w) {
  return smem_a<C, CH>() ? (kTileRows + (w + 1) + 1 + 7) / 8 * 8 : kTileRows + (w + 1) + 1;
}

template <int C, int CH>
__global__ void __launch_bounds__(warpgroups_of<C, CH>() * 128, 1) conv_cell_kernel(ConvCellParams p) {
  using S = Sizes<C, CH>;
  constexpr int K0 = S::K0, KSTEPS = S::KSTEPS, TAP_STEPS = S::TAP_STEPS, CHUNKS = S::CHUNKS;
  constexpr int GROUPS = CH / 32, NWG = warpgroups_of<C, CH>();
  extern __shared__ __align__(128) unsigned char smem[];
  __nv_bfloat16* w_s = reinterpret_cast<__nv_bfloat16*>(smem);
  float* bias_s = reinterpret_cast<float*>(smem + S::WEIGHT_BYTES);  // [gate][32 channels of the group]
  // The row buffers; with the A operand in shared memory from the next 1,024-byte boundary of the shared window (the
  // swizzle atoms' alignment; the block asks for 1 KB of slack then, shared_bytes_of).
  const unsigned a_start = smem_u32(smem) + S::WEIGHT_BYTES + S::BIAS_BYTES;
  unsigned char* a_all = smem + S::WEIGHT_BYTES + S::BIAS_BYTES +
                         (smem_a<C, CH>() ? ((a_start + 1023) & ~1023u) - a_start : 0);

  const int Wp = p.W + 1, HpWp = (p.H + 1) * Wp;
  const int rows = p.B * HpWp, tiles = (rows + kTileRows - 1) / kTileRows;
  const int tile_rows = tile_rows_of<C, CH>(p.W), a_bytes = tile_rows * K0 * 2;
  const int group = blockIdx.x % GROUPS, ctas = gridDim.x / GROUPS, cta = blockIdx.x / GROUPS;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2, wq = warp & 3;

  // The group's weight as wgmma's B (wgmma.h): [k16 step][k half][column n][8 k], column n = 32 j + 8 q + c of the
  // 128 holding gate j's channel group * 32 + 8 (c / 2) + 2 q + c % 2 (the resident kernel's interleaving).
  for (int i = tid; i < KSTEPS * 256; i += NWG * 128) {
    const int ks = i >> 8, n = (i >> 1) & 127, half = i & 1;
    const int j = n >> 5, q = (n >> 3) & 3, c = n & 7;
    const int real = j * CH + group * 32 + (c >> 1) * 8 + q * 2 + (c & 1);
    const uint4 v = load16(p.w + static_cast<size_t>(real) * (4 * K0) + ks * 16 + half * 8);
    *reinterpret_cast<uint4*>(w_s + ((ks * 2 + half) * 128 + n) * 8) = v;
  }
  fence_proxy_async_shared();  // the weight's stores, for the tensor cores' reads
  for (int i = tid; i < 128; i += NWG * 128) bias_s[i] = p.bias[(i >> 5) * CH + group * 32 + (i & 31)];
  __syncthreads();

  constexpr int STAGES = stages_of<C, CH>();
  unsigned char* my_a = a_all + wg * STAGES * a_bytes;  // this warpgroup's row buffers
  const int wg_tid = tid & 127, barrier = 1 + wg;
  // A tile's rows q0 .. q0 + tile_rows - 1 (the last row repeated past the end: only rows that are no output read
  // them), chunk c of row r stored at chunk c ^ (r % 8) so that ldmatrix's eight consecutive rows hit distinct banks.
  auto load_tile = [&](int buf, int tile) {
    const int q0 = tile * kTileRows;
    const unsigned dst = smem_u32(my_a + buf * a_bytes);
    for (int i = wg_tid; i < tile_rows * CHUNKS; i += 128) {
      const int r = i / CHUNKS, c = i % CHUNKS;
      const int src = min(q0 + r, rows - 1);
      cp_async16(dst + r * (K0 * 2) + ((c ^ (r & 7)) << 4), p.xh + static_cast<size_t>(src) * K0 + c * 8);
    }
  };

  // Row q of the bordered index: its batch index and output pixel (b * H * W + y * W + x), -1 if no output pixel
  // (a border row of the next step's map, or past the end).
  struct Row {
    int q, batch, pix;
  };
  const int quad = lane >> 2, lane_ch = (lane & 3) * 8;  // accumulator rows quad, quad + 8; first of 8 channels
  const int a_row = wq * 16 + (lane & 7) + ((lane >> 3) & 1) * 8, khalf = lane >> 4;  // this lane's ldmatrix row
  const unsigned w_base = smem_u32(w_s);
  const int stride = ctas * NWG;
  int tile = cta * NWG + wg;
  // A thread's two rows of each tile found by a walk (row_walk.h): decoded once, stepped 8 rows to the second and by
  // the fixed stride between its tiles (BorderedStep) to the next tile -- no integer division in the tile loop, where
  // decoding each row by two divisions before the MMAs and again after them took 8 a thread a tile: level 1's tile
  // loop 1,640 -> 1,572 instructions (results/conv_cell_walk_sass/), its five steps' kernels 145.1 -> 140.9 and
  // 143.6 -> 142.2 us on the H200 (results/conv_cell_tile_walk/, conv_cell_next/).
  const BorderedStep tile_step = bordered_step(stride * kTileRows, p.H, p.W);
  const BorderedStep eight_rows = bordered_step(8, p.H, p.W);
  BorderedRowWalk quad_row(tile * kTileRows + wq * 16 + quad, p.B, p.H, p.W);  // this tile's row quad of the warp
  auto row_at = [&](int hh) {  // row tile * kTileRows + wq * 16 + quad + 8 hh
    BorderedRowWalk r = quad_row;
    if (hh) r.advance(eight_rows);
    return Row{tile * kTileRows + wq * 16 + quad + 8 * hh, r.b, r.inside() ? r.pixel() : -1};
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {  // the first STAGES - 1 tiles' rows
    if (tile + st * stride < tiles) load_tile(st, tile + st * stride);
    cp_async_commit();
  }
  // (uniform over the warpgroup: its wgmma need all 128)
  for (int it = 0; tile < tiles; ++it, tile += stride, quad_row.advance(tile_step)) {
    warpgroup_barrier(barrier);  // every warp is done with the buffer the tile STAGES - 1 ahead goes into
    const int ahead = tile + (STAGES - 1) * stride;
    if (ahead < tiles) load_tile((it + STAGES - 1) % STAGES, ahead);
    cp_async_commit();

    // This thread's two rows: pixel (b, y, x) if an output, else a border row of the next step's map (or past the
    // end); c_{t-1} loaded now, its latency under the MMAs.
    uint4 c_old[2];
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const Row row = row_at(hh);
      c_old[hh] = make_uint4(0, 0, 0, 0);
      if (p.c_prev != nullptr && row.pix >= 0) {
        c_old[hh] = load16(p.c_prev + static_cast<size_t>(row.pix) * CH + group * 32 + lane_ch);
      }
    }

    cp_async_wait<STAGES - 1>();  // this tile's rows (this thread's copies) ...
    float acc[16][4];
    const unsigned a_base = smem_u32(my_a + (it % STAGES) * a_bytes);
    if constexpr (smem_a<C, CH>()) {
      fence_proxy_async_shared();  // ... visible to the tensor cores' reads ...
      warpgroup_barrier(barrier);  // ... every thread's
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < KSTEPS; ++ks) {
        const int tap = ks / TAP_STEPS, ts = ks % TAP_STEPS;
        const unsigned a_at = a_base + ((tap >> 1) * Wp + (tap & 1)) * (K0 * 2) + ts * 32;
        wgmma_m64n128k16_ss(acc, wgmma_desc_sw128(a_at, MSCRED_CONV_CELL_BASE_OFFSET),
                            wgmma_desc(w_base + ks * 4096, 2048, 128), ks > 0);
      }
      wgmma_commit();
      wgmma_wait_all();
#pragma unroll
      for (int nt = 0; nt < 16; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) keep_in_registers(acc[nt][i]);
    } else {
      warpgroup_barrier(barrier);  // ... and every thread's
      uint32_t a[KSTEPS][4];
#pragma unroll
      for (int tap = 0; tap < 4; ++tap) {
        const int row = a_row + (tap >> 1) * Wp + (tap & 1);
#pragma unroll
        for (int ts = 0; ts < TAP_STEPS; ++ts) {
          const int chunk = ts * 2 + khalf;
          ldmatrix_x4(a_base + row * (K0 * 2) + ((chunk ^ (row & 7)) << 4), a[tap * TAP_STEPS + ts]);
        }
      }
      wgmma_tile(acc, a, w_base);
    }

    // The cell update: gate j of channel group * 32 + lane_ch + 2 qq + e, row half hh, is acc[4 j + qq][2 hh + e].
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      const Row row = row_at(hh);
      uint32_t pre_w[4][4], c_w[4], h_w[4];
      const uint32_t* c_prev = reinterpret_cast<const uint32_t*>(&c_old[hh]);
#pragma unroll
      for (int qq = 0; qq < 4; ++qq) {
        float2 z[4];  // gates i, g, f, o
#pragma unroll
        for (int j = 0; j < 4; ++j) {
#if MSCRED_CONV_CELL_PRE_WITH_BIAS
          const float2 bias = *reinterpret_cast<const float2*>(bias_s + j * 32 + lane_ch + 2 * qq);
          const __nv_bfloat162 zb = __floats2bfloat162_rn(acc[4 * j + qq][2 * hh] + bias.x,
                                                          acc[4 * j + qq][2 * hh + 1] + bias.y);
          pre_w[j][qq] = bits(zb);
          z[j] = __bfloat1622float2(zb);
#else
          const __nv_bfloat162 conv = __floats2bfloat162_rn(acc[4 * j + qq][2 * hh], acc[4 * j + qq][2 * hh + 1]);
          pre_w[j][qq] = bits(conv);
          const float2 cf = __bfloat1622float2(conv);
          const float2 bias = *reinterpret_cast<const float2*>(bias_s + j * 32 + lane_ch + 2 * qq);
          z[j] = __bfloat1622float2(__floats2bfloat162_rn(cf.x + bias.x, cf.y + bias.y));
#endif
        }
        float cx = sigmoid_fast(z[0].x) * tanh_fast(z[1].x), cy = sigmoid_fast(z[0].y) * tanh_fast(z[1].y);
        if (p.c_prev != nullptr) {
          __half2 old;
          memcpy(&old, &c_prev[qq], 4);
          const float2 cp = __half22float2(old);
          cx = fmaf(sigmoid_fast(z[2].x + p.forget_bias), cp.x, cx);
          cy = fmaf(sigmoid_fast(z[2].y + p.forget_bias), cp.y, cy);
        }
        c_w[qq] = bits(__floats2half2_rn(cx, cy));
        h_w[qq] = bits(__floats2bfloat162_rn(sigmoid_fast(z[3].x) * tanh_fast(cx),
                                             sigmoid_fast(z[3].y) * tanh_fast(cy)));
      }
      const int ch0 = group * 32 + lane_ch;
      if (row.pix >= 0) {
        const size_t at = static_cast<size_t>(row.pix);
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          store16(p.pre + at * (4 * CH) + j * CH + ch0, make_uint4(pre_w[j][0], pre_w[j][1], pre_w[j][2], pre_w[j][3]));
        }
        store16(p.c + at * CH + ch0, make_uint4(c_w[0], c_w[1], c_w[2], c_w[3]));
        const size_t in_map = at - static_cast<size_t>(row.batch) * (p.H * p.W);
        store16(p.out + row.batch * p.out_sb + in_map * CH + ch0, make_uint4(h_w[0], h_w[1], h_w[2], h_w[3]));
        if (p.hp != nullptr) {
          store16(p.hp + static_cast<size_t>(row.q) * K0 + C + ch0, make_uint4(h_w[0], h_w[1], h_w[2], h_w[3]));
        }
      } else if (p.hp != nullptr && row.q < rows) {  // a border row of the next step's map: h = 0 there
        store16(p.hp + static_cast<size_t>(row.q) * K0 + C + ch0, make_uint4(0, 0, 0, 0));
      }
    }
  }
  cp_async_wait<0>();  // (the last commit was empty; nothing is left in flight at exit)
}

template <int C, int CH>
size_t shared_bytes_of(int w) {
  using S = Sizes<C, CH>;
  return S::WEIGHT_BYTES + S::BIAS_BYTES + (smem_a<C, CH>() ? 1024 : 0) +
         static_cast<size_t>(warpgroups_of<C, CH>()) * stages_of<C, CH>() * tile_rows_of<C, CH>(w) * S::K0 * 2;
}

template <int C, int CH>
cudaError_t launch(const ConvCellParams& p, int sms, cudaStream_t stream) {
  const size_t smem = shared_bytes_of<C, CH>(p.W);
  cudaError_t err = mscred_resident::allow_shared_memory<conv_cell_kernel<C, CH>>(smem);
  if (err != cudaSuccess) return err;
  constexpr int groups = CH / 32;
  const int grid = sms < groups ? groups : sms / groups * groups;  // whole groups: block i takes group i % groups
  conv_cell_kernel<C, CH><<<grid, warpgroups_of<C, CH>() * 128, smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace

bool pre_with_bias() { return MSCRED_CONV_CELL_PRE_WITH_BIAS != 0; }

size_t shared_bytes(int c, int ch, int w) {
  if (c == 32 && ch == 32) return shared_bytes_of<32, 32>(w);
  if (c == 64 && ch == 64) return shared_bytes_of<64, 64>(w);
  return 0;
}

cudaError_t conv_cell_step(const ConvCellParams& p, int ch, int sms, cudaStream_t stream) {
  if (p.B <= 0) return cudaSuccess;
#if defined(MSCRED_SM90A)
  if (p.C == 32 && ch == 32) return launch<32, 32>(p, sms, stream);
  if (p.C == 64 && ch == 64) return launch<64, 64>(p, sms, stream);
#else
  (void)sms;
  (void)stream;
#endif
  return cudaErrorInvalidValue;
}

}  // namespace mscred_conv_cell
