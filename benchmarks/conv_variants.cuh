// Shape-specific forward kernels for conv1 and conv2 of the encoder that were measured and NOT adopted (the product
// has had its own halo kernels for those layers since, halo.cuh and halo_s2.cuh): the standalone harness includes
// this file after im2col.cu, whose helpers it uses, to keep them measurable. results/conv_probe.md has their
// numbers and what the profiler said:
//   * conv_rows (conv1): 2.5x fewer warp instructions than the product's kernel, yet 0.122 ms against 0.048 ms with
//     its direct 8-byte stores from the accumulators (8 output rows x 32 bytes straddling sectors per store; the
//     memory-instruction queue full, 42 cycles per issued instruction), 0.068 ms with the stores staged through
//     shared memory (STAGED);
//   * conv_band (conv2): 0.117 ms against 0.083 ms (each band's copy latency exposed, 2 blocks per SM).
#pragma once

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// conv1 of the encoder (3 -> 32 channels, 3 x 3, stride 1, TF same padding of 1 on each side, W = 30 at n = 30).
// The layer is bound by writing its output (32 floats per input pixel), so
// everything else must cost few instructions; the generic kernel issued ~22M warp instructions here (its per-tile
// table and mask set-up, pixel divisions, a gathered copy per tap and a TF32 rounding per fragment; Nsight
// Compute: issue-bound, results/conv_probe.md). Here:
//   * each warp runs independently over a contiguous range of the batch's n8-blocks (8 output pixels of one row;
//     a row of W outputs is ceil(W / 8) blocks, the last one padded), in row order: the grid is one wave of
//     resident blocks, the ranges differ by at most one block, and there are no block-wide barriers;
//   * the whole weight matrix (32 x 27, padded to K = 32) lives in registers as TF32 MMA A-fragments, loaded once;
//   * a warp keeps the three input rows (x 3 channels) of its current output row in a private shared-memory ring,
//     already rounded to TF32 and zero-padded; each row is read from global memory once per warp (one row ahead,
//     in registers, while the current row computes) and written to two ring slots (r mod 3 and r mod 3 + 3), so
//     that any three consecutive rows are contiguous and a tap's offset from its pixel is one constant;
//   * the im2col B-fragment is then one 4-byte shared load per value, at a per-thread constant offset (koff) plus
//     an immediate: no table, no mask, no division. The 32 k-slots of the MMA stand for the 27 taps in an order
//     chosen so that the 4 taps one load instruction reads (lanes t = 0..3, 8 consecutive pixels g each) fall
//     into the 4 distinct 8-bank octets: channel rows CW = 3 mod 32 words apart, ring slots RS = 9 mod 32
//     (found by exhaustive search over the two residues); the 5 padding slots repeat a tap of their own load
//     (a broadcast, and a value of the pixel's own window) with weight 0;
//   * bias is the accumulators' initial value, SELU uses the hardware exponential, and each thread stores its two
//     adjacent output pixels straight from the accumulators (8 bytes).
// ---------------------------------------------------------------------------------------------------------------
// A 4-byte shared-memory load from a shared-window byte address (ptxas folds a constant added to it into the
// load's immediate; through a generic pointer the compiler re-derived each address). Not volatile, so that it can
// be scheduled among the MMAs; the "memory" clobber keeps it after the __syncwarp/__syncthreads that publish
// what it reads.
__device__ __forceinline__ uint32_t lds32(uint32_t addr) {
  uint32_t v;
  asm("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

template <int H, int W, bool STAGED>
struct RowGeom {
  static constexpr int NBW = (W + 7) / 8;                                // n8-blocks per output row
  static constexpr int CW = ((8 * NBW + 2) + 28) / 32 * 32 + 3;           // channel row: >= 8*NBW + 2, = 3 mod 32
  static constexpr int RS = ((3 * CW) + 22) / 32 * 32 + 9;               // ring slot (3 channel rows), = 9 mod 32
  static constexpr int OS = (8 * NBW + 23) / 32 * 32 + 8;                // STAGED: output tile row, = 8 mod 32
  static constexpr int WARP_WORDS = 6 * RS + (STAGED ? 32 * OS : 0);     // ring (3 rows, two slots each), tile
  static constexpr size_t SMEM_BYTES = (size_t)8 * WARP_WORDS * 4;
  static_assert(CW % 32 == 3 && RS % 32 == 9 && CW >= 8 * NBW + 2 && RS >= 3 * CW, "ring geometry");
  static_assert(OS % 32 == 8 && OS >= 8 * NBW && W % 2 == 0, "output tile geometry");
};

// k-slot -> tap (c*9 + i*3 + j), or the tap whose load it shares (weight 0) + 32. Slot s = kb*8 + h*4 + t: the
// MMA's k8-block kb, fragment half h (b0 / b1), lane column t. Each row of four is one load instruction's taps:
// their offsets c*CW + i*RS + j are distinct multiples of 8 apart mod 32 (plus a common residue).
__constant__ int8_t kRowSlotTap[32] = {
    0,  20, 22, 24,   1,  3,  23, 25,   2,  4,  6,  26,   9,  5,  7,  41,
    10, 12, 8,  42,   11, 13, 15, 43,   18, 14, 16, 50,   19, 21, 17, 51};

template <int H, int W, bool SELU, bool STAGED>
__global__ void __launch_bounds__(256, 2)
    conv_rows(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
              float* __restrict__ y, int N) {
  using G = RowGeom<H, W, STAGED>;
  constexpr int NBW = G::NBW, CW = G::CW, RS = G::RS, OS = G::OS;
  constexpr int O = 32, C = 3, ROW_WORDS = C * CW;       // one ring slot's words: 3 channel rows
  constexpr int LOADS = (ROW_WORDS + 31) / 32;            // words per lane per input row
  extern __shared__ __align__(16) float ring_all[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;
  float* ring = ring_all + warp * G::WARP_WORDS;
  constexpr int HW = H * W;

  // Weights as A-fragments: a[m][kb] = rows (16m + g, 16m + g + 8) x slots (kb*8 + t, kb*8 + 4 + t). With SELU,
  // weights and bias are scaled by log2(e) first, so that the accumulators hold z*log2(e) and SELU's exponential is
  // one MUFU.EX2 (selu_log2); the rounding to TF32 happens after the scaling, as a TF32 product's would.
  const float zscale = SELU ? kLog2e : 1.f;
  uint32_t a[2][4][4];
  int koff[4][2];  // this lane's tap offset from its pixel, per (kb, h)
#pragma unroll
  for (int kb = 0; kb < 4; ++kb)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int code = kRowSlotTap[kb * 8 + h * 4 + t];
      const int tap = code & 31, c = tap / 9, i = (tap % 9) / 3, j = tap % 3;
      koff[kb][h] = i * RS + c * CW + j;
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          a[m][kb][2 * h + r] =
              code < 32 ? to_tf32(zscale * __ldg(w + (16 * m + 8 * r + g) * (C * 9) + tap)) : 0u;
    }
  float bz[2][4];  // the accumulators' initial value: bias of rows 16m + g (c0, c1) and 16m + g + 8 (c2, c3)
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      bz[m][v] = bias != nullptr ? zscale * __ldg(bias + 16 * m + 8 * (v / 2) + g) : 0.f;
      asm("mov.b32 %0, %0;" : "+f"(bz[m][v]));  // four registers (an MMA's C quad), not two copied each time
    }

  // This warp's n8-blocks [nb0, nb1) of the batch's N * H * NBW (< 2^31: host), in (image, row, block) order.
  const int64_t total = (int64_t)N * H * NBW, warps = (int64_t)gridDim.x * 8;
  const int64_t wid = (int64_t)blockIdx.x * 8 + warp;
  const int nb0 = (int)(total * wid / warps), nb1 = (int)(total * (wid + 1) / warps);
  if (nb0 >= nb1) return;

  // Input row r (-1 <= r <= H) of image n, 3 channel rows of CW words each (word 1 + col holds column col; the
  // rest, and rows outside the image, are zero), as this lane's LOADS words (lane + 32 l): their offsets within
  // a row of the image (c*H*W + col) and which of them are columns of the image, set up once.
  int xoff[LOADS];
  uint32_t xin = 0;
#pragma unroll
  for (int l = 0; l < LOADS; ++l) {
    const int word = lane + 32 * l, c = word / CW, col = word % CW - 1;
    xoff[l] = c * HW + col;
    if (word < ROW_WORDS && (unsigned)col < (unsigned)W) xin |= 1u << l;
  }
  auto fetch_row = [&](int n, int r, float (&v)[LOADS]) {
    const float* xr = x + (int64_t)n * C * HW + r * W;
    const bool row_in = (unsigned)r < (unsigned)H;
#pragma unroll
    for (int l = 0; l < LOADS; ++l) v[l] = row_in && ((xin >> l) & 1u) ? __ldg(xr + xoff[l]) : 0.f;
  };
  auto store_row = [&](int r, const float (&v)[LOADS]) {  // into ring slots (r + 1) mod 3 and that + 3
    float* slot = ring + ((r + 1) % 3) * RS;
#pragma unroll
    for (int l = 0; l < LOADS; ++l) {
      const int word = lane + 32 * l;
      if (word < ROW_WORDS) {
        const float u = __uint_as_float(to_tf32(v[l]));
        slot[word] = u;
        slot[word + 3 * RS] = u;
      }
    }
  };

  int row = nb0 / NBW;  // global output row: image row / H, output row row % H
  int n = row / H, ho = row % H;
  float pf[LOADS];
  {  // fill the ring for the first row: input rows ho-1, ho, ho+1
    float v[LOADS];
    for (int r = ho - 1; r <= ho + 1; ++r) {
      fetch_row(n, r, v);
      store_row(r, v);
    }
  }
  const int row_end = (nb1 - 1) / NBW;
  for (;;) {
    // Prefetch the next row's new input row (ho + 2 of this image), unless the next output row starts an image.
    const bool next_same = ho + 1 < H;
    if (row < row_end && next_same) fetch_row(n, ho + 2, pf);
    __syncwarp();  // the ring's rows for this output row are written
    // This row's B-fragment pointers (input row ho - 1 sits in slot (ho - 1 + 1) mod 3) and output pointer: the
    // n8-blocks then differ by immediates only.
    const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(ring + (ho % 3) * RS + g));
    uint32_t bp[4][2];  // shared-memory byte addresses
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      bp[kb][0] = base + 4 * koff[kb][0];
      bp[kb][1] = base + 4 * koff[kb][1];
    }
    // All n8-blocks of the row, computed whether or not they are in this warp's range (the ring holds the row's
    // inputs either way; only the stores are limited to the range), k8-block by k8-block so that the 2*NBW
    // accumulator chains interleave.
    float acc[NBW][2][4];
#pragma unroll
    for (int wb = 0; wb < NBW; ++wb)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[wb][m][v] = bz[m][v];
#pragma unroll
    for (int kb = 0; kb < 4; ++kb) {
      uint32_t b[NBW][2];
#pragma unroll
      for (int wb = 0; wb < NBW; ++wb) {
        b[wb][0] = lds32(bp[kb][0] + 32 * wb);
        b[wb][1] = lds32(bp[kb][1] + 32 * wb);
      }
#pragma unroll
      for (int wb = 0; wb < NBW; ++wb)
#pragma unroll
        for (int m = 0; m < 2; ++m) mma_tf32(acc[wb][m], a[m][kb], b[wb]);
    }
#pragma unroll
    for (int wb = 0; wb < NBW; ++wb)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int v = 0; v < 4; ++v)
          if (SELU) acc[wb][m][v] = selu_of_log2(acc[wb][m][v]);
    if (STAGED) {
      // Through this warp's tile (32 channels x 8*NBW pixels, rows OS = 8 mod 32 words apart: conflict-free 8-byte
      // writes), then out as pixel pairs, lane = (channel parity, pair): each store instruction writes two whole
      // output rows (2 x 4*W contiguous bytes) instead of 8 rows x 32 bytes straddling sectors.
      float* tile = ring + 6 * RS;
#pragma unroll
      for (int wb = 0; wb < NBW; ++wb)
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            *reinterpret_cast<float2*>(tile + (16 * m + 8 * r + g) * OS + 8 * wb + 2 * t) =
                make_float2(acc[wb][m][2 * r], acc[wb][m][2 * r + 1]);
      __syncwarp();
      const int pair = lane % 16, blk = row * NBW + pair / 4;
      if (2 * pair < W && blk >= nb0 && blk < nb1) {
        const float* src = tile + (lane / 16) * OS + 2 * pair;
        float* dst = y + ((int64_t)n * O + lane / 16) * HW + ho * W + 2 * pair;
        asm("mov.b64 %0, %0;" : "+l"(dst));  // keep one base: the 16 stores differ by immediates
#pragma unroll
        for (int k = 0; k < 16; ++k) {
          const float2 v = *reinterpret_cast<const float2*>(src + 2 * k * OS);
          asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(dst + 2 * k * HW), "f"(v.x), "f"(v.y) : "memory");
        }
      }
    } else {
      float* yrow = y + ((int64_t)n * O + g) * HW + ho * W + 2 * t;
      // Opaque to the compiler, which otherwise re-derives the 64-bit address for every n8-block's stores.
      asm("mov.b64 %0, %0;" : "+l"(yrow));
#pragma unroll
      for (int wb = 0; wb < NBW; ++wb) {
        const int nb = row * NBW + wb;
        if (nb < nb0 || nb >= nb1 || 8 * wb + 2 * t >= W) continue;  // W even: both pixels of a pair, or neither
#pragma unroll
        for (int m = 0; m < 2; ++m)
#pragma unroll
          for (int r = 0; r < 2; ++r)
            // Explicit 8-byte store (through a float2 lvalue the front end may split it in two).
            asm volatile("st.global.v2.f32 [%0], {%1, %2};\n" ::"l"(yrow + (16 * m + 8 * r) * HW + 8 * wb),
                         "f"(acc[wb][m][2 * r]), "f"(acc[wb][m][2 * r + 1])
                         : "memory");
      }
    }
    if (row >= row_end) break;
    __syncwarp();  // every lane is done reading the slot about to be overwritten
    ++row;
    if (next_same) {
      ++ho;
      store_row(ho + 1, pf);
    } else {  // next image: refill rows -1, 0, 1
      ++n;
      ho = 0;
      float v[LOADS];
      for (int r = -1; r <= 1; ++r) {
        fetch_row(n, r, v);
        store_row(r, v);
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// conv2 of the encoder (32 -> 64 channels, 3 x 3, stride 2, TF same: no top/left padding, one zero row and column
// at the bottom/right; 30 x 30 -> 15 x 15 at n = 30). The generic kernel
// gathers its B tile 4 bytes per copy through the tap table (L1 78% busy, 33.6M warp instructions; Nsight
// Compute, results/conv_probe.md). Here:
//   * each block is persistent and keeps all 64 x 288 weights in shared memory, loaded once, already scaled (by
//     log2(e) with SELU, see conv_rows) and rounded to TF32, in MMA fragment order: one 16-byte load per lane per
//     (m16 tile, k8-block) gives the A register quad;
//   * a band is BR = 4 output rows of one image; its 2*BR + 1 input rows of all 32 channels are copied whole (8-byte
//     cp.async, rows RS = 32 words apart, channel planes PS = 8 mod 32 words apart, the right padding column
//     zeroed once), then rounded to TF32 in place by the thread that copied them;
//   * warp (oh, nq) computes output row r0 + nq of the band for 32 output channels (oh) and both n8-blocks of the
//     row (8 pixels each, the 16th a dummy); the B fragment is read straight from the plane layout at a per-lane
//     base plus immediates. The k-slot order puts a horizontal tap pair (j = 0, 1) of channel c0 + t in slots
//     t and t + 4 (24 k8-blocks: b0/b1 in one 8-byte load, conflict-free because PS = 8 mod 32), and the j = 2
//     taps of channels c0 + t and c0 + 4 + t in the other 12 (two 4-byte loads);
//   * bias is the accumulators' initial value; outputs go straight from the accumulators to y (4-byte stores).
// ---------------------------------------------------------------------------------------------------------------
template <int H, int W>
struct BandGeom {
  static constexpr int HO = (H + 1) / 2, WO = (W + 1) / 2;
  static constexpr int C = 32, O = 64, KB = 36;         // k8-blocks: K = 288
  static constexpr int BR = 4;                           // output rows per band (warps nq = 0..3)
  static constexpr int BANDS = (HO + BR - 1) / BR;       // per image
  static constexpr int NBW = (WO + 7) / 8;               // n8-blocks per output row
  static constexpr int IN_ROWS = 2 * BR + 1;
  static constexpr int CPR = W / 2;                      // 8-byte chunks per input row (<= 16)
  static constexpr int PER = IN_ROWS * 2;                // chunks per thread per band (see conv_band)
  static constexpr int RS = (W + 1 + 1) / 2 * 2;         // even, with a zero column at W
  static constexpr int PS = ((IN_ROWS - 1) * RS + 16 * NBW + 1 + 23) / 32 * 32 + 8;  // = 8 mod 32
  static constexpr int WQ_WORDS = (O / 16) * KB * 32 * 4;
  static constexpr int IN_WORDS = C * PS;
  static constexpr size_t SMEM_BYTES = (size_t)(WQ_WORDS + IN_WORDS) * 4;
  static_assert(W % 2 == 0 && H % 2 == 0, "even input: TF same padding is then bottom/right only");
  static_assert(PS % 32 == 8 && RS >= W + 1 && NBW == 2 && CPR <= 16, "band geometry");
};

__device__ __forceinline__ uint2 lds64_addr(uint32_t addr) {
  uint2 v;
  asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n" : "=r"(v.x), "=r"(v.y) : "r"(addr));
  return v;
}

__device__ __forceinline__ uint4 lds128_addr(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

// Slot (t, h) of k8-block kb -> input channel and tap (i, j); see conv_band.
__device__ __forceinline__ void band_slot(int kb, int t, int h, int& c, int& i, int& j) {
  if (kb < 24) {
    c = 4 * (kb / 3) + t;
    i = kb % 3;
    j = h;
  } else {
    c = 8 * ((kb - 24) / 3) + 4 * h + t;
    i = (kb - 24) % 3;
    j = 2;
  }
}

template <int H, int W, bool SELU>
__global__ void __launch_bounds__(256, 2)
    conv_band(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
              float* __restrict__ y, int N) {
  using G = BandGeom<H, W>;
  constexpr int C = G::C, O = G::O, KB = G::KB, RS = G::RS, PS = G::PS, HO = G::HO, WO = G::WO;
  constexpr int CPR = G::CPR, PER = G::PER;
  extern __shared__ __align__(16) float smem_band[];
  float* wq = smem_band;
  float* in = smem_band + G::WQ_WORDS;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int g = lane / 4, t = lane % 4;
  const int oh = warp / 4, nq = warp % 4;
  const float zscale = SELU ? kLog2e : 1.f;

  // Once per block: zero the input planes (the padding column and rows stay zero), stage the weights.
  for (int e = tid; e < G::IN_WORDS / 4; e += 256) reinterpret_cast<float4*>(in)[e] = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 8  // eight independent loads in flight: the weights come from L2 in a scattered order
  for (int e = tid; e < G::WQ_WORDS; e += 256) {
    const int v = e % 4, l = (e / 4) % 32, kb = (e / 128) % KB, mt = e / (128 * KB);
    int c, i, j;
    band_slot(kb, l % 4, v / 2, c, i, j);
    const int o = mt * 16 + l / 4 + 8 * (v % 2);
    wq[e] = __uint_as_float(to_tf32(zscale * __ldg(w + ((o * C + c) * 3 + i) * 3 + j)));
  }
  float bz[2][4];  // rows (2 oh + m)*16 + g (c0, c1) and + 8 (c2, c3)
#pragma unroll
  for (int m = 0; m < 2; ++m)
#pragma unroll
    for (int v = 0; v < 4; ++v) {
      bz[m][v] = bias != nullptr ? zscale * __ldg(bias + (2 * oh + m) * 16 + g + 8 * (v / 2)) : 0.f;
      asm("mov.b32 %0, %0;" : "+f"(bz[m][v]));  // four registers (an MMA's C quad), not two copied each time
    }

  // This thread's copies, the same for every band: pair q = tid % 16 (none if q >= CPR) of input row r / 2 of
  // channel tid / 16 + 16 (r % 2), r = 0 .. 2*IN_ROWS - 1: offsets from a per-thread base plus constants.
  const int q = tid % 16, c_t = tid / 16;
  const bool q_ok = q < CPR;
  const int src_t = c_t * H * W + 2 * q;   // relative to row 2 r0 of channel 0 of the image
  const int dst_t = c_t * PS + 2 * q;

  const uint32_t in_s = static_cast<uint32_t>(__cvta_generic_to_shared(in));
  const uint32_t wq_s = static_cast<uint32_t>(__cvta_generic_to_shared(wq)) + (uint32_t)(2 * oh * KB * 32 + lane) * 16;
  const uint32_t b_s = in_s + 4u * (uint32_t)(t * PS + 2 * g + 2 * nq * RS);

  const int bands = N * G::BANDS;
  for (int band = blockIdx.x; band < bands; band += gridDim.x) {
    const int n = band / G::BANDS, r0 = (band % G::BANDS) * G::BR;
    const float* xb = x + ((int64_t)n * C * H + 2 * r0) * W;
    __syncthreads();  // the previous band's reads are done (first band: zeros and weights are in place)
    if (q_ok) {
#pragma unroll
      for (int r = 0; r < PER; ++r) {
        const int row = r / 2, c_off = 16 * (r % 2);
        const bool ok = 2 * r0 + row < H;  // rows past the image: zero-filled (the bottom padding)
        cp_async8(reinterpret_cast<uint32_t*>(in) + dst_t + c_off * PS + row * RS,
                  ok ? xb + src_t + (c_off * H + row) * W : x, ok ? 8 : 0);
      }
    }
    cp_async_commit();
    cp_async_wait<0>();
    if (q_ok) {
#pragma unroll
      for (int r = 0; r < PER; ++r) {  // round this thread's own copies to TF32 in place
        float2* p = reinterpret_cast<float2*>(in + dst_t + 16 * (r % 2) * PS + (r / 2) * RS);
        const float2 v = *p;
        *p = make_float2(__uint_as_float(to_tf32(v.x)), __uint_as_float(to_tf32(v.y)));
      }
    }
    __syncthreads();

    const int ho = r0 + nq;
    if (ho >= HO) continue;
    float acc[2][2][4];  // [n8-block][m16 tile][quad]
#pragma unroll
    for (int wb = 0; wb < 2; ++wb)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int v = 0; v < 4; ++v) acc[wb][m][v] = bz[m][v];
    // One k8-block: the A quads of both m16 tiles, then per n8-block the B pair and two MMAs. Fully unrolled (36
    // steps): every shared-memory offset is an immediate.
    auto step = [&](int kb, bool pair) {
      uint32_t a[2][4];
#pragma unroll
      for (int m = 0; m < 2; ++m) {
        const uint4 q = lds128_addr(wq_s + (uint32_t)((m * KB + kb) * 32 * 16));
        a[m][0] = q.x; a[m][1] = q.y; a[m][2] = q.z; a[m][3] = q.w;
      }
      int c, i, j;
      band_slot(kb, 0, 0, c, i, j);  // lane t's slots are t planes further (b_s)
      const uint32_t kaddr = b_s + 4u * (uint32_t)(c * PS + i * RS + j);
#pragma unroll
      for (int wb = 0; wb < 2; ++wb) {
        uint32_t b[2];
        if (pair) {
          const uint2 v = lds64_addr(kaddr + 64 * wb);
          b[0] = v.x; b[1] = v.y;
        } else {
          b[0] = lds32(kaddr + 64 * wb);
          b[1] = lds32(kaddr + 64 * wb + 16 * PS);
        }
#pragma unroll
        for (int m = 0; m < 2; ++m) mma_tf32(acc[wb][m], a[m], b);
      }
    };
#pragma unroll
    for (int kb = 0; kb < 24; ++kb) step(kb, true);
#pragma unroll
    for (int kb = 24; kb < KB; ++kb) step(kb, false);
    // Epilogue: c0/c1 = (row g, pixels 2t, 2t+1), c2/c3 = row g + 8.
    float* yb = y + ((int64_t)n * O + 2 * oh * 16 + g) * (HO * WO) + ho * WO;
#pragma unroll
    for (int wb = 0; wb < 2; ++wb)
#pragma unroll
      for (int m = 0; m < 2; ++m)
#pragma unroll
        for (int v = 0; v < 4; ++v) {
          const int wo = 8 * wb + 2 * t + (v % 2);
          if (wo < WO) {
            const float z = acc[wb][m][v];
            yb[(m * 16 + 8 * (v / 2)) * (HO * WO) + wo] = SELU ? selu_of_log2(z) : z;
          }
        }
  }
  cp_async_wait<0>();
}


// The row kernel (conv_rows) for an input W wide: 3 -> 32 channels, 3 x 3, stride 1, padding 1 on every side (TF
// same), y 8-byte aligned (pixel-pair stores). The grid is one wave of resident blocks; each warp takes an equal
// share of the batch's output rows.
template <int H, int W, bool STAGED>
struct RowLaunch {
  using G = RowGeom<H, W, STAGED>;
  static constexpr auto kernel = conv_rows<H, W, true, STAGED>;
  static constexpr auto kernel_linear = conv_rows<H, W, false, STAGED>;
  static bool takes(const float* y, const ConvShape& s) {
    return s.C == 3 && s.O == 32 && s.KH == 3 && s.KW == 3 && s.stride == 1 && s.pad_top == 1 && s.pad_left == 1 &&
           s.H == H && s.W == W && s.Ho == H && s.Wo == W && reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
           (int64_t)s.N * H * G::NBW < (int64_t(1) << 31) && smem_fits(kernel, G::SMEM_BYTES) &&
           smem_fits(kernel_linear, G::SMEM_BYTES) && resident_blocks(kernel, G::SMEM_BYTES) > 0;
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    const int64_t blocks = std::min<int64_t>((int64_t)resident_blocks(kernel, G::SMEM_BYTES) * num_sms(),
                                             ((int64_t)s.N * H * G::NBW + 7) / 8);
    const unsigned grid = (unsigned)std::max<int64_t>(blocks, 1);
    if (selu_)
      kernel<<<grid, 256, G::SMEM_BYTES, stream>>>(x, w, bias, y, s.N);
    else
      kernel_linear<<<grid, 256, G::SMEM_BYTES, stream>>>(x, w, bias, y, s.N);
    return cudaGetLastError();
  }
};

// The band kernel (conv_band) for an H x W input: 32 -> 64 channels, 3 x 3, stride 2, no top/left padding and
// an output of ceil(H/2) x ceil(W/2) (TF same), x 8-byte aligned (row-pair copies). Persistent: one wave of
// resident blocks (2 per SM) over the batch's bands.
template <int H, int W>
struct BandLaunch {
  using G = BandGeom<H, W>;
  static constexpr auto kernel = conv_band<H, W, true>;
  static constexpr auto kernel_linear = conv_band<H, W, false>;
  static bool takes(const float* x, const ConvShape& s) {
    return s.C == G::C && s.O == G::O && s.KH == 3 && s.KW == 3 && s.stride == 2 && s.pad_top == 0 &&
           s.pad_left == 0 && s.H == H && s.W == W && s.Ho == G::HO && s.Wo == G::WO &&
           reinterpret_cast<uintptr_t>(x) % 8 == 0 && (int64_t)s.N * G::C * H * W < (int64_t(1) << 31) &&
           smem_fits(kernel, G::SMEM_BYTES) && smem_fits(kernel_linear, G::SMEM_BYTES) &&
           resident_blocks(kernel, G::SMEM_BYTES) > 0;
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    const int64_t blocks = std::min<int64_t>((int64_t)resident_blocks(kernel, G::SMEM_BYTES) * num_sms(),
                                             (int64_t)s.N * G::BANDS);
    const unsigned grid = (unsigned)std::max<int64_t>(blocks, 1);
    if (selu_)
      kernel<<<grid, 256, G::SMEM_BYTES, stream>>>(x, w, bias, y, s.N);
    else
      kernel_linear<<<grid, 256, G::SMEM_BYTES, stream>>>(x, w, bias, y, s.N);
    return cudaGetLastError();
  }
};


}  // namespace
}  // namespace mscred_im2col
