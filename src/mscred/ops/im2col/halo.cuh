// conv_halo3x3: conv1-shaped layers (1-3 input channels, 3 x 3, stride 1, "same" padding 1, 32 filters) with the
// input rows staged in shared memory. Part of the im2col extension: im2col.cu includes it (see the overview there).
#pragma once

#include <cstdint>

#include "im2col.h"
#include "device_math.cuh"
#include "implicit.cuh"
#include "pipelined.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Why a kernel of its own: conv1's reduction is only K = 9C <= 27 deep, so the generic table-driven kernel
// (conv_pipelined) spends most of its ~27M warp instructions (batch 640, n = 30) on bookkeeping around one K-step:
// per-tile gather tables, masks and divisions, one 4-byte gathered copy per tap and pixel, weights re-copied per
// tile, TF32 rounding of every fragment (results/conv_source/summary.md, per source line). Here, per tile of R whole
// output rows of one image (R * W <= 256 pixels):
//   * the C x (R + 2) input rows the tile reads are copied once into shared memory with a zero column on each side
//     and zero rows above / below the image (cp.async zero-fill: the padding costs nothing), then rounded to TF32 in
//     place by the thread that copied them; the next tile's rows are in flight while this one computes (two
//     buffers, persistent blocks). Which cells a thread copies is the same for every tile, so their source offsets
//     are worked out once per kernel (the staging plan, in shared memory): no division per tile;
//   * the im2col operand is then read straight from those rows: the value of tap k = (c, i, j) for pixel (row, col)
//     is at koff(k) + pixoff(row, col), two per-thread constants (no table, no mask, no division in the K loop);
//   * each warp owns all 32 filters of 32 pixels (2 x 4 m16n8 tiles); the weights are staged once per block in
//     shared memory as TF32 (one ldmatrix per A-fragment; in registers they made ptxas spill), the bias is the
//     first K-step's C operand, and both are scaled by log2(e) under SELU so that SELU is four instructions on the
//     accumulators (selu_of_log2);
//   * the output tile goes through shared memory and out as whole channel rows (the store pattern whose coalescing
//     a register-direct variant lost: conv_rows, 2.5x slower, benchmarks/conv_variants.cuh): with TMA_STORE one
//     bulk copy (TMA) per row, two output tiles alternating, else 16-byte stores by every thread.
// Measured (H200, results/conv1_halo_v4/): 11.7M warp instructions and 0.0362 ms at batch 640, n = 30, against the
// generic kernel's 27.3M and 0.0489. Its first version (results/conv1_halo/) ran 22.6M, as many as the generic
// kernel: its staging (channels x rows x columns, nested, 64-bit address arithmetic per row) and rounding loops
// were six nests, 605 of the 1,538 instructions of its per-tile loop beside 32 MMAs (its SASS:
// results/conv1_halo/sass_loops.txt), and SELU ran in the store loop.
// ---------------------------------------------------------------------------------------------------------------
constexpr int kHaloThreads = 256;
constexpr int kHaloPixels = 256;           // pixels per tile at most (8 warps x 32)
constexpr int kHaloLdo = kHaloPixels + 8;  // output tile row stride (conflict-free float2 staging)
// Staged cells per thread and tile at most: C * (R + 2) * SW <= 1,024 (conv1 at n = 30 stages 990); so W <= 111
// for 3 channels, W <= 168 for 2. The staging plan keeps two words per cell in shared memory (8 KB per block).
constexpr int kHaloStage = 4;
constexpr int kHaloLdw = 36;               // weight row stride: K <= 27 padded to 32, + 4 (conflict-free ldmatrix)

// Geometry shared by host and device: R output rows per tile, the staged rows' layout.
struct HaloGeom {
  int R;        // output rows per tile: min(H, 256 / W, what kHaloStage cells per thread stage); < 1: no fit
  int SW;       // staged row width: W + 2 (a zero column each side), made odd
  int CS;       // staged channel stride: (R + 2) * SW
  int cells;    // C * CS floats per buffer
  int out_at;   // word offset of the output tile(s): after both buffers, 16-byte aligned (float4 reads)
  int outs;     // output tiles: 2 when they leave by bulk copies (one fills while the other is read), else 1
  int tiles_per_image;
  MSCRED_HD int w_at() const { return out_at + outs * 32 * kHaloLdo; }  // the weights, after the output tile(s)
  MSCRED_HD int plan_at() const { return w_at() + 32 * kHaloLdw; }  // the staging plan (int2 per cell), after them
  MSCRED_HD int smem_bytes() const { return (plan_at() + 2 * kHaloStage * kHaloThreads) * 4; }
  MSCRED_HD static HaloGeom of(const ConvShape& s, bool tma_store = false) {
    HaloGeom g;
    g.outs = tma_store ? 2 : 1;
    g.SW = (s.W + 2) | 1;  // odd: the taps of one load (columns j, rows i) fall into different banks
    const int by_pixels = kHaloPixels / s.W, by_stage = kHaloStage * kHaloThreads / (s.C * g.SW) - 2;
    g.R = s.H < by_pixels ? s.H : by_pixels;
    g.R = g.R < by_stage ? g.R : by_stage;
    g.CS = (g.R + 2) * g.SW;
    g.cells = s.C * g.CS;
    g.out_at = (2 * g.cells + 3) / 4 * 4;
    g.tiles_per_image = g.R >= 1 ? (s.H + g.R - 1) / g.R : 0;
    return g;
  }
};

// A 32-bit word from a shared-memory byte address (the B-fragment reads: one add per read, where the compiler
// shifted and added an index to the buffer's base).
__device__ __forceinline__ uint32_t lds_u32(unsigned addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}

// Two adjacent 32-bit words (8-byte aligned) from a shared-memory byte address (conv_halo3x3s2's B pairs).
__device__ __forceinline__ void lds_u32x2(uint32_t (&v)[2], unsigned addr) {
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v[0]), "=r"(v[1]) : "r"(addr));
}

// TMA_STORE: the output tile leaves through the Tensor Memory Accelerator, one bulk copy per channel row (shared ->
// global) issued by one thread each, instead of every thread loading and storing 16 bytes at a time (that loop was
// 14% of the instructions and 30% of the stall samples, results/conv1_halo_v2/halo_source.md). The writes to shared
// memory must be made visible to the async proxy (fence.proxy.async) before the barrier that precedes the copies,
// and the copies must have read shared memory (wait_group.read) before it is written again. With one output tile
// that wait cost more than the loop saved (barrier stalls 49%, results/conv1_halo_v3/), so there are two, and the
// wait is for the copies of two tiles back (wait_group.read 1).
// Bulk copies are Hopper's (sm_90); built for an older GPU, the TMA_STORE variant takes the 16-byte stores
// (kHaloBulkCopies false) and these helpers compile to nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
constexpr bool kHaloBulkCopies = false;
#define MSCRED_HALO_BULK_ASM(...)
#else
constexpr bool kHaloBulkCopies = true;
#define MSCRED_HALO_BULK_ASM(...) asm volatile(__VA_ARGS__)
#endif
__device__ __forceinline__ void bulk_store_row(float* dst, const float* src, unsigned bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(src));
  MSCRED_HALO_BULK_ASM("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(s),
                       "r"(bytes)
                       : "memory");
  MSCRED_HALO_BULK_ASM("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_read_all_but_last() {
  MSCRED_HALO_BULK_ASM("cp.async.bulk.wait_group.read 1;\n" ::: "memory");
}
__device__ __forceinline__ void bulk_wait_all() { MSCRED_HALO_BULK_ASM("cp.async.bulk.wait_group 0;\n" ::: "memory"); }
__device__ __forceinline__ void fence_proxy_async_shared() {
  MSCRED_HALO_BULK_ASM("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// SELU a template argument: as a runtime flag its two paths had to leave the accumulators in the same registers,
// 32 moves per tile.
template <int C, bool SELU, bool TMA_STORE>
__global__ void __launch_bounds__(kHaloThreads, 2)
    conv_halo3x3(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                 float* __restrict__ y, ConvShape s, bool y_vec) {
  constexpr int O = 32, K = 9 * C, NKS = (K + 7) / 8, MT = 2, NT = 4;
  extern __shared__ __align__(16) uint32_t smem[];
  const HaloGeom geo = HaloGeom::of(s, TMA_STORE);
  const int H = s.H, W = s.W, P = H * W;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const float scale = SELU ? kLog2e : 1.f;

  // Weights in shared memory as TF32, row o = filter, column k < 32 (k >= K is zero), and the bias as the
  // accumulators' initial value; both times log2(e) under SELU. Published by the first barrier (A) below.
  uint32_t* const ws = smem + geo.w_at();
  for (int e = tid; e < 32 * 32; e += kHaloThreads) {
    const int o = e / 32, k = e % 32;
    ws[o * kHaloLdw + k] = to_tf32(k < K ? scale * __ldg(w + o * K + k) : 0.f);
  }
  // ldmatrix.x4 gives an m16n8k8 TF32 A-fragment: lanes 8m..8m+7 address the rows of 8 x 4-word matrix m.
  const int mat = lane / 8, arow = lane % 8 + (mat & 1) * 8, acol = (mat >> 1) * 4;
  float b0[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) b0[i][h] = bias != nullptr ? scale * __ldg(bias + i * 16 + g + 8 * h) : 0.f;

  // Tap k = (c, i, j) of pixel (row, col) is staged at c*CS + (row + i)*SW + (col + j): koff(k) + pixoff(pixel),
  // both kept in bytes. k >= K reads the pixel's own tap (0, 0, 0) against a zero weight.
  int koff[NKS][2];
#pragma unroll
  for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = ks * 8 + t + 4 * h, c = k / 9, i = (k % 9) / 3, j = k % 3;
      koff[ks][h] = 4 * (k < K ? c * geo.CS + i * geo.SW + j : 0);
    }
  // This thread's B columns, the same in every tile: pixel px = warp*32 + j*8 + g of the tile. Pixels past R rows
  // read pixel 0; past the image's last row (the last tile of an image) they read staged zero rows. Neither is
  // stored.
  int pixoff[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int px = warp * 32 + j * 8 + g, row = px / W, col = px - row * W;
    pixoff[j] = 4 * (px < geo.R * W ? row * geo.SW + col : 0);
  }

  // Staging plan, the same for every tile: this thread copies staged cells e = tid + 256*q (q < nq); cell (c, sr, sc)
  // holds input (row r0 - 1 + sr, column sc - 1) of channel c, at plan[e].x from the tile's (n, 0, r0, 0), or zero
  // outside the image: the row test per tile is (unsigned)(r0 + plan[e].y) < H, with .y = sr - 1, or a large
  // negative number for the zero columns (so that the test fails for every tile). Kept in shared memory, read by
  // the thread that wrote it: in registers (8 of them) it made ptxas spill.
  const int64_t plane = (int64_t)H * W;
  const int nq = geo.cells > tid ? (geo.cells - tid + kHaloThreads - 1) / kHaloThreads : 0;
  int2* const plan = reinterpret_cast<int2*>(smem + geo.plan_at());
  for (int q = 0; q < nq; ++q) {
    const int e = tid + kHaloThreads * q, c = e / geo.CS, rem = e - c * geo.CS, sr = rem / geo.SW,
              sc = rem - sr * geo.SW;
    const bool col_ok = (unsigned)(sc - 1) < (unsigned)W;
    plan[e] = make_int2(c * (int)plane + (sr - 1) * W + (sc - 1), col_ok ? sr - 1 : -(1 << 30));
  }
  // A cell outside the image copies zero bytes (zero-fill) from x itself, a valid address.
  auto issue_stage = [&](int n, int r0, uint32_t* buf) {
    const int64_t base = ((int64_t)n * C * H + r0) * W;
    const unsigned d = static_cast<unsigned>(__cvta_generic_to_shared(buf + tid));
#pragma unroll
    for (int q = 0; q < kHaloStage; ++q)
      if (q < nq) {
        const int2 cell = plan[tid + kHaloThreads * q];
        const bool ok = (unsigned)(r0 + cell.y) < (unsigned)H;
        const int64_t off = ok ? base + cell.x : 0;
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(d + 4 * kHaloThreads * q),
                     "l"(x + off), "r"(ok ? 4 : 0));
      }
    cp_async_commit();
  };
  auto round_stage = [&](uint32_t* buf) {  // the cells this thread copied, to TF32 in place
#pragma unroll
    for (int q = 0; q < kHaloStage; ++q)
      if (q < nq) {
        uint32_t& v = buf[tid + kHaloThreads * q];
        v = to_tf32(__uint_as_float(v));
      }
  };

  // Tile = (image n, row block rb), tile index n * tiles_per_image + rb; a block takes every gridDim.x-th tile, so
  // (n, rb) steps by (gridDim.x / tiles_per_image, gridDim.x % tiles_per_image) with a carry: no division per tile.
  const int ntiles = s.N * geo.tiles_per_image, tpi = geo.tiles_per_image;
  const int dn = gridDim.x / tpi, drb = gridDim.x - dn * tpi;
  int tile = blockIdx.x, cur = 0, n = tile / tpi, rb = tile - n * tpi;
  if (tile < ntiles) issue_stage(n, rb * geo.R, smem);
  for (; tile < ntiles; tile += gridDim.x, cur ^= 1) {
    const int next = tile + gridDim.x;
    int n_next = n + dn, rb_next = rb + drb;
    if (rb_next >= tpi) {
      rb_next -= tpi;
      ++n_next;
    }
    const int r0 = rb * geo.R;
    uint32_t* const buf = smem + cur * geo.cells;  // this tile's rows; the other buffer takes the next tile's
    if (next < ntiles) {
      issue_stage(n_next, rb_next * geo.R, smem + (cur ^ 1) * geo.cells);
    } else {
      cp_async_commit();  // an empty group keeps the count: wait_group 1 = "this tile's copies landed"
    }
    cp_async_wait<1>();
    round_stage(buf);
    if (TMA_STORE && tid < O) bulk_wait_read_all_but_last();  // copies of two tiles back have read their tile
    __syncthreads();  // (A) this tile's rows are staged; every thread is done with the previous output tile

    const int rows = H - r0 < geo.R ? H - r0 : geo.R, cnt = rows * W;
    const bool vec = y_vec && (cnt % 4) == 0 && ((r0 * W) % 4) == 0;  // 16-byte rows in and out
    const bool bulk = TMA_STORE && kHaloBulkCopies && vec;
    float* const out_s = reinterpret_cast<float*>(smem + geo.out_at) + (TMA_STORE ? cur * 32 * kHaloLdo : 0);
    const unsigned buf_at = static_cast<unsigned>(__cvta_generic_to_shared(buf));
    float acc[MT][NT][4];
#pragma unroll
    for (int ks = 0; ks < NKS; ++ks) {
      uint32_t bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; ++j) {  // one three-operand add per address
        bf[j][0] = lds_u32(buf_at + pixoff[j] + koff[ks][0]);
        bf[j][1] = lds_u32(buf_at + pixoff[j] + koff[ks][1]);
      }
#pragma unroll
      for (int i = 0; i < MT; ++i) {
        uint32_t af[4];
        ldsm_x4(af, ws + (i * 16 + arow) * kHaloLdw + ks * 8 + acol);
#pragma unroll
        for (int j = 0; j < NT; ++j) {
          if (ks == 0) mma_tf32_bias(acc[i][j], af, bf[j], b0[i][0], b0[i][1]);
          else mma_tf32(acc[i][j], af, bf[j]);
        }
      }
    }
    if constexpr (SELU) {
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j)
#pragma unroll
          for (int v = 0; v < 4; ++v) acc[i][j][v] = selu_of_log2(acc[i][j][v]);
    }
    // The output tile in shared memory, channel rows of kHaloLdo floats (stage_accumulators' layout), then (B).
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        const int r = i * 16 + g, cc = warp * NT * 8 + j * 8 + 2 * t;
        *reinterpret_cast<float2*>(&out_s[r * kHaloLdo + cc]) = make_float2(acc[i][j][0], acc[i][j][1]);
        *reinterpret_cast<float2*>(&out_s[(r + 8) * kHaloLdo + cc]) = make_float2(acc[i][j][2], acc[i][j][3]);
      }
    if (bulk) fence_proxy_async_shared();
    __syncthreads();  // (B) the output tile is complete

    if (bulk) {  // channel row tid: cnt contiguous floats in shared memory and in y
      if (tid < O)
        bulk_store_row(y + ((int64_t)n * O + tid) * P + (int64_t)r0 * W, out_s + tid * kHaloLdo, 4u * cnt);
    } else {  // thread tid writes channel tid / 8, every 8th group of 4 (or 1) pixels; pointers stepped rather
              // than indexed (an int index cost a sign extension and a 64-bit multiply-add per store)
      const int o = tid / 8, part = tid % 8;
      const float* row_s = out_s + o * kHaloLdo;
      float* dst = y + ((int64_t)n * O + o) * P + (int64_t)r0 * W;
      if (vec) {
        const float* src_end = row_s + cnt;
        float* d = dst + 4 * part;
        for (const float* p = row_s + 4 * part; p < src_end; p += 32, d += 32) {
          const float4 v = *reinterpret_cast<const float4*>(p);
          asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(d), "f"(v.x), "f"(v.y), "f"(v.z),
                       "f"(v.w)
                       : "memory");
        }
      } else {
        for (int f = part; f < cnt; f += 8) dst[f] = row_s[f];
      }
    }
    n = n_next;
    rb = rb_next;
  }
  cp_async_wait<0>();
  if (TMA_STORE && tid < O) bulk_wait_all();
}

}  // namespace
}  // namespace mscred_im2col
