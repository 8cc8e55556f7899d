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
//   - optionally the level's attention backward folded into the epilogue's dout (conv_cell.h's attn_*): for
//     t < T - 1 the attention's dL/dh_t is a_t g + s_t h_{T-1}, made from two maps every step reads (mostly from L2)
//     instead of a map per step the attention's backward would write and this kernel read back.
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

// How a thread finds its rows: the staging threads' rows and the epilogue's are walks in the bordered index
// (row_walk.h), decoded once a kernel and stepped by additions -- 8 rows to a staging thread's next row, a fixed
// stride in the index's mixed radix (BorderedStep) to the thread's next tile -- so that the tile loop has no integer
// division. On the H200, against decoding by division (a kernel bound by its instruction issue, results/
// conv_cell_bwd_ncu/): each staged chunk's row divided, 2,770 instructions a thread's tile loop -> the staging rows
// stepped, 2,326, the four steps' kernels 229.8 -> 200.6 us (results/conv_cell_bwd_steps/, conv_cell_rows_default/)
// -> every row walked from tile to tile, 2,181, 202.7 -> 194.5 us (results/conv_cell_tile_walk/, conv_cell_next/).
// The walks are replayed against division on the CPU (tests/test_conv_cell_layout.py).
//
// Measured on the H200 and removed (2026-12-02; `git log -S MSCRED_CONV_CELL_BWD_SINGLE_BUFFER` finds the code):
//   - the epilogue's loads issued before the MMA wait (168 registers): 232.0 against 227.8 us, no gain
//     (results/conv_cell_bwd_hoist/);
//   - four warpgroups sharing one double-buffered staging of four tiles, synchronised block-wide: 221.2 against 200.6
//     us (results/conv_cell_bwd_steps/);
//   - four warpgroups of one staging buffer each, the next unit's copies under the epilogue: 205.2 against 202.7 us
//     (results/conv_cell_next/).
// The kernel is latency-bound at 12 warps an SM (results/conv_cell_bwd_ncu_rows/), but more warps bought with less
// staging lose more than they hide.

constexpr int kBwdRows = 64;        // dxh rows (of the bordered index) per warpgroup tile: wgmma's M
constexpr int kBwdWarpgroups = 3;  // a block's, each with its own tiles and two staging buffers
constexpr int kBwdBuffers = 2;

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

// dL/dh_t of the level's attention output for t < T - 1, 8 channels: bf16(a_t g + s_t h_{T-1}) (conv_cell.h), as
// the attention's backward kernel would have stored it (ops/triton/attention.py, ``_attention_grad``).
__device__ __forceinline__ uint4 attention_grad(const uint4& g, const uint4& h_last, float2 coef) {
  uint32_t w[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const float2 g2 = bf16x2_bits_to_float2(reinterpret_cast<const uint32_t*>(&g)[k]);
    const float2 h2 = bf16x2_bits_to_float2(reinterpret_cast<const uint32_t*>(&h_last)[k]);
    w[k] = bits(__floats2bfloat162_rn(fmaf(coef.x, g2.x, coef.y * h2.x), fmaf(coef.x, g2.y, coef.y * h2.y)));
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Rows of a staging buffer: the tile's rows and the Wp + 1 before them, in whole 8-row swizzle atoms -- whole
// rounds of the staging threads' rows (8 a warpgroup: 128 threads, 16 chunks a row).
__host__ __device__ constexpr int bwd_tile_rows(int w) {
  return (kBwdRows + (w + 1) + 1 + 7) / 8 * 8;
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

  unsigned char* my_a = a_all + wg * kBwdBuffers * a_bytes;  // this warpgroup's staging buffers
  const int wg_tid = tid & 127, barrier = 1 + wg;
  // Staged row r holds row q0 - (Wp + 1) + r's dpre_{t+1} (zeros where that row is no output pixel), its 16-byte
  // chunk c in half c / 8 at chunk (c % 8) ^ (r % 8) of the row's 128 bytes there. A thread's chunk is the same in
  // every row it copies (128 threads, 16 chunks a row: its rows are 8 apart, so its swizzled offset is fixed too).
  constexpr int CHUNKS = G4 / 8, ROW_STEP = 128 / CHUNKS;
  static_assert(128 % CHUNKS == 0, "a warpgroup's threads cover whole rows");
  // (row: the thread's first staged row of the tile; the caller steps it from tile to tile)
  auto load_tile = [&](int buf, BorderedRowWalk row) {
    const int c = wg_tid % CHUNKS, r0 = wg_tid / CHUNKS;
    const unsigned at = smem_u32(my_a + buf * a_bytes) + (c >> 3) * half_bytes + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4);
    const __nv_bfloat16* from = p.dpre_next + c * 8;
    for (int k = 0; k < tile_rows / ROW_STEP; ++k) {  // (tile_rows is a whole number of the threads' rounds)
      const bool inside = row.inside();
      cp_async16_or_zero(at + k * (ROW_STEP * 128), from + static_cast<size_t>(inside ? row.pixel() : 0) * G4, inside);
      row.advance(ROW_STEP);  // (the loop form: mixed-radix steps here measured +36 instructions in machine code)
    }
  };

  const int quad = lane >> 2, lane_ch = (lane & 3) * 8;  // accumulator rows quad, quad + 8; first of 8 channels
  // The cell backward's operands of output pixel pix (b * H * W + y * W + x, in image b) for this thread's channels.
  auto load_row = [&](int pix, int b, CellRowIn& in) {
#pragma unroll
    for (int j = 0; j < 4; ++j) in.pre[j] = load16(p.pre + static_cast<size_t>(pix) * G4 + j * CH + lane_ch);
    in.c_prev = p.c_prev != nullptr ? load16(p.c_prev + static_cast<size_t>(pix) * CH + lane_ch)
                                     : make_uint4(0, 0, 0, 0);
    const size_t at_map = static_cast<size_t>(pix - b * HW) * CH + lane_ch;
    in.dout = p.attn_g == nullptr
                  ? load16(p.dout + b * p.dout_sb + at_map)
                  : attention_grad(load16(p.attn_g + b * p.attn_g_sb + at_map),
                                   load16(p.attn_hl + b * p.attn_hl_sb + at_map),
                                   __ldg(reinterpret_cast<const float2*>(p.attn_coef + b * p.attn_coef_sb)));
    const uint4* dc_at = reinterpret_cast<const uint4*>(p.dc + static_cast<size_t>(pix) * CH + lane_ch);
    in.dc[0] = dc_at[0];  // (dc is written below: a coherent load, not load16's read-only path)
    in.dc[1] = dc_at[1];
  };
  const unsigned w_base = smem_u32(w_s);
  const int stride = gridDim.x * NWG;  // in tiles
  float db[4][8];  // this thread's bias-gradient sums: gate j, channel lane_ch + k
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int k = 0; k < 8; ++k) db[j][k] = 0.f;
  int tile = blockIdx.x * NWG + wg;
  // From tile to tile + stride: stride tiles of rows, in the bordered index's radix.
  const BorderedStep tile_step = bordered_step(stride * kBwdRows, p.H, p.W);
  const BorderedStep eight_rows = bordered_step(8, p.H, p.W);
  BorderedRowWalk stage_row(tile * kBwdRows - (Wp + 1) + wg_tid / CHUNKS, p.B, p.H, p.W);  // load_tile's next
  BorderedRowWalk out_row(tile * kBwdRows + wq * 16 + quad, p.B, p.H, p.W);               // this tile's row quad
  if (tile < tiles) load_tile(0, stage_row);
  stage_row.advance(tile_step);
  cp_async_commit();
  // (uniform over the warpgroup: its barriers and wgmma need all 128 of its threads)
  for (int it = 0; tile < tiles; ++it, tile += stride, out_row.advance(tile_step)) {
    warpgroup_barrier(barrier);  // every warp is done with the buffer the next tile goes into
    if (tile + stride < tiles) load_tile((it + 1) & 1, stage_row);  // tile + stride's rows, if there is one
    stage_row.advance(tile_step);                                    // (the walk steps either way)
    cp_async_commit();
    cp_async_wait<1>();          // this tile's rows (this thread's copies) ...
    fence_proxy_async_shared();  // ... visible to the tensor cores' reads ...
    warpgroup_barrier(barrier);  // ... every thread's
    const unsigned a_base = smem_u32(my_a + (it % kBwdBuffers) * a_bytes);
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
    BorderedRowWalk walk = out_row;      // row quad, then quad + 8
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      pix_of_row[hh] = walk.inside() ? walk.pixel() : -1;
      image_of_row[hh] = walk.b;
      walk.advance(eight_rows);
    }
    wgmma_wait_all();
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) keep_in_registers(acc[nt][i]);

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
      CellRowIn in;  // (loaded after the previous row's stores: hoisting these loads measured no gain, above)
      load_row(pix, image_of_row[hh], in);
      const uint4* pre_v = in.pre;
      const uint4 c_prev_v = in.c_prev, dout_v = in.dout;
      float* dc_at = p.dc + static_cast<size_t>(pix) * CH + lane_ch;
      const float dc_in[8] = {__uint_as_float(in.dc[0].x), __uint_as_float(in.dc[0].y),
                              __uint_as_float(in.dc[0].z), __uint_as_float(in.dc[0].w),
                              __uint_as_float(in.dc[1].x), __uint_as_float(in.dc[1].y),
                              __uint_as_float(in.dc[1].z), __uint_as_float(in.dc[1].w)};
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
         static_cast<size_t>(kBwdWarpgroups) * kBwdBuffers * S::HALVES * bwd_tile_rows(w) * 128;
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
