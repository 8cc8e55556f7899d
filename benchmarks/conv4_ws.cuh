// conv_patch_ws: the next candidate for conv4, NOT YET MEASURED. Written on 2026-11-30 after that session's device
// time ran out; the standalone harness includes it after im2col.cu (row "WS245_10_4") so that the next session can
// time it against the product's conv_patch (ops/im2col/patch.cuh, row "R245_10_4_1") in one call, and adopt it or
// delete it. It is not reachable from the product.
//
// Why: the product's patch kernel for conv4 (0.0288 ms graph-timed, 2.43x cuDNN + SELU; 3x asks for 0.0233) is
// bound by neither side alone: without copies it takes 0.021 ms, without MMAs 0.020, together 0.027
// (results/conv4_probes/). Its 8 warps issue the cp.async copies of every stage themselves (72 per thread and stage
// with their address arithmetic) and meet at a block barrier every K-step, so that the fastest warps wait for the
// slowest and the tensor pipe drains at each of the 16 barriers. Here, as in conv2's kernel (halo_s2.cuh): a
// ninth warp copies each stage by Hopper's bulk copies (cp.async.bulk, one per weight row of 128 bytes and one per
// input plane of 256 bytes: 208 a stage, issued by 32 lanes, no registers held, no address table), which complete
// on the stage's FULL mbarrier (expect_tx: the bytes of the stage); the 8 MMA warps wait only for FULL, arrive on
// EMPTY when done with a stage, and never meet at a block barrier. Tile, layout (planes PS words apart, weight rows
// LDA apart), fragment loads, MMAs and epilogue are the product's (patch_fragment_offsets, patch_stage_mma,
// patch_epilogue in patch.cuh), so the outputs are the same to the bit.
// Expected, if the barriers and the copy issue are what the MMA side waits on: the MMA side's 0.021 ms a few percent
// lower and better overlapped with the copies' 0.020, i.e. toward the 0.0233 that 3x needs.
// To measure, with conv2's candidate beside it (carry build/conv_harness): bash benchmarks/gpu_candidates.sh.
#pragma once

namespace mscred_im2col {
namespace {

// A bulk copy of `bytes` (a multiple of 16; both addresses 16-byte aligned) from global to shared memory, counted on
// the mbarrier `bar` when it lands (complete_tx). Shared addresses of this CTA are valid in the cluster window (a CTA
// launched without a cluster is a cluster of one).
__device__ __forceinline__ void bulk_copy_g2s(uint32_t* dst, const float* src, unsigned bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}

// Arrive on `bar` and add `bytes` to the transaction count its phase waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
}

constexpr int kWsMmaWarps = 8, kWsThreads = 32 * (kWsMmaWarps + 1);

template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int HO, int WO>
__global__ void __launch_bounds__(kWsThreads, 1)
    conv_patch_ws(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                  float* __restrict__ y, ConvShape s, bool apply_selu) {
  using T = PatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO, true, kWsMmaWarps>;
  constexpr int BM = T::BM, LDA = T::LDA, PS = T::PS, CK = T::CK, HW = T::HW, P = T::P;
  extern __shared__ __align__(16) uint32_t smem[];  // bulk copies need 16-byte alignment
  // FULL[b]: one arrival (the copy warp's lane 0, with the stage's bytes) and the copies' bytes; EMPTY[b]: the 256
  // MMA threads when done reading. K-step ks uses buffer ks % STAGES, the (ks / STAGES)-th phase of both.
  __shared__ uint64_t full_bar[STAGES], empty_bar[STAGES];
  const int C = s.C, K = 4 * C, O = s.O, N = s.N;
  const int ksteps = C / CK;  // host: C % CK == 0
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int o0 = blockIdx.y * BM, n0 = blockIdx.x * IMGS;
  if (tid == 0) {  // one thread initialises them all and fences its inits for the copies (the async proxy)
    for (int b = 0; b < STAGES; ++b) {
      mbar_init(&full_bar[b], 1);
      mbar_init(&empty_bar[b], 32 * kWsMmaWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  }
  __syncthreads();

  if (warp == kWsMmaWarps) {
    // ---- the copy warp: weight rows o0.. (those below O) and input planes of images n0.. (those below N); rows
    // and images past the ends are not copied (their stale words reach only accumulators that are never stored).
    const int rows = O - o0 < BM ? O - o0 : BM, imgs = N - n0 < IMGS ? N - n0 : IMGS;
    const unsigned stage_bytes = (unsigned)(rows * 4 * CK + imgs * CK * HW) * 4;
    for (int ks = 0; ks < ksteps; ++ks) {
      const int slot = ks % STAGES;
      if (ks >= STAGES) mbar_wait(&empty_bar[slot], (ks / STAGES - 1) & 1);  // K-step ks - STAGES read
      uint32_t* const As = smem + slot * T::STAGE_WORDS;
      uint32_t* const Bs = As + T::A_WORDS;
      if (lane == 0) mbar_arrive_expect_tx(&full_bar[slot], stage_bytes);
      __syncwarp();
      for (int r = lane; r < rows; r += 32)
        bulk_copy_g2s(As + r * LDA, w + (int64_t)(o0 + r) * K + ks * 4 * CK, 4 * CK * 4, &full_bar[slot]);
      for (int e = lane; e < imgs * CK; e += 32) {  // plane e: image e / CK, channel ks * CK + e % CK
        const int img = e / CK, c = ks * CK + e % CK;
        bulk_copy_g2s(Bs + e * PS, x + ((int64_t)(n0 + img) * C + c) * HW, HW * 4, &full_bar[slot]);
      }
    }
    return;
  }

  // ---- the MMA warps: the product's fragments, MMAs and epilogue, stage by stage as the copies land.
  const int warp_m = warp % WARPS_M, warp_n = warp / WARPS_M;
  int a_off, b_off[NT];
  patch_fragment_offsets<T, MT, NT, WO, true>(lane, warp_m, warp_n, a_off, b_off);
  float acc[MT][NT][4];
  zero_accumulators(acc);
  for (int ks = 0; ks < ksteps; ++ks) {
    const int slot = ks % STAGES;
    mbar_wait(&full_bar[slot], (ks / STAGES) & 1);
    const uint32_t* const As = smem + slot * T::STAGE_WORDS;
    patch_stage_mma<T, MT, NT, true>(acc, As, As + T::A_WORDS, a_off, b_off);
    if (ks + STAGES < ksteps) mbar_arrive(&empty_bar[slot]);  // buffer free for K-step ks + STAGES
  }
  patch_epilogue<MT, NT, P>(acc, y, bias, O, N, o0 + warp_m * MT * 16, n0, warp_n * NT, lane, apply_selu);
}

// The harness's launcher: the product's tile and shape conditions (PatchLaunch::takes), one block of 9 warps per
// tile; cudaErrorNotSupported where it does not apply (the row is skipped).
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES>
cudaError_t patch_ws_cfg(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                         cudaStream_t stream) {
  using PL = PatchLaunch<WARPS_M, MT, NT, IMGS, STAGES, 1, 4, 4, true>;
  using T = typename PL::T;
  const auto kernel = conv_patch_ws<WARPS_M, MT, NT, IMGS, STAGES, 4, 4>;
  if (!PL::takes(x, w, y, s) || !smem_fits(kernel, T::SMEM_BYTES)) return cudaErrorNotSupported;
  const dim3 grid((s.N + IMGS - 1) / IMGS, (s.O + T::BM - 1) / T::BM);
  kernel<<<grid, kWsThreads, T::SMEM_BYTES, stream>>>(x, w, b, y, s, selu_);
  return cudaGetLastError();
}

}  // namespace
}  // namespace mscred_im2col
