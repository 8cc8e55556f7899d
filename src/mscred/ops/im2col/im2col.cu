// im2col + GEMM convolution kernels for MSCRED's encoder, forward and backward (see im2col.h for the maths).
//
// One translation unit for all variants: this file holds the host side (tile choice, launchers); the kernels are in
// the headers it includes, one family each: device_math.cuh (SELU), gemm.cuh, im2col_kernels.cuh, implicit.cuh,
// pipelined.cuh, patch.cuh, patch_pad.cuh, halo.cuh, barriers.cuh, wgmma.cuh, halo_s2.cuh, patch_wgmma.cuh. The
// kernels:
//   * im2col_kernel / col2im_kernel      explicit column matrix and its adjoint;
//   * gemm_global<...>                   one thread per output element, operands read straight from global memory
//                                        (the thesis's first GPU version);
//   * gemm_shared<...>                   64x128 tiles staged in shared memory, 4x8 register micro-tile per thread
//                                        (the thesis's optimised version);
//     both are templated on how each operand is laid out (plain strided matrix, or an NCHW tensor seen as a
//     channels x pixels matrix) and on the epilogue (bias + SELU scatter to NCHW, or split-K atomic accumulate),
//     so the same two kernels serve the forward GEMM and both backward GEMMs;
//   * conv_implicit<...>                 implicit GEMM: the im2col tile is gathered from x into shared memory per
//                                        K-step (padding by bounds checks, nothing written to global memory), TF32
//                                        tensor-core mma.sync, bias + SELU fused in the epilogue, NCHW stores staged
//                                        through shared memory so that they are coalesced;
//   * conv_pipelined<...>                the same implicit GEMM with a table-driven gather, a 2-3 stage cp.async
//                                        pipeline, ldmatrix fragment loads and a cheaper epilogue (variant
//                                        "implicit-pipe"); with PAIR, two taps per 8-byte copy into a pixel-major
//                                        B tile; it shares the output staging with conv_implicit;
//   * conv_patch<...>                    "implicit-pipe" for non-overlapping 2x2 patches of 8x8 images (conv4 at
//                                        n = 30): whole images per tile, whole channel planes per 16-byte copy, the
//                                        im2col order made in the fragment loads, bias + SELU from the accumulators.
//   * conv_patch_pad<...>                the same for an input one row and column short of 2 HO x 2 WO (conv3 at
//                                        n = 30: 15 x 15 -> 8 x 8): each image's 8-channel run copied as it is, the
//                                        taps on the missing row and column masked in the fragment loads.
//   * conv_patch_wgmma<...>              the shapes of conv_patch and conv_patch_pad on Hopper's wgmma, fed by
//                                        tensor-map and bulk copies (built for sm_90a only; MSCRED_PATCH_KERNEL=mma
//                                        overrides).
//   * conv_halo3x3<C, SELU, TMA_STORE>   conv1-shaped layers (3 x 3, stride 1, padding 1, 32 filters, 1-3 channels):
//                                        whole output rows per tile, the input rows staged once in shared memory
//                                        (where it pays, halo_pays; MSCRED_CONV1_KERNEL overrides).
//   * conv_halo3x3s2<SELU, .., WGMMA>    conv2-shaped layers (3 x 3, stride 2, 32 -> 64 channels, Wo <= 15): the
//                                        same idea in two 16-channel stages, weights resident, producer warps and
//                                        two groups of consumer warps on alternate tiles, their MMAs wgmma in
//                                        sm_90a builds (halo_s2.cuh; where it pays, halo2_pays;
//                                        MSCRED_CONV2_KERNEL overrides).
// (Other kernels of their own for conv1 and conv2 were measured and not adopted: benchmarks/conv_variants.cuh, a
// direct FP32 conv1 kernel, results/conv1_direct/, and the conv2 kernel's earlier forms, docs/kernel-experiments.md.)
#include "im2col.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "device_math.cuh"
#include "gemm.cuh"
#include "im2col_kernels.cuh"
#include "implicit.cuh"
#include "pipelined.cuh"
#include "patch.cuh"
#include "patch_pad.cuh"
#include "halo.cuh"
#include "halo_s2.cuh"
#include "patch_wgmma.cuh"

namespace mscred_im2col {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// Host-side helpers.
// ---------------------------------------------------------------------------------------------------------------
int num_sms() {
  int dev = 0, sms = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  return sms > 0 ? sms : 1;
}

unsigned grid_1d(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return (unsigned)std::max<int64_t>(1, std::min<int64_t>(blocks, (int64_t)num_sms() * 32));
}

View plain(const float* p, int64_t rs, int64_t cs) { return View{p, rs, cs, 1, 0}; }
// NCHW tensor (N, R, P) as an R x (N*P) matrix.
View image(const float* p, int R, int P) { return View{p, P, 0, P, (int64_t)R * P}; }

template <bool A_IMG, bool B_IMG, bool C_IMG, bool ATOMIC>
cudaError_t launch_gemm(Gemm which, const GemmArgs& args, int splits, cudaStream_t stream) {
  if (which == Gemm::Global) {
    dim3 grid((args.Nd + 31) / 32, (args.M + 7) / 8, splits);
    gemm_global<A_IMG, B_IMG, C_IMG, ATOMIC><<<grid, dim3(32, 8), 0, stream>>>(args);
  } else {
    dim3 grid((args.Nd + SBN - 1) / SBN, (args.M + SBM - 1) / SBM, splits);
    gemm_shared<A_IMG, B_IMG, C_IMG, ATOMIC><<<grid, 256, 0, stream>>>(args);
  }
  return cudaGetLastError();
}

template <int WARPS_M, int MT, int NT, int BK, int MIN_BLOCKS>
cudaError_t launch_implicit_tile(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                                 bool selu_, cudaStream_t stream) {
  constexpr int BM = WARPS_M * MT * 16, BN = (8 / WARPS_M) * NT * 8;
  dim3 grid((s.NP() + BN - 1) / BN, (s.O + BM - 1) / BM);
  if (s.KH == 3 && s.KW == 3)
    conv_implicit<WARPS_M, MT, NT, BK, MIN_BLOCKS, 3, 3><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  else if (s.KH == 2 && s.KW == 2)
    conv_implicit<WARPS_M, MT, NT, BK, MIN_BLOCKS, 2, 2><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  else  // other kernel sizes: runtime index arithmetic needs more registers, so K-steps of 16 keep it spill-free
    conv_implicit<WARPS_M, MT, NT, 16, MIN_BLOCKS, 0, 0><<<grid, 256, 0, stream>>>(x, w, bias, y, s, selu_);
  return cudaGetLastError();
}

// Blocks of `kernel` that fit on one SM of the current device with `bytes` of dynamic shared memory (0 if none).
// Asked once per (kernel, device, bytes) and cached, so that repeated launches (and launches inside CUDA-graph
// capture, after an eager warm-up) make no runtime calls besides the launch. A failed query's error is cleared so
// that the launch check after it does not report it.
template <typename Kernel>
int resident_blocks(Kernel kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::tuple<const void*, int, size_t>, int> cache;
  int dev = 0;
  cudaGetDevice(&dev);
  const auto key = std::make_tuple(reinterpret_cast<const void*>(kernel), dev, bytes);
  std::lock_guard<std::mutex> lock(mu);
  const auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, 256, bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    blocks = 0;
  }
  cache.emplace(key, blocks);
  return blocks;
}

// Dynamic shared memory above 48 KiB must be opted into per kernel and device; false if `bytes` cannot be had.
// The limit is raised once per (kernel, device), to the device's opt-in maximum (so callers with different shapes
// never undo each other); each launch still asks only for what it needs.
template <typename Kernel>
bool smem_fits(Kernel kernel, size_t bytes) {
  static std::mutex mu;
  static std::map<std::pair<const void*, int>, int> optin_of;  // -> opt-in maximum, or -1 if raising it failed
  int dev = 0;
  cudaGetDevice(&dev);
  int optin = 0;
  {
    std::lock_guard<std::mutex> lock(mu);
    const auto key = std::make_pair(reinterpret_cast<const void*>(kernel), dev);
    auto it = optin_of.find(key);
    if (it == optin_of.end()) {
      int max_optin = 0;
      cudaDeviceGetAttribute(&max_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
      // The opt-in maximum covers static and dynamic shared memory together (conv_halo3x3s2's barriers are
      // static): asking for all of it as dynamic fails for a kernel with any.
      cudaFuncAttributes attr{};
      if (cudaFuncGetAttributes(&attr, kernel) == cudaSuccess) max_optin -= (int)attr.sharedSizeBytes;
      if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, max_optin) != cudaSuccess) {
        (void)cudaGetLastError();
        max_optin = -1;
      }
      it = optin_of.emplace(key, max_optin).first;
    }
    optin = it->second;
  }
  return optin >= 0 ? bytes <= (size_t)std::max(optin, 48 * 1024) : bytes <= 48 * 1024;
}

template <int WARPS_M, int MT, int NT, int BK, int STAGES, int MIN_BLOCKS, bool PAIR = false, int PROBE = 0>
struct PipeLaunch {
  using T = PipeTile<WARPS_M, MT, NT, BK, STAGES, PAIR>;
  static constexpr auto kernel = conv_pipelined<WARPS_M, MT, NT, BK, STAGES, MIN_BLOCKS, PAIR, PROBE>;

  static bool prepare(const ConvShape& s, size_t* bytes) {
    *bytes = T::smem_bytes(s.K());
    return smem_fits(kernel, *bytes);
  }
  static int64_t tiles(const ConvShape& s) {
    return (int64_t)((s.NP() + T::BN - 1) / T::BN) * ((s.O + T::BM - 1) / T::BM);
  }
  // Issue cost of the busiest SM, in warp-instructions: waves x resident blocks x per-tile instructions, with
  // kstep_insns the main loop's executed SASS per K-step and ~300 for table, mask and epilogue (sm_90, nvcc 13.0;
  // counted with cuobjdump on the w_vec path). Infinite when the block does not fit.
  static double cost(const ConvShape& s, size_t bytes, double kstep_insns) {
    const int per_sm = resident_blocks(kernel, bytes);
    if (per_sm <= 0) return 1e300;
    const int64_t slots = (int64_t)per_sm * num_sms(), waves = (tiles(s) + slots - 1) / slots;
    const int ksteps = (s.K() + BK - 1) / BK;
    return (double)waves * per_sm * 8.0 * (ksteps * kstep_insns + 300.0);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, size_t bytes, cudaStream_t stream) {
    const bool w_vec = s.K() % 4 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0;
    const bool y_vec = s.P() % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
    dim3 grid((s.NP() + T::BN - 1) / T::BN, (s.O + T::BM - 1) / T::BM);
    kernel<<<grid, 256, bytes, stream>>>(x, w, bias, y, s, selu_, w_vec, y_vec);
    return cudaGetLastError();
  }
};

// Layers with <= 32 filters (conv1: K = 27, one K-step): 32 x 128 tiles, 4 blocks per SM so that one block's
// gather overlaps the others' MMAs and stores. Otherwise 64 x 128 tiles (3 stages, 2 blocks per SM; 290 SASS
// instructions per 32-deep K-step for 32 MMAs) or 64 x 64 (3 stages, 3 blocks per SM; 217 for 16 MMAs), whichever
// costs the busiest SM fewer issue slots (PipeLaunch::cost): the wide tile unless it leaves most SMs idle.
// Layers with >= 128 filters (conv3, conv4): 128 x 64 tiles (3 stages, 2 blocks per SM), 11% faster than 64 x 128
// on conv3 and conv4 on the H200 (benchmarks/conv_harness.cu sweep, results/conv_probe.md); and where the taps
// pair up (pairable below: conv4 at sizes conv_patch does not take), the same tile gathering two taps per 8-byte
// copy into a pixel-major B tile.
using PipeSmallO = PipeLaunch<2, 1, 8, 32, 2, 2>;
using PipeWide = PipeLaunch<2, 2, 4, 32, 3, 2>;
using PipeNarrow = PipeLaunch<2, 2, 2, 32, 3, 3>;
using PipeTall = PipeLaunch<4, 2, 4, 32, 3, 2>;
using PipeTallPair = PipeLaunch<4, 2, 4, 32, 3, 2, true>;

// Taps (j, j+1) of a window can be copied as one 8-byte unit when every pair starts 8-byte aligned: KW even (pairs
// never straddle rows), W even (rows and channels start aligned), stride and left padding even (windows, hence
// pairs, start at even columns), x 8-byte aligned. A pair then never straddles the image's left or right edge
// (it starts at an even column and W is even): both taps are in or both out, 8 bytes copied or zero-filled.
bool pairable(const float* x, const ConvShape& s) {
  return s.KW % 2 == 0 && s.W % 2 == 0 && s.stride % 2 == 0 && s.pad_left % 2 == 0 &&
         reinterpret_cast<uintptr_t>(x) % 8 == 0;
}

// The 2 x 2 patch kernels (conv_patch, conv_patch_pad) for (HO, WO) outputs take kernel 2 x 2, stride 2, no
// top/left padding, C a multiple of 8 (whole K-steps), x and w 16-byte aligned (plane and weight-row copies), y
// 8-byte aligned (pixel-pair stores), and an input of exactly H x W: 2 HO x 2 WO for conv_patch (a bottom/right
// padding row or column would never be read), 2 HO - 1 x 2 WO - 1 for conv_patch_pad (its padding row and column
// are read as zeros).
template <typename T, typename Kernel>
bool patch_takes(Kernel kernel, const float* x, const float* w, const float* y, const ConvShape& s, int HO, int WO,
                 int H, int W, int imgs) {
  return s.KH == 2 && s.KW == 2 && s.stride == 2 && s.pad_top == 0 && s.pad_left == 0 && s.Ho == HO &&
         s.Wo == WO && s.H == H && s.W == W && s.C % T::CK == 0 &&
         reinterpret_cast<uintptr_t>(x) % 16 == 0 && reinterpret_cast<uintptr_t>(w) % 16 == 0 &&
         reinterpret_cast<uintptr_t>(y) % 8 == 0 &&
         (int64_t)(s.N + imgs) * s.C * T::HW < (int64_t(1) << 31) &&  // 32-bit copy offsets, tails included
         (int64_t)(s.O + T::BM) * s.K() < (int64_t(1) << 31) && smem_fits(kernel, T::SMEM_BYTES);
}

// One block per tile of `imgs` images x T::BM output channels.
template <typename T, typename Kernel>
cudaError_t patch_launch(Kernel kernel, int imgs, const float* x, const float* w, const float* bias, float* y,
                         const ConvShape& s, bool selu_, cudaStream_t stream) {
  const dim3 grid((s.N + imgs - 1) / imgs, (s.O + T::BM - 1) / T::BM);
  kernel<<<grid, T::THREADS, T::SMEM_BYTES, stream>>>(x, w, bias, y, s, selu_);
  return cudaGetLastError();
}

template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO, bool LDSM_A,
          int NWARPS = 8, int PROBE = 0>
struct PatchLaunch {
  using T = PatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO, LDSM_A, NWARPS>;
  static constexpr auto kernel = conv_patch<WARPS_M, MT, NT, IMGS, STAGES, MIN_BLOCKS, HO, WO, LDSM_A, NWARPS, PROBE>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return patch_takes<T>(kernel, x, w, y, s, HO, WO, 2 * HO, 2 * WO, IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    return patch_launch<T>(kernel, IMGS, x, w, bias, y, s, selu_, stream);
  }
};

template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, int HO, int WO>
struct PatchPadLaunch {
  using T = PadPatchTile<WARPS_M, MT, NT, IMGS, STAGES, HO, WO>;
  static constexpr auto kernel = conv_patch_pad<WARPS_M, MT, NT, IMGS, STAGES, MIN_BLOCKS, HO, WO>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return patch_takes<T>(kernel, x, w, y, s, HO, WO, 2 * HO - 1, 2 * WO - 1, IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    return patch_launch<T>(kernel, IMGS, x, w, bias, y, s, selu_, stream);
  }
  // Blocks the launch takes (MIN_BLOCKS of them per SM).
  static int64_t blocks(const ConvShape& s) {
    return (int64_t)((s.N + IMGS - 1) / IMGS) * ((s.O + T::BM - 1) / T::BM);
  }
};

// conv_patch_wgmma (patch_wgmma.cuh), launched only by the extension built for sm_90a (MSCRED_SM90A: an H100/H200):
// patch_takes' conditions for HO x WO outputs of 2 HO x 2 WO inputs (PAD: one row and column short; x and w 16-byte
// aligned are also what the tensor maps and bulk copies need), and a driver that encodes tensor maps. One block per
// T::IMGS images x BN output channels.
template <int WGS, int BN, int STAGES, int MIN_BLOCKS, int HO = 4, int WO = 4, bool PAD = false>
struct WgmmaPatchLaunch {
  using T = WgmmaPatchTile<WGS, BN, STAGES, HO, WO, PAD>;
#if defined(MSCRED_SM90A)
  static constexpr auto kernel = conv_patch_wgmma<WGS, BN, STAGES, MIN_BLOCKS, HO, WO, PAD>;
  static bool takes(const float* x, const float* w, const float* y, const ConvShape& s) {
    return tensor_map_encoder() != nullptr && patch_takes<T>(kernel, x, w, y, s, HO, WO, T::H, T::W, T::IMGS);
  }
  static cudaError_t launch(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                            bool selu_, cudaStream_t stream) {
    CUtensorMap map_w{}, map_x{};  // PAD: x comes by bulk copies, map_x unused
    if (!wgmma_patch_maps<T, BN>(x, w, s, &map_w, PAD ? nullptr : &map_x)) return cudaErrorInvalidValue;
    const dim3 grid((s.N + T::IMGS - 1) / T::IMGS, (s.O + BN - 1) / BN);
    kernel<<<grid, T::THREADS, T::SMEM_BYTES, stream>>>(map_w, map_x, x, bias, y, s, selu_);
    return cudaGetLastError();
  }
#else
  static bool takes(const float*, const float*, const float*, const ConvShape&) { return false; }
  static cudaError_t launch(const float*, const float*, const float*, float*, const ConvShape&, bool, cudaStream_t) {
    return cudaErrorNotSupported;
  }
#endif
};

// The product's wgmma tile (harness name T1_128_3_3): 4 images x 128 channels, 3 K-steps in flight, 3 blocks per
// SM (conv4 at batch 640: 320 blocks, one wave).
using PatchWgmma = WgmmaPatchLaunch<1, 128, 3, 3>;
// conv3's on 15 x 15 inputs (harness rows U<WGS>_<STAGES>_<MIN_BLOCKS>), and the product's tile (U1_3_3): 1 image x
// 128 channels, 3 K-steps in flight, 3 blocks per SM.
template <int WGS, int STAGES, int MIN_BLOCKS>
using PatchPadWgmma = WgmmaPatchLaunch<WGS, 128, STAGES, MIN_BLOCKS, 8, 8, true>;
using PatchPadWgmmaTile = PatchPadWgmma<1, 3, 3>;

// The product's two patch tiles (harness names R245_10_4_1 and R425_5_3_2).
using PatchBig = PatchLaunch<2, 4, 5, 10, 4, 1, 4, 4, true>;
using PatchSmall = PatchLaunch<4, 2, 5, 5, 3, 2, 4, 4, true>;
// conv3's at n = 30 (harness names X2410_5_4_1 and X424_1_3_2): 5 images x 128 channels, one block per SM, and
// 1 image x 128 channels, two.
using PatchPadBig = PatchPadLaunch<2, 4, 10, 5, 4, 1, 8, 8>;
using PatchPadSmall = PatchPadLaunch<4, 2, 4, 1, 3, 2, 8, 8>;

// Which conv3 tile (H200, harness, results/conv3_dispatch/probe.txt): the small tile's time grows with the batch
// about linearly (0.0130 ms at 132 images, 0.0289 at 396, 0.0373 at 640, 0.0443 at 792: its blocks are short, so
// its last wave is never far from full), the big tile's steps with its waves of 5-image blocks (0.028-0.032 ms for
// one, 132 to 660 images; 0.052-0.054 for two). The big tile wins within its one wave from 396 images (3 small
// blocks per SM: 0.0283 against 0.0289; 0.0312 against 0.0373 at 640); past it the small one (0.0406 against 0.0524
// at 661), until the big tile's second wave fills (1,056: 0.0543 against 0.0562, within 4%; the small one is kept).
bool patch_pad_big_pays(const ConvShape& s) {
  return PatchPadBig::blocks(s) <= num_sms() && PatchPadSmall::blocks(s) >= 3 * (int64_t)num_sms();
}

// conv_halo3x3 (halo.cuh) takes conv1's shapes: 3 x 3, stride 1, padding 1 on every side (TF "same"), 32 filters,
// 1-3 input channels, rows of at most 256 pixels whose three staged rows per channel fit the staging plan
// (kHaloStage: W <= 111 for 3 channels), and images of fewer than 2^31 elements (the plan's offsets are 32-bit).
bool halo_shape(const ConvShape& s) {
  return s.O == 32 && s.C >= 1 && s.C <= 3 && s.KH == 3 && s.KW == 3 && s.stride == 1 && s.pad_top == 1 &&
         s.pad_left == 1 && s.Ho == s.H && s.Wo == s.W && s.W <= kHaloPixels && HaloGeom::of(s).R >= 1 &&
         (int64_t)s.C * s.H * s.W < (int64_t(1) << 31);
}

// Persistent blocks (as many as fit, at most one per tile), each looping over tiles. false if the block's shared
// memory cannot be had (then the caller takes another kernel).
template <int C, bool TMA>
bool launch_halo(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, bool selu_,
                 cudaStream_t stream, cudaError_t* err) {
  const auto kernel = selu_ ? conv_halo3x3<C, true, TMA> : conv_halo3x3<C, false, TMA>;
  const HaloGeom geo = HaloGeom::of(s, TMA);
  const size_t bytes = (size_t)geo.smem_bytes();
  if (!smem_fits(kernel, bytes)) return false;
  const int64_t tiles = (int64_t)s.N * geo.tiles_per_image;
  const int64_t slots = (int64_t)std::max(1, resident_blocks(kernel, bytes)) * num_sms();
  const bool y_vec = s.P() % 4 == 0 && reinterpret_cast<uintptr_t>(y) % 16 == 0;
  kernel<<<(unsigned)std::min(tiles, slots), kHaloThreads, bytes, stream>>>(x, w, bias, y, s, y_vec);
  *err = cudaGetLastError();
  return true;
}

// tma_store: the output rows by bulk copies (conv_halo3x3's TMA_STORE) instead of 16-byte stores.
template <bool TMA>
bool halo_forward_as(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, bool selu_,
                     cudaStream_t stream, cudaError_t* err) {
  switch (s.C) {
    case 1: return launch_halo<1, TMA>(x, w, bias, y, s, selu_, stream, err);
    case 2: return launch_halo<2, TMA>(x, w, bias, y, s, selu_, stream, err);
    default: return launch_halo<3, TMA>(x, w, bias, y, s, selu_, stream, err);
  }
}

bool halo_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, bool selu_,
                  cudaStream_t stream, cudaError_t* err, bool tma_store = false) {
  return tma_store ? halo_forward_as<true>(x, w, bias, y, s, selu_, stream, err)
                   : halo_forward_as<false>(x, w, bias, y, s, selu_, stream, err);
}

// A kernel choice from the environment: 1 + the index of the variable's value among `names`, 0 (auto) if it is
// unset or none of them.
int kernel_choice(const char* variable, std::initializer_list<const char*> names) {
  const char* value = std::getenv(variable);
  int choice = 1;
  for (const char* name : names) {
    if (value != nullptr && std::string(value) == name) return choice;
    ++choice;
  }
  return 0;
}

// Which kernel takes conv1-shaped layers (halo_shape): MSCRED_CONV1_KERNEL=halo or halo_tma forces conv_halo3x3
// (16-byte or bulk-copy stores; the tests use them to reach every shape), =generic forces the generic pipelined
// kernel, unset (auto) takes conv_halo3x3 where it pays (halo_pays). Read once per process.
enum class Conv1Kernel { kAuto, kGeneric, kHalo, kHaloTma };
Conv1Kernel conv1_kernel_requested() {
  static const auto requested =
      static_cast<Conv1Kernel>(kernel_choice("MSCRED_CONV1_KERNEL", {"generic", "halo", "halo_tma"}));
  return requested;
}
// The store variant auto takes: bulk copies (results/conv1_halo_v4/, graph-timed through PyTorch at batch 640:
// 0.0362 ms against 0.0414 with 16-byte stores and 0.0489 for the generic kernel).
constexpr bool kHaloTmaByDefault = true;

// Where conv_halo3x3 beat the generic kernel on the H200 (results/conv1_halo_v2/): tiles nearly full (R * W >= 192
// of 256 pixels: 240 at n = 30; at n = 55 the staging limit leaves 165 and it lost, 0.0244 against 0.0206 ms at
// batch 64) and at least one tile per SM (batch 7 at n = 30: 28 tiles, 0.0077 against 0.0071 ms).
bool halo_pays(const ConvShape& s) {
  const HaloGeom geo = HaloGeom::of(s);
  return geo.R * s.W >= 192 && (int64_t)s.N * geo.tiles_per_image >= num_sms();
}

// conv_halo3x3s2 (halo_s2.cuh) takes conv2's shapes: 3 x 3, stride 2, 32 -> 64 channels, any padding, output rows
// of at most 15 pixels (a staged row is one lane per column), and inputs of fewer than 2^31 elements per image.
bool halo2_shape(const ConvShape& s) {
  return s.C == kH2C && s.O == kH2O && s.KH == 3 && s.KW == 3 && s.stride == 2 && s.Wo >= 1 && s.Ho >= 1 &&
         2 * s.Wo + 1 <= kH2MaxSW && Halo2Geom::of(s).R >= 1 &&
         (int64_t)kH2C * s.H * s.W < (int64_t(1) << 31);
}

// Persistent blocks, one per SM (75 KB of weights and three 34 KB stage buffers each), at most one per tile. false
// if the block's shared memory cannot be had (then the caller takes another kernel). PROBE: the harness's probes
// (halo_s2.cuh).
// WGMMA: the consumers on wgmma (sm_90a builds only: elsewhere false, and the caller takes another kernel).
template <int PROBE = 0, bool WGMMA = false>
bool halo2_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s, bool selu_,
                   cudaStream_t stream, cudaError_t* err) {
  if constexpr (WGMMA && !kWgmmaBuild) {
    return false;  // (and the kernel is not instantiated)
  } else {
    const auto kernel = selu_ ? conv_halo3x3s2<true, PROBE, WGMMA> : conv_halo3x3s2<false, PROBE, WGMMA>;
    const size_t bytes = WGMMA ? Halo2Geom::smem_bytes_wgmma() : Halo2Geom::smem_bytes();
    if (!smem_fits(kernel, bytes)) return false;
    const int64_t tiles = (int64_t)s.N * Halo2Geom::of(s).tiles_per_image;
    kernel<<<(unsigned)std::min<int64_t>(tiles, num_sms()), kH2Threads, bytes, stream>>>(x, w, bias, y, s);
    *err = cudaGetLastError();
    return true;
  }
}

// Which kernels take 2 x 2 patches of 8 x 8 and 15 x 15 images (conv4 and conv3 at n = 30): MSCRED_PATCH_KERNEL=mma
// forces the mma.sync kernels conv_patch and conv_patch_pad (those other GPUs run; the tests reach them on the H200
// this way), unset (auto) takes conv_patch_wgmma where the extension has it. Read once per process.
enum class PatchKernel { kAuto, kMma };
PatchKernel patch_kernel_requested() {
  static const auto requested = static_cast<PatchKernel>(kernel_choice("MSCRED_PATCH_KERNEL", {"mma"}));
  return requested;
}

// Which kernel takes conv2-shaped layers (halo2_shape): MSCRED_CONV2_KERNEL=halo forces conv_halo3x3s2 (its
// consumers on wgmma where the extension is built for sm_90a), =halo_mma the same with its mma.sync consumers (the
// kernel other GPUs run), =generic the generic pipelined kernel; unset (auto), conv_halo3x3s2 where it pays
// (halo2_pays). Read once per process. The wgmma consumers on the H200 (harness, results/conv2_wgmma/): 0.0503
// against 0.0534 ms at batch 640, 0.0184 against 0.0191 at 132; below one tile per SM (the generic kernel's
// shapes) 3-6% slower, 0.0137 against 0.0133 at batch 1.
enum class Conv2Kernel { kAuto, kGeneric, kHalo, kHaloMma };
Conv2Kernel conv2_kernel_requested() {
  static const auto requested =
      static_cast<Conv2Kernel>(kernel_choice("MSCRED_CONV2_KERNEL", {"generic", "halo", "halo_mma"}));
  return requested;
}
// Where conv_halo3x3s2 beats the generic kernel on the H200 (harness, results/conv2_pingpong/record_async/probe.txt):
// with at least one tile per SM (batch 640 at n = 30: 1,280 tiles, 0.0535 against 0.0835 ms; batch 132: 0.0189
// against 0.0242). With fewer it ties or loses in some runs of the same day (n = 29 at batch 64, 128 tiles: 0.0159
// against 0.0155; batch 7 and n = 16 at batch 64 in others: its per-block weight staging not paid back), so those
// shapes keep the generic kernel.
bool halo2_pays(const ConvShape& s) {
  return (int64_t)s.N * Halo2Geom::of(s).tiles_per_image >= num_sms();
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Launchers (im2col.h).
// ---------------------------------------------------------------------------------------------------------------
cudaError_t im2col(const float* x, float* col, const ConvShape& s, cudaStream_t stream) {
  im2col_kernel<<<grid_1d((int64_t)s.K() * s.NP(), 256), 256, 0, stream>>>(x, col, s);
  return cudaGetLastError();
}

cudaError_t gemm_forward(Gemm which, const float* w, const float* col, const float* bias, float* y,
                         const ConvShape& s, bool selu_, cudaStream_t stream) {
  GemmArgs a{};
  a.a = plain(w, s.K(), 1);           // W (O, K)
  a.b = plain(col, s.NP(), 1);        // col (K, NP)
  a.c = y;
  a.cview = image(y, s.O, s.P());     // Y (O, NP) stored NCHW
  a.bias = bias;
  a.M = s.O; a.Nd = s.NP(); a.Kd = s.K(); a.kchunk = s.K(); a.selu = selu_;
  return launch_gemm<false, false, true, false>(which, a, 1, stream);
}

cudaError_t implicit_forward(const float* x, const float* w, const float* bias, float* y, const ConvShape& s,
                             bool selu_, cudaStream_t stream) {
  // Tile choice. Few output channels and a short K (conv1: 32 channels, K = 27): 32 x 128 tiles with K-steps of
  // 32, so the whole reduction is one gather (one memory latency per tile, not two), 2 blocks per SM — the
  // layer is bound by writing its output. Otherwise 64 x 128 tiles (K-steps of 16, 2 blocks per SM, under 128
  // registers without spills), or 64 x 64 when 64 x 128 tiles would fill the chip less than ~3 times over.
  if (s.O <= 32) return launch_implicit_tile<2, 1, 4, 32, 2>(x, w, bias, y, s, selu_, stream);
  const int64_t tiles = (int64_t)((s.NP() + 127) / 128) * ((s.O + 63) / 64);
  if (tiles < 3 * num_sms()) return launch_implicit_tile<2, 2, 2, 16, 2>(x, w, bias, y, s, selu_, stream);
  return launch_implicit_tile<2, 2, 4, 16, 2>(x, w, bias, y, s, selu_, stream);
}

cudaError_t implicit_pipelined_forward(const float* x, const float* w, const float* bias, float* y,
                                      const ConvShape& s, bool selu_, cudaStream_t stream) {
  cudaError_t err = cudaSuccess;
  const Conv1Kernel conv1 = conv1_kernel_requested();
  if (conv1 != Conv1Kernel::kGeneric && halo_shape(s) && (conv1 != Conv1Kernel::kAuto || halo_pays(s))) {
    const bool tma = conv1 == Conv1Kernel::kHaloTma || (conv1 == Conv1Kernel::kAuto && kHaloTmaByDefault);
    if (halo_forward(x, w, bias, y, s, selu_, stream, &err, tma)) return err;
  }
  const Conv2Kernel conv2 = conv2_kernel_requested();
  if (halo2_shape(s) && (conv2 == Conv2Kernel::kHalo || conv2 == Conv2Kernel::kHaloMma ||
                         (conv2 == Conv2Kernel::kAuto && halo2_pays(s)))) {
    if (conv2 != Conv2Kernel::kHaloMma && halo2_forward<0, true>(x, w, bias, y, s, selu_, stream, &err)) return err;
    if (halo2_forward(x, w, bias, y, s, selu_, stream, &err)) return err;
  }
  // Non-overlapping 2 x 2 patches of 8 x 8 images (conv4 at n = 30, conv3 at n = 16): on sm_90a the wgmma kernel
  // at every batch (harness, results/conv4_wgmma/: 0.0186 against 0.0272 ms at batch 640, 0.0114 against 0.0229
  // at batch 1), unless MSCRED_PATCH_KERNEL=mma; otherwise the whole-plane mma.sync kernel. Its
  // 128 x 160 tile (10 images) when that still gives most SMs a block, else 128 x 80 (5 images, 2 blocks per SM):
  // at batch 7, 0.018 against 0.024 ms (results/conv_probe.md).
  const bool wgmma = patch_kernel_requested() != PatchKernel::kMma;
  if (wgmma && PatchWgmma::takes(x, w, y, s)) return PatchWgmma::launch(x, w, bias, y, s, selu_, stream);
  if (PatchBig::takes(x, w, y, s)) {
    const int64_t big_tiles = (int64_t)((s.N + 9) / 10) * ((s.O + 127) / 128);
    if (4 * big_tiles >= 3 * (int64_t)num_sms()) return PatchBig::launch(x, w, bias, y, s, selu_, stream);
    if (PatchSmall::takes(x, w, y, s)) return PatchSmall::launch(x, w, bias, y, s, selu_, stream);
  }
  // The same for inputs one row and column short (conv3 at n = 30): on sm_90a the wgmma kernel at every batch
  // (harness, results/conv3_wgmma/probe.txt: 0.0254 against 0.0314 ms at batch 640, 0.0092 against 0.0116 at 1),
  // otherwise conv_patch_pad, its big tile where its one wave saves enough.
  if (wgmma && PatchPadWgmmaTile::takes(x, w, y, s))
    return PatchPadWgmmaTile::launch(x, w, bias, y, s, selu_, stream);
  if (PatchPadSmall::takes(x, w, y, s)) {
    if (patch_pad_big_pays(s) && PatchPadBig::takes(x, w, y, s))
      return PatchPadBig::launch(x, w, bias, y, s, selu_, stream);
    return PatchPadSmall::launch(x, w, bias, y, s, selu_, stream);
  }
  // Shapes the table-driven kernel does not take fall back to the register-staged one: more than 32 taps per
  // window (the mask is 32 bits) or an image too large for 32-bit table offsets.
  const bool fits = s.KH * s.KW <= 32 && (int64_t)s.C * s.H * s.W < (int64_t(1) << 30);
  size_t bytes = 0;
  if (fits && s.O <= 32 && PipeSmallO::prepare(s, &bytes))
    return PipeSmallO::launch(x, w, bias, y, s, selu_, bytes, stream);
  if (fits && s.O >= 128) {
    if (pairable(x, s) && PipeTallPair::prepare(s, &bytes))
      return PipeTallPair::launch(x, w, bias, y, s, selu_, bytes, stream);
    if (PipeTall::prepare(s, &bytes)) return PipeTall::launch(x, w, bias, y, s, selu_, bytes, stream);
  }
  size_t wide_bytes = 0, narrow_bytes = 0;
  const bool wide_ok = fits && PipeWide::prepare(s, &wide_bytes);
  const bool narrow_ok = fits && PipeNarrow::prepare(s, &narrow_bytes);
  const double wide_cost = wide_ok ? PipeWide::cost(s, wide_bytes, 290.0) : 1e300;
  const double narrow_cost = narrow_ok ? PipeNarrow::cost(s, narrow_bytes, 217.0) : 1e300;
  if (wide_cost < 1e300 && wide_cost <= narrow_cost)
    return PipeWide::launch(x, w, bias, y, s, selu_, wide_bytes, stream);
  if (narrow_cost < 1e300) return PipeNarrow::launch(x, w, bias, y, s, selu_, narrow_bytes, stream);
  return implicit_forward(x, w, bias, y, s, selu_, stream);
}

cudaError_t selu_backward(const float* gy, const float* y, float* gz, int64_t n, cudaStream_t stream) {
  selu_backward_kernel<<<grid_1d(n, 256), 256, 0, stream>>>(gy, y, gz, n);
  return cudaGetLastError();
}

cudaError_t grad_col(Gemm which, const float* w, const float* gz, float* gcol, const ConvShape& s,
                     cudaStream_t stream) {
  GemmArgs a{};
  a.a = plain(w, 1, s.K());           // W^T (K, O)
  a.b = image(gz, s.O, s.P());        // gz (O, NP) stored NCHW
  a.c = gcol;
  a.cview = plain(gcol, s.NP(), 1);   // gcol (K, NP)
  a.M = s.K(); a.Nd = s.NP(); a.Kd = s.O; a.kchunk = s.O;
  return launch_gemm<false, true, false, false>(which, a, 1, stream);
}

cudaError_t col2im(const float* gcol, float* gx, const ConvShape& s, cudaStream_t stream) {
  col2im_kernel<<<grid_1d((int64_t)s.N * s.C * s.H * s.W, 256), 256, 0, stream>>>(gcol, gx, s);
  return cudaGetLastError();
}

cudaError_t grad_weight(Gemm which, const float* gz, const float* col, float* gw, const ConvShape& s,
                        cudaStream_t stream) {
  GemmArgs a{};
  a.a = image(gz, s.O, s.P());        // gz (O, NP) stored NCHW
  a.b = plain(col, 1, s.NP());        // col^T (NP, K)
  a.c = gw;
  a.cview = plain(gw, s.K(), 1);      // gw (O, K)
  a.M = s.O; a.Nd = s.K(); a.Kd = s.NP();
  // The reduction (all pixels of the batch) is long and the output small: split it so that ~4 blocks per SM run.
  const int tiles = which == Gemm::Global ? ((s.K() + 31) / 32) * ((s.O + 7) / 8)
                                          : ((s.K() + SBN - 1) / SBN) * ((s.O + SBM - 1) / SBM);
  int splits = std::max(1, 4 * num_sms() / tiles);
  splits = std::min(splits, std::max(1, s.NP() / (8 * SBK)));
  a.kchunk = ((s.NP() + splits - 1) / splits + SBK - 1) / SBK * SBK;
  splits = (s.NP() + a.kchunk - 1) / a.kchunk;
  return launch_gemm<true, false, false, true>(which, a, splits, stream);
}

cudaError_t grad_bias(const float* gz, float* gb, const ConvShape& s, cudaStream_t stream) {
  const int chunks = std::max(1, std::min(s.N, 4 * num_sms() / std::max(1, s.O)));
  const int chunk = (s.N + chunks - 1) / chunks;
  grad_bias_kernel<<<dim3(s.O, (s.N + chunk - 1) / chunk), 256, 0, stream>>>(gz, gb, s, chunk);
  return cudaGetLastError();
}

}  // namespace mscred_im2col
