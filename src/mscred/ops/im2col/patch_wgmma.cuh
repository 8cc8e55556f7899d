// conv_patch_wgmma: the implicit GEMM for non-overlapping 2 x 2 patches of 8 x 8 images (conv4 at n = 30, conv3 at
// n = 16) and of 15 x 15 images whose missing row and column are the TF "same" padding (PAD: conv3 at n = 30) on
// Hopper's warpgroup MMA (wgmma) fed by tensor-map and bulk copies. Built only for sm_90a (the extension is, on an
// H100/H200: MSCRED_SM90A); elsewhere conv_patch (patch.cuh) and conv_patch_pad (patch_pad.cuh) take these shapes.
// Part of the im2col extension: im2col.cu includes it (see the overview there).
//
// Why: conv_patch runs mma.sync at ~100 TFLOP/s on conv4 (0.0272 ms at batch 640 in the harness); its probes put
// the MMAs alone at 0.021 ms and the copies alone at 0.020 (results/conv4_probes/). Here, on the H200 (harness,
// results/conv4_wgmma/): 0.0186 ms; and 0.0114 ms for one image against 0.0229 (a block's chain of K-steps is
// shorter: four wgmmas per K-step, no fragment loads for the weights). conv3 (results/conv3_wgmma/): 0.0254 ms
// against conv_patch_pad's 0.0314.
//
// The roles are swapped against conv_patch: M = output pixels, N = output channels, so that
//   * B (N x K, K-major, read by the tensor core from shared memory) is the weight matrix as it is: K-step ks is the
//     box {32 floats, BN rows} of W seen as [O][K], which the copy lands in the 128-byte swizzle wgmma reads (row o
//     = 128 bytes, its 16-byte chunk c at chunk c ^ (o % 8), 8-row atoms 1024 bytes apart: the descriptor's stride);
//     TF32 wgmma needs K-major B, which the pixels' im2col rows (two taps per input row) could not give;
//   * A (M x K) comes from registers, loaded per thread from the K-step's 8 channel planes of each image (the box
//     {64, 8, IMGS} of x seen as [N][C][HW], landing as dense planes; images past N are zero-filled by the copy)
//     with W's natural k order: slot s of k8-block kb is tap s % 4 of channel 2 kb + s / 4, so a thread's a0..a3
//     (rows g, g+8 at slots t, t+4) are tap t of channels 2kb, 2kb+1 at pixels g and g+8: four 4-byte loads (lanes
//     g: offsets {0,2,4,6,16,18,20,22}, t: {0,1,8,9}; 32 banks, conflict-free). A is rounded to TF32 (cvt.rn); B,
//     read by the tensor core, is truncated to TF32 by it (no instruction of ours sees it): relative RMS error
//     4.3e-4 against float64 at conv4, against conv_patch's 2.8e-4.
// PAD (conv3): a warpgroup's 64 M rows are one image's 8 x 8 outputs, 16 per warp; x comes by one bulk copy per image
// and K-step (a 15 x 15 plane's 60-byte rows are no tensor-map stride) and the taps on the missing row and column are
// zeros chosen in the fragment loads; the relative RMS error is 3.8e-4 there.
// Each warp of a warpgroup is one image (16 pixels: its 16 M rows), a warpgroup 4 images, a block WGS warpgroups x
// BN output channels plus one producer warp, whose first thread issues each K-step's two copies into a STAGES-deep
// ring once the consumers have released the slot. FULL[slot]: the producer's expect_tx arrival plus the copies'
// bytes; EMPTY[slot]: every consumer thread, after a proxy fence (its plane reads were generic-proxy reads of memory
// the next copy writes through the async proxy). A consumer's K-step: wait FULL, 16 plane loads, 4 wgmmas committed
// as one group, wait for them, release.
// Epilogue straight from the accumulators, biases staged in shared memory: thread (g, t) holds pixels g, g+8 of
// channels 8j+2t, 8j+2t+1; a warp's 4-byte store covers 4 channels x 8 consecutive pixels, 32-byte sectors whole.
//
// Measured and not kept (results/conv4_wgmma/, commits fb4be5a and before): the same K-steps with 16-byte cp.async
// from every thread (0.0239 ms; 0.0207 with the biases from shared memory as here) or from producer warps (0.0254;
// 0.0225); tiles of 256 channels (the 168-register cap of 288-thread blocks serialises the 128-accumulator wgmmas:
// 0.0305); a K-step's wgmmas left running under the next K-step's fragment loads (wrong results with 3 blocks per
// SM: the A registers were reused in flight).
#pragma once

#include <cuda.h>          // CUtensorMap (types only: the encoder comes through the runtime, no -lcuda)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include <cstdint>
#include <type_traits>

#include "im2col.h"
#include "halo.cuh"     // lds_u32, fence_proxy_async_shared
#include "barriers.cuh"
#include "wgmma.cuh"

namespace mscred_im2col {
namespace {

#if defined(MSCRED_WGMMA_DEVICE)
__device__ __forceinline__ void tma_load_2d(void* dst, const CUtensorMap* map, int c0, int c1, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
      ::"r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
__device__ __forceinline__ void tma_load_3d(void* dst, const CUtensorMap* map, int c0, int c1, int c2, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(smem_addr(dst)), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
      "r"(smem_addr(bar))
      : "memory");
}
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared memory, completing on `bar`.
__device__ __forceinline__ void bulk_load(void* dst, const float* src, uint32_t bytes, uint64_t* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
                   smem_addr(dst)),
               "l"(src), "r"(bytes), "r"(smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void mbar_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}
#endif  // MSCRED_WGMMA_DEVICE

// The tile: WGS warpgroups x BN output channels, STAGES K-steps of 8 channels in flight, for HO x WO outputs of a
// 2 HO x 2 WO input (PAD false: conv4's 8 x 8) or a 2 HO - 1 x 2 WO - 1 one whose missing row and column are the TF
// "same" padding (PAD true: conv3's 15 x 15). A warpgroup's 64 M rows are 64 / P whole images.
template <int WGS, int BN, int STAGES, int HO = 4, int WO = 4, bool PAD = false>
struct WgmmaPatchTile {
  static constexpr int CONSUMERS = 128 * WGS, THREADS = CONSUMERS + 32;  // + the producer warp
  static constexpr int H = 2 * HO - PAD, W = 2 * WO - PAD, HW = H * W, P = HO * WO, CK = 8;
  static constexpr int IMGS = WGS * 64 / P;                    // images per block
  static constexpr int BM = BN;                                // output channels per block (patch_takes' name)
  static constexpr int B_BYTES = BN * 128;                     // weights: BN rows of 32 floats, 128B-swizzled
  static constexpr int IMG_BYTES = CK * HW * 4;                // an image's K-step: CK dense channel planes
  static constexpr int X_BYTES = IMGS * IMG_BYTES;
  static constexpr int STAGE_BYTES = (B_BYTES + X_BYTES + 1023) / 1024 * 1024;  // every stage's atoms 1024-aligned
  static constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_BYTES + 1024;  // + room to align the base to 1024
  static_assert(BN == 128, "one wgmma of N = 128 per k8-block (64 accumulators per thread)");
  static_assert(P % 16 == 0 && 64 % P == 0, "a warp's 16 rows lie in one image; a warpgroup holds whole images");
  static_assert(!PAD || IMG_BYTES % 16 == 0, "an image's K-step run is one 16-byte-aligned bulk copy");
};

// PAD: each image's K-step run of x (8 x 225 contiguous floats at conv3) comes by one bulk copy, not a tensor-map box
// (a 15 x 15 plane's 60-byte rows are no tensor-map stride), and the taps on the missing row and column are zeros
// chosen in the fragment loads (their addresses clamped onto a word of the same load, as conv_patch_pad's).
template <int WGS, int BN, int STAGES, int MIN_BLOCKS, int HO = 4, int WO = 4, bool PAD = false>
__global__ void __launch_bounds__(128 * WGS + 32, MIN_BLOCKS)
    conv_patch_wgmma(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                     const float* __restrict__ x, const float* __restrict__ bias, float* __restrict__ y, ConvShape s,
                     bool apply_selu) {
#if defined(MSCRED_WGMMA_DEVICE)
  using T = WgmmaPatchTile<WGS, BN, STAGES, HO, WO, PAD>;
  constexpr int IMGS = T::IMGS, CK = T::CK, HW = T::HW, P = T::P, H = T::H, W = T::W;
  extern __shared__ uint8_t smem_raw[];
  uint8_t* smem = reinterpret_cast<uint8_t*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
  __shared__ uint64_t full_bar[STAGES], empty_bar[STAGES];
  // The block's biases (zero past O, or without bias): the epilogue's per-channel __ldg of a first version waited on
  // L2 once per channel pair (35% of the stall samples at batch 640).
  __shared__ float bias_s[BN];

  const int O = s.O, N = s.N, ksteps = s.C / CK;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  const int o0 = blockIdx.y * BN, n0 = blockIdx.x * IMGS;
  for (int i = tid; i < BN; i += T::THREADS) bias_s[i] = bias != nullptr && o0 + i < O ? __ldg(bias + o0 + i) : 0.f;
  if (tid < STAGES) {
    mbar_init(&full_bar[tid], 1);
    mbar_init(&empty_bar[tid], T::CONSUMERS);
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");  // the copies' completions see the init
  __syncthreads();

  if (tid >= T::CONSUMERS) {  // ---- the producer warp's first thread
    if (tid != T::CONSUMERS) return;
    for (int ks = 0; ks < ksteps; ++ks) {
      const int slot = ks % STAGES;
      if (ks >= STAGES) mbar_wait(&empty_bar[slot], (ks / STAGES - 1) & 1);  // K-step ks - STAGES consumed
      uint8_t* stage = smem + slot * T::STAGE_BYTES;
      if constexpr (PAD) {  // images past N: no copy (their rows are never stored)
        const int imgs = N - n0 < IMGS ? N - n0 : IMGS;
        mbar_arrive_expect_tx(&full_bar[slot], T::B_BYTES + imgs * T::IMG_BYTES);
        tma_load_2d(stage, &map_w, ks * 4 * CK, o0, &full_bar[slot]);
        for (int i = 0; i < imgs; ++i)
          bulk_load(stage + T::B_BYTES + i * T::IMG_BYTES, x + ((int64_t)(n0 + i) * s.C + ks * CK) * HW,
                    T::IMG_BYTES, &full_bar[slot]);
      } else {
        mbar_arrive_expect_tx(&full_bar[slot], T::B_BYTES + T::X_BYTES);  // images past N: zero-filled by the copy
        tma_load_2d(stage, &map_w, ks * 4 * CK, o0, &full_bar[slot]);
        tma_load_3d(stage + T::B_BYTES, &map_x, 0, ks * CK, n0, &full_bar[slot]);
      }
    }
    return;
  }

  // ---- consumers: warp `warp` holds M rows 16 (warp % 4) + r of warpgroup warp / 4, i.e. pixels pb + r of block
  // image img; this thread's rows g and g + 8 read tap t (input row 2 ho + t / 2, column 2 wo + t % 2) at these byte
  // offsets in a stage's planes (channel 0), unless the tap is on a missing row or column (PAD: then zero).
  const int g = lane / 4, t = lane % 4;
  const int img = (warp / 4) * (64 / P) + (16 * (warp % 4)) / P, pb = (16 * (warp % 4)) % P;
  unsigned a_off[2];
  bool a_in[2];
#pragma unroll
  for (int v = 0; v < 2; ++v) {
    const int p = pb + g + 8 * v, row = 2 * (p / WO) + t / 2, col = 2 * (p % WO) + t % 2;
    a_in[v] = row < H && col < W;
    a_off[v] = 4 * (img * CK * HW + (row < H ? row : H - 1) * W + (col < W ? col : W - 1));
  }
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;
  for (int ks = 0; ks < ksteps; ++ks) {
    const int slot = ks % STAGES;
    const uint8_t* stage = smem + slot * T::STAGE_BYTES;
    mbar_wait(&full_bar[slot], (ks / STAGES) & 1);
    // ld.shared by address: the stage pointer went through integer arithmetic (the 1024-byte alignment), after
    // which the compiler emitted generic loads for it
    const unsigned xs = smem_addr(stage + T::B_BYTES);
    uint32_t a[CK / 2][4];
#pragma unroll
    for (int kb = 0; kb < CK / 2; ++kb)  // a0, a1: channel 2 kb at rows g, g + 8; a2, a3: channel 2 kb + 1
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const uint32_t u = lds_u32(xs + a_off[r % 2] + 4 * (2 * kb + r / 2) * HW);
        a[kb][r] = !PAD || a_in[r % 2] ? to_tf32(__uint_as_float(u)) : 0u;
      }
    const uint64_t desc = wgmma_desc_sw128(stage);
    wgmma_fence();
#pragma unroll
    for (int kb = 0; kb < CK / 2; ++kb)  // k8-block kb at the staging's offset of its first K-slot (+32 bytes each)
      wgmma_m64n128k8_tf32(acc, a[kb], desc + (sw128_offset<BN>(0, 8 * kb) >> 4));
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_keep(a);
    fence_proxy_async_shared();
    mbar_arrive(&empty_bar[slot]);
  }

  // ---- epilogue: acc[4j + 2v + h] is pixel pb + g + 8v of channel o0 + 8j + 2t + h, image n0 + img
  wgmma_keep(acc);  // read after the last wait
  if (n0 + img >= N) return;
  float* yn = y + ((int64_t)(n0 + img) * O + o0) * P + pb + g;
  auto store = [&](auto full) {  // full: every channel of the tile exists (all of conv4's tiles): no checks
#pragma unroll
    for (int j = 0; j < BN / 8; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int o = 8 * j + 2 * t + h;
        if (!decltype(full)::value && o0 + o >= O) continue;
        const float bv = bias_s[o];
#pragma unroll
        for (int v = 0; v < 2; ++v) {
          float z = acc[4 * j + 2 * v + h] + bv;
          if (apply_selu) z = selu_fast(z);
          yn[o * P + 8 * v] = z;
        }
      }
  };
  if (o0 + BN <= O)
    store(std::true_type{});
  else
    store(std::false_type{});
#endif  // MSCRED_WGMMA_DEVICE
}

#if defined(MSCRED_SM90A)
// cuTensorMapEncodeTiled from the driver, looked up once through the runtime; nullptr if the driver lacks it.
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      p = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

// The kernel's tensor maps: W as [O][K] in boxes of {32, BN} (128-byte swizzle), and unless map_x is null x as
// [N][C][HW] in boxes of {HW, 8, IMGS}. false if the driver cannot encode them.
template <typename T, int BN>
bool wgmma_patch_maps(const float* x, const float* w, const ConvShape& s, CUtensorMap* map_w, CUtensorMap* map_x) {
  const auto encode = tensor_map_encoder();
  const cuuint64_t w_dims[2] = {(cuuint64_t)s.K(), (cuuint64_t)s.O}, w_strides[1] = {(cuuint64_t)s.K() * 4};
  const cuuint32_t w_box[2] = {4 * T::CK, BN}, unit[3] = {1, 1, 1};
  const cuuint64_t x_dims[3] = {T::HW, (cuuint64_t)s.C, (cuuint64_t)s.N};
  const cuuint64_t x_strides[2] = {T::HW * 4, (cuuint64_t)s.C * T::HW * 4};
  const cuuint32_t x_box[3] = {T::HW, T::CK, T::IMGS};
  return encode != nullptr &&
         encode(map_w, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, const_cast<float*>(w), w_dims, w_strides, w_box, unit,
                CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS &&
         (map_x == nullptr ||
          encode(map_x, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 3, const_cast<float*>(x), x_dims, x_strides, x_box, unit,
                 CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                 CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS);
}
#endif  // MSCRED_SM90A

}  // namespace
}  // namespace mscred_im2col
