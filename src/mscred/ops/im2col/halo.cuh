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
// (conv_pipelined) spends ~1,240 warp instructions per 32 x 256 tile around 32 MMAs (per-tile table, masks and
// divisions, one 4-byte gathered copy per tap and pixel, TF32 rounding of every fragment) and Nsight Compute finds
// it instruction-bound (results/conv_triton/ncu_conv1_mix.txt). Here, per tile of R whole output rows of one image
// (R * W <= 256 pixels):
//   * the C x (R + 2) input rows the tile reads are copied once into shared memory with a zero column on each side
//     and zero rows above / below the image (cp.async zero-fill: the padding costs nothing), and rounded to TF32 in
//     place by the thread that copied them; the next tile's rows are in flight while this one computes (two
//     buffers, persistent blocks);
//   * the im2col operand is then read straight from those rows: the value of tap k = (c, i, j) for pixel (row, col)
//     is at koff(k) + pixoff(row, col), two per-thread constants (no table, no mask, no division in the K loop);
//   * each warp owns all 32 filters of 32 pixels (2 x 4 m16n8 tiles); the weights stay in registers as TF32 MMA
//     A-fragments for the whole kernel, the bias is the accumulators' initial value, and both are scaled by
//     log2(e) under SELU so that the epilogue's exponential is one MUFU.EX2 (selu_of_log2);
//   * the output tile goes through shared memory and out as whole channel rows (16-byte stores when aligned): the
//     store pattern of the generic kernel, whose coalescing a register-direct variant lost (conv_rows, 2.5x slower,
//     benchmarks/conv_variants.cuh).
// ---------------------------------------------------------------------------------------------------------------
constexpr int kHaloThreads = 256;
constexpr int kHaloPixels = 256;           // pixels per tile at most (8 warps x 32)
constexpr int kHaloLdo = kHaloPixels + 8;  // output tile row stride (conflict-free float2 staging)
constexpr float kLog2eHalo = 1.4426950408889634f;

// SELU of z given u = z * log2(e).
__device__ __forceinline__ float selu_of_log2(float u) {
  float e;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(u));
  const float neg = fmaf(kSeluScale * kSeluAlpha, e, -kSeluScale * kSeluAlpha);
  return u > 0.f ? (kSeluScale / kLog2eHalo) * u : neg;
}

// Geometry shared by host and device: R output rows per tile, the staged rows' layout.
struct HaloGeom {
  int R;        // output rows per tile: min(H, 256 / W)
  int SW;       // staged row width: W + 2 (a zero column each side), made odd
  int CS;       // staged channel stride: (R + 2) * SW
  int cells;    // C * CS floats per buffer
  int out_at;   // word offset of the output tile: after both buffers, 16-byte aligned (float4 reads)
  int tiles_per_image;
  MSCRED_HD int smem_bytes() const { return (out_at + 32 * kHaloLdo) * 4; }
  MSCRED_HD static HaloGeom of(const ConvShape& s) {
    HaloGeom g;
    g.R = s.H < kHaloPixels / s.W ? s.H : kHaloPixels / s.W;
    g.SW = (s.W + 2) | 1;  // odd: the taps of one load (columns j, rows i) fall into different banks
    g.CS = (g.R + 2) * g.SW;
    g.cells = s.C * g.CS;
    g.out_at = (2 * g.cells + 3) / 4 * 4;
    g.tiles_per_image = (s.H + g.R - 1) / g.R;
    return g;
  }
};

template <int C>
__global__ void __launch_bounds__(kHaloThreads, 2)
    conv_halo3x3(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                 float* __restrict__ y, ConvShape s, bool apply_selu, bool y_vec) {
  constexpr int O = 32, K = 9 * C, NKS = (K + 7) / 8, MT = 2, NT = 4;
  extern __shared__ __align__(16) uint32_t smem[];
  const HaloGeom geo = HaloGeom::of(s);
  const int H = s.H, W = s.W, P = H * W;
  float* out_s = reinterpret_cast<float*>(smem + geo.out_at);
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
  const float scale = apply_selu ? kLog2eHalo : 1.f;

  // Weights as TF32 A-fragments (rows o = i*16 + g (+8), columns k = ks*8 + t (+4); k >= K is zero), and the bias
  // as the accumulators' initial value; both times log2(e) under SELU.
  uint32_t af[NKS][MT][4];
#pragma unroll
  for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int o = i * 16 + g + 8 * (r & 1), k = ks * 8 + t + 4 * (r >> 1);
        af[ks][i][r] = to_tf32(k < K ? scale * __ldg(w + o * K + k) : 0.f);
      }
  float b0[MT][2];
#pragma unroll
  for (int i = 0; i < MT; ++i)
#pragma unroll
    for (int h = 0; h < 2; ++h) b0[i][h] = bias != nullptr ? scale * __ldg(bias + i * 16 + g + 8 * h) : 0.f;

  // Tap k = (c, i, j) of pixel (row, col) is staged at c*CS + (row + i)*SW + (col + j): koff(k) + pixoff(pixel).
  // k >= K reads the pixel's own tap (0, 0, 0) against a zero weight.
  int koff[NKS][2];
#pragma unroll
  for (int ks = 0; ks < NKS; ++ks)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = ks * 8 + t + 4 * h, c = k / 9, i = (k % 9) / 3, j = k % 3;
      koff[ks][h] = k < K ? c * geo.CS + i * geo.SW + j : 0;
    }

  // Staging: for each channel c, warp w copies staged rows w, w + 8, ..., lane l columns l, l + 32, ...; staged
  // (c, sr, sc) holds input (row r0 - 1 + sr, column sc - 1) of channel c, or zero outside the image.
  const int64_t plane = (int64_t)H * W;
  auto issue_stage = [&](int tile, uint32_t* buf) {
    const int n = tile / geo.tiles_per_image, r0 = (tile - n * geo.tiles_per_image) * geo.R;
    const float* xt = x + (int64_t)n * C * plane;
#pragma unroll
    for (int c = 0; c < C; ++c)
      for (int sr = warp; sr < geo.R + 2; sr += kHaloThreads / 32) {
        const int row = r0 - 1 + sr;
        const bool row_ok = (unsigned)row < (unsigned)H;
        const float* src = xt + c * plane + (int64_t)row * W - 1;
        uint32_t* dst = buf + c * geo.CS + sr * geo.SW;
        for (int sc = lane; sc < geo.SW; sc += 32) {
          const bool ok = row_ok && (unsigned)(sc - 1) < (unsigned)W;
          cp_async4(dst + sc, ok ? src + sc : x, ok);
        }
      }
    cp_async_commit();
  };
  auto round_stage = [&](uint32_t* buf) {  // the cells this thread copied, to TF32 in place
#pragma unroll
    for (int c = 0; c < C; ++c)
      for (int sr = warp; sr < geo.R + 2; sr += kHaloThreads / 32)
        for (int sc = lane; sc < geo.SW; sc += 32) {
          uint32_t& v = buf[c * geo.CS + sr * geo.SW + sc];
          v = to_tf32(__uint_as_float(v));
        }
  };

  const int ntiles = s.N * geo.tiles_per_image;
  int tile = blockIdx.x, cur = 0;
  if (tile < ntiles) issue_stage(tile, smem);
  for (; tile < ntiles; tile += gridDim.x, cur ^= 1) {
    const int next = tile + gridDim.x;
    uint32_t* const buf = smem + cur * geo.cells;  // this tile's rows; the other buffer takes the next tile's
    if (next < ntiles) issue_stage(next, smem + (cur ^ 1) * geo.cells);
    else cp_async_commit();  // an empty group keeps the count: wait_group 1 = "this tile's copies landed"
    cp_async_wait<1>();
    round_stage(buf);
    __syncthreads();  // (A) this tile's rows are staged; every thread is done with the previous output tile

    const int n = tile / geo.tiles_per_image, r0 = (tile - n * geo.tiles_per_image) * geo.R;
    const int rows = H - r0 < geo.R ? H - r0 : geo.R, cnt = rows * W;
    int pixoff[NT];
#pragma unroll
    for (int j = 0; j < NT; ++j) {
      const int px = warp * 32 + j * 8 + g;  // this thread's B column of n-block j
      const int row = px / W, col = px - row * W;
      pixoff[j] = px < cnt ? row * geo.SW + col : 0;  // pixels past the tile compute garbage, never stored
    }
    float acc[MT][NT][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        acc[i][j][0] = acc[i][j][1] = b0[i][0];
        acc[i][j][2] = acc[i][j][3] = b0[i][1];
      }
#pragma unroll
    for (int ks = 0; ks < NKS; ++ks) {
      uint32_t bf[NT][2];
#pragma unroll
      for (int j = 0; j < NT; ++j) {
        bf[j][0] = buf[pixoff[j] + koff[ks][0]];
        bf[j][1] = buf[pixoff[j] + koff[ks][1]];
      }
#pragma unroll
      for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < NT; ++j) mma_tf32(acc[i][j], af[ks][i], bf[j]);
    }
    stage_accumulators<MT, NT, kHaloLdo>(acc, out_s, 0, warp, lane);  // its barrier (B) publishes the tile

    // Whole channel rows out: thread tid writes channel tid / 8, every 8th group of 4 (or 1) pixels.
    const int o = tid / 8, part = tid % 8;
    const float* src = out_s + o * kHaloLdo;
    float* dst = y + ((int64_t)n * O + o) * P + (int64_t)r0 * W;
    if (y_vec && (cnt % 4) == 0 && ((r0 * W) % 4) == 0) {
      for (int f = 4 * part; f < cnt; f += 32) {
        float4 v = *reinterpret_cast<const float4*>(src + f);
        if (apply_selu) {
          v.x = selu_of_log2(v.x); v.y = selu_of_log2(v.y); v.z = selu_of_log2(v.z); v.w = selu_of_log2(v.w);
        }
        asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(dst + f), "f"(v.x), "f"(v.y), "f"(v.z),
                     "f"(v.w)
                     : "memory");
      }
    } else {
      for (int f = part; f < cnt; f += 8) {
        const float v = src[f];
        dst[f] = apply_selu ? selu_of_log2(v) : v;
      }
    }
  }
  cp_async_wait<0>();
}

}  // namespace
}  // namespace mscred_im2col
