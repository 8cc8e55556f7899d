// conv_halo3x3s2_pingpong: the next candidate for conv2, NOT YET MEASURED. Written on 2026-11-30 after that session's
// device time ran out; the standalone harness includes this file after im2col.cu (row "halo2pp") so that the next
// session can time it against the product's conv_halo3x3s2 (ops/im2col/halo_s2.cuh) in one call, and adopt it or
// delete it. It is not reachable from the product.
//
// Why: the product's kernel (0.0636 ms graph-timed, 0.41 of the copy bandwidth) is bounded by its consumers' shared-
// memory wavefronts (MMAs alone 0.031 ms: 2 wavefronts per MMA with 32 x 32 warp tiles) and its producers (loads
// and output stores without MMAs 0.045 ms). Consumer warps of 64 x 32 (1.5 wavefronts per MMA) took the MMAs alone
// to 0.022 ms, but with one consumer warp per scheduler nothing overlapped their epilogue and the kernel got slower
// (0.067 ms; results/conv2_halo_v3/consoles.md). Here two groups of four such warps take alternate tiles, as
// CUTLASS's "ping-pong" schedule does: while one group runs its epilogue the other runs its MMAs, so the tensor pipe
// and shared memory see one group's MMAs most of the time. What it costs: 8 x 64-channel warps need 64 accumulators
// each, which at 384 threads (168 registers) leaves 4 producer warps, staging two pair planes each through one
// register set of 68 values (two sets, as the product's producers keep, spilled); the shared memory of eight
// 64-channel output slices does not fit beside three stage buffers and the weights, so each warp's epilogue goes
// out in two halves of 32 channels through a 32-channel slice (210 KB in all, as the product). ptxas reports 12
// bytes of spills: three of the epilogue's per-thread indices, hoisted out of the tile loop by the compiler and
// reloaded once per tile, outside the K loop.
// Expected, if the overlap is good: about the producers' bound, ~0.045-0.05 ms (0.47-0.52 of the copy bandwidth).
// Its buffer hand-over between the producers and two consumer groups was simulated on the CPU (random interleavings,
// 1-11 tiles per block: no deadlock, every stage read from its own buffer): benchmarks/conv2_pingpong_protocol.py.
// Everything else (tiles, pair-plane layout, K order, mbarriers, per-warp runs) is the product kernel's; the
// staging layout is the one tests/test_halo_s2_layout.py replays.
#pragma once

namespace mscred_im2col {
namespace {

constexpr int kPPGroups = 2, kPPGroupWarps = 4;                      // consumer groups x warps (64 ch x 32 px each)
constexpr int kPPConsumers = kPPGroups * kPPGroupWarps * 32, kPPProducers = 128;
constexpr int kPPThreads = kPPConsumers + kPPProducers;
constexpr int kPPSmemWords = kH2Buffers * kH2Buf + kH2O * kH2Ldw + (kPPConsumers / 32) * 32 * kH2Ldo + kH2O;

template <bool SELU>
__global__ void __launch_bounds__(kPPThreads, 1)
    conv_halo3x3s2_pingpong(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                            float* __restrict__ y, ConvShape s) {
  constexpr int MT = 4, NT = 4;
  extern __shared__ __align__(16) uint32_t smem[];
  uint32_t* const stage_buf = smem;
  uint32_t* const ws = smem + kH2Buffers * kH2Buf;
  float* const out_s = reinterpret_cast<float*>(ws + kH2O * kH2Ldw);
  float* const bias_s = out_s + (kPPConsumers / 32) * 32 * kH2Ldo;  // the bias, scaled
  const Halo2Geom geo = Halo2Geom::of(s);
  const int H = s.H, W = s.W, Wo = s.Wo, P = s.Ho * s.Wo, SW = geo.SW;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const float scale = SELU ? kLog2e : 1.f;
  const int tpi = geo.tiles_per_image, ntiles = s.N * tpi;
  if ((int)blockIdx.x >= ntiles) return;
  const int tiles = (ntiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x, stages = 2 * tiles;
  // FULL[b]: the producers' 128 threads arrive; EMPTY[b]: the 128 threads of the group that read the stage arrive.
  __shared__ uint64_t full_bar[kH2Buffers], empty_bar[kH2Buffers];
  if (tid < kH2Buffers) {
    mbar_init(&full_bar[tid], kPPProducers);
    mbar_init(&empty_bar[tid], kPPGroupWarps * 32);
  }
  if (tid < kH2O) bias_s[tid] = bias != nullptr ? scale * __ldg(bias + tid) : 0.f;
  h2_stage_weights<kPPThreads>(ws, w, scale, tid);
  __syncthreads();

  if (warp >= kPPConsumers / 32) {
    // ---- producers: warp pw stages pair planes 2 pw and 2 pw + 1 (each: stage channels c0, c0 + 2).
    const int pw = warp - kPPConsumers / 32;
    const bool lane_in = lane < SW;
    const bool lane_ok = lane_in && (unsigned)(lane - s.pad_left) < (unsigned)W;
    using Stage = float[2][2][kH2MaxNR];  // [pair plane][channel of the pair][staged row]
    auto load = [&](Stage& v, int q) {
#pragma unroll
      for (int pp2 = 0; pp2 < 2; ++pp2) {
        const int pp = 2 * pw + pp2;
        h2_load_pair(v[pp2], h2_stage_source(x, s, geo, q, (pp & 1) + 4 * (pp >> 1), lane, lane_ok), H * W, W);
      }
    };
    auto store = [&](const Stage& v, int q) {
      if (q >= kH2Buffers) mbar_wait(&empty_bar[q % kH2Buffers], (q / kH2Buffers - 1) & 1);
      if (lane_in) {
#pragma unroll
        for (int pp2 = 0; pp2 < 2; ++pp2)
          h2_store_pair(smem_addr(stage_buf + (q % kH2Buffers) * kH2Buf + h2_pair_plane(2 * pw + pp2) + 2 * lane),
                        v[pp2], SW);
      }
      mbar_arrive(&full_bar[q % kH2Buffers]);
    };
    // One register set (two, as the product's producers keep, made the kernel spill at the 168-register cap): a
    // stage's loads are not in flight while the previous one is stored, but the three buffers let the producers
    // run up to two stages ahead of the consumers, and 128 threads x 68 values keep as many bytes in flight per SM
    // as the product's 256 x 34.
    Stage v;
    for (int q = 0; q < stages; ++q) {
      load(v, q);
      store(v, q);
    }
    return;
  }

  // ---- consumers: group warp / 4 takes this block's tiles group, group + 2, ...; warp_n = warp % 4 its 32 pixels,
  // all 64 channels.
  const int g = lane / 4, t = lane % 4, group = warp / kPPGroupWarps, warp_n = warp % kPPGroupWarps;
  const int mat = lane / 8, arow = lane % 8 + (mat & 1) * 8, acol = (mat >> 1) * 4;
  const uint32_t* const a_base = ws + arow * kH2Ldw + acol;
  // B row bases as the product kernel's, kept for tap row 0 only (4 registers, not 12: at 64 accumulators a thread
  // is at the 168-register cap); a tap row further is 2 SW words (row_step bytes).
  int rowbase[NT];
#pragma unroll
  for (int j = 0; j < NT; ++j) {
    const int px = warp_n * 32 + j * 8 + g;
    int row = px / geo.Wp, col = px - row * geo.Wp;
    if (row >= geo.R) row = col = 0;
    rowbase[j] = 4 * (h2_pair_plane(h2_pair(h2_slot_channel(t, 0, 0))) + 2 * (2 * row * SW + 2 * col));
  }
  const int row_step = 8 * SW;
  const int wrow0 = warp_n * 32 / geo.Wp, wp_log2 = geo.Wp == 16 ? 4 : 3;
  float* const wout = out_s + warp * 32 * kH2Ldo;

  float acc[MT][NT][4];
  for (int k = group; k < tiles; k += kPPGroups) {
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
      for (int h = 0; h < 2; ++h) {  // the bias, read per tile from shared memory (kept in registers, ptxas spilled it)
        const float b = bias_s[i * 16 + g + 8 * h];
#pragma unroll
        for (int j = 0; j < NT; ++j) acc[i][j][2 * h] = acc[i][j][2 * h + 1] = b;
      }
    for (int half = 0; half < 2; ++half) {
      const int q = 2 * k + half;
      mbar_wait(&full_bar[q % kH2Buffers], (q / kH2Buffers) & 1);
      const unsigned buf_at = smem_addr(stage_buf + (q % kH2Buffers) * kH2Buf);
      const uint32_t* const a_half = a_base + half * kH2StageC;
      unsigned rbase[NT];
#pragma unroll
      for (int tap = 0; tap < 9; ++tap) {
        const int ti = tap / 3, tj = tap % 3;
        if (tj == 0) {
#pragma unroll
          for (int j = 0; j < NT; ++j) rbase[j] = buf_at + rowbase[j] + ti * row_step;
        }
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) {
          uint32_t bf[NT][2];
#pragma unroll
          for (int j = 0; j < NT; ++j) lds_u32x2(bf[j], rbase[j] + 4 * (2 * ks * kH2CS2 + 2 * tj));
#pragma unroll
          for (int i = 0; i < MT; ++i) {
            uint32_t af[4];
            ldsm_x4(af, a_half + i * 16 * kH2Ldw + tap * 32 + ks * 8);
#pragma unroll
            for (int j = 0; j < NT; ++j) mma_tf32(acc[i][j], af, bf[j]);
          }
        }
      }
      if (q + kH2Buffers < stages) mbar_arrive(&empty_bar[q % kH2Buffers]);
    }

    // Epilogue, in two halves of 32 channels through the warp's 32-channel slice (see the header comment).
    const int tile = blockIdx.x + k * gridDim.x, n = tile / tpi, r0 = (tile - n * tpi) * geo.R;
    const int rows = s.Ho - r0 < geo.R ? s.Ho - r0 : geo.R;
    const int wrows = rows - wrow0 < 32 / geo.Wp ? rows - wrow0 : 32 / geo.Wp;
    const int run = wrows > 0 ? wrows * Wo : 0;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
      h2_write_slice<SELU>(acc, 2 * hh, wout, wrows, wp_log2, geo.Wp, Wo, g, t);
      __syncwarp();
      if (lane < run) {
        float* yp = y + ((int64_t)n * kH2O + hh * 32) * P + (int64_t)(r0 + wrow0) * Wo + lane;
#pragma unroll 8
        for (int c = 0; c < 32; ++c, yp += P) *yp = wout[c * kH2Ldo + lane];
      }
      __syncwarp();  // the slice is read before its next half (or tile) is written
    }
  }
}

// The harness's launcher: persistent blocks, one per SM, at most one per tile; false if the shared memory cannot be
// had.
bool halo2_pingpong_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream, cudaError_t* err) {
  const auto kernel = selu_ ? conv_halo3x3s2_pingpong<true> : conv_halo3x3s2_pingpong<false>;
  const size_t bytes = (size_t)kPPSmemWords * 4;
  if (!smem_fits(kernel, bytes)) return false;
  const int64_t tiles = (int64_t)s.N * Halo2Geom::of(s).tiles_per_image;
  kernel<<<(unsigned)std::min<int64_t>(tiles, num_sms()), kPPThreads, bytes, stream>>>(x, w, bias, y, s);
  *err = cudaGetLastError();
  return true;
}

}  // namespace
}  // namespace mscred_im2col
