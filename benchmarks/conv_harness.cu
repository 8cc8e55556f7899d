// Standalone timing of the implicit-GEMM forward kernels on the four encoder layers, without PyTorch.
//
// Why: the torch extension takes ~1 min to build on the device, and a device call is paid for in minutes. This
// binary is compiled here (nvcc for sm_90a, no GPU needed) and carried, so a device call can time and profile
// (ncu) the kernels at once. bench_conv.py remains the benchmark of record (cuDNN beside ours, through PyTorch).
//
// For each layer (batch N images, n x n inputs, TF "same" padding) and each variant: the output against a direct
// float32 convolution (a naive kernel, one thread per output, exact FMA order does not matter at this tolerance),
// then the median of --iters launches timed by CUDA events with L2 flushed before each (a 256 MiB memset), and
// GB/s (x + w + bias read, y written, once each) and TFLOP/s. One line per row, whitespace-separated.
//
//   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DMSCRED_SM90A -lineinfo -o /tmp/conv_harness \
//     benchmarks/conv_harness.cu
//   /tmp/conv_harness [--iters 30] [--batch 640] [--n 30] [--only conv4] [--variants pipe,rows,Q425_5_3_2]
#include "../src/mscred/ops/im2col/im2col.cu"
#include "conv_variants.cuh"  // measured, not adopted: conv_rows (conv1), conv_band (conv2)

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using namespace mscred_im2col;

#define CHECK(call)                                                                               \
  do {                                                                                            \
    cudaError_t e_ = (call);                                                                      \
    if (e_ != cudaSuccess) {                                                                      \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      std::exit(1);                                                                               \
    }                                                                                             \
  } while (0)

__global__ void direct_conv(const float* x, const float* w, const float* b, float* y, ConvShape s, bool selu_) {
  const int64_t total = (int64_t)s.N * s.O * s.P();
  for (int64_t idx = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; idx < total;
       idx += (int64_t)gridDim.x * blockDim.x) {
    const int wo = idx % s.Wo, ho = (idx / s.Wo) % s.Ho, o = (idx / s.P()) % s.O;
    const int n = idx / ((int64_t)s.P() * s.O);
    float acc = b ? b[o] : 0.f;
    for (int c = 0; c < s.C; ++c)
      for (int i = 0; i < s.KH; ++i)
        for (int j = 0; j < s.KW; ++j) {
          const int h = ho * s.stride - s.pad_top + i, ww = wo * s.stride - s.pad_left + j;
          if (h < 0 || h >= s.H || ww < 0 || ww >= s.W) continue;
          acc = fmaf(x[(((int64_t)n * s.C + c) * s.H + h) * s.W + ww], w[((o * s.C + c) * s.KH + i) * s.KW + j], acc);
        }
    y[idx] = selu_ ? selu(acc) : acc;
  }
}

__global__ void fill_uniform(float* p, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t h = (uint32_t)i * 2654435761u ^ seed;
    h ^= h >> 16; h *= 0x7feb352du; h ^= h >> 15; h *= 0x846ca68bu; h ^= h >> 16;
    p[i] = scale * ((h >> 8) * (1.f / 16777216.f) * 2.f - 1.f);
  }
}

// TF "same": out = ceil(in / stride), total padding max((out-1)*stride + k - in, 0), the smaller half on top/left.
ConvShape same_shape(int N, int C, int n, int O, int k, int stride) {
  const int out = (n + stride - 1) / stride;
  const int pad = std::max((out - 1) * stride + k - n, 0);
  return ConvShape{N, C, n, n, O, k, k, stride, pad / 2, pad / 2, out, out};
}

// L2 flush by reading: every line of a buffer larger than L2 is read (and nothing written back), so the timed
// kernel starts with an L2 full of clean lines. A memset flush leaves it full of dirty lines instead, whose
// write-back the next kernel pays for (up to the L2's 50 MB of extra DRAM writes inside its time).
__global__ void read_flush(const float4* p, int64_t n, float* sink) {
  float acc = 0.f;
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x) {
    const float4 v = p[i];
    acc += v.x + v.y + v.z + v.w;
  }
  if (acc == 1234.5f) *sink = acc;  // never true for the zero buffer; keeps the loads alive
}

using Launcher = cudaError_t (*)(const float*, const float*, const float*, float*, const ConvShape&, bool,
                                 cudaStream_t);

struct Variant { const char* name; Launcher fn; };

// Median milliseconds of `reps` runs of enqueue(r), each between two CUDA events (before(r) enqueued first,
// untimed: e.g. an L2 flush).
template <typename Before, typename Enqueue>
double median_ms(int reps, Before before, Enqueue enqueue) {
  static cudaEvent_t e0 = nullptr, e1 = nullptr;
  if (!e0) {
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
  }
  std::vector<float> t;
  for (int r = 0; r < reps; ++r) {
    before(r);
    CHECK(cudaEventRecord(e0));
    enqueue(r);
    CHECK(cudaEventRecord(e1));
    CHECK(cudaEventSynchronize(e1));
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, e0, e1));
    t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// The halo kernel for conv1-shaped layers (halo.cuh: conv_halo3x3), whatever MSCRED_CONV1_KERNEL says.
cudaError_t halo_row(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                     cudaStream_t stream) {
  cudaError_t err = cudaErrorNotSupported;  // the row is skipped for other shapes
  if (halo_shape(s) && !halo_forward(x, w, b, y, s, selu_, stream, &err)) return cudaErrorInvalidConfiguration;
  return err;
}
// The same with the output rows leaving by bulk copies (TMA_STORE, two output tiles).
cudaError_t halo_tma_row(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                         cudaStream_t stream) {
  cudaError_t err = cudaErrorNotSupported;
  if (halo_shape(s) && !halo_forward(x, w, b, y, s, selu_, stream, &err, true)) return cudaErrorInvalidConfiguration;
  return err;
}

// The halo kernel for conv2-shaped layers (halo_s2.cuh: conv_halo3x3s2), whatever MSCRED_CONV2_KERNEL says;
// PROBE 1-6: its probes without a part (timing only: the output is wrong, "WRONG" in the table; see halo_s2.cuh).
template <int PROBE = 0, bool WGMMA = false>
cudaError_t halo2_row(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                      cudaStream_t stream) {
  cudaError_t err = cudaErrorNotSupported;  // the row is skipped for other shapes
  if (halo2_shape(s) && !halo2_forward<PROBE, WGMMA>(x, w, b, y, s, selu_, stream, &err))
    return cudaErrorInvalidConfiguration;
  return err;
}

// Any tile configuration of the pipelined kernel, launched directly (the product picks one per layer): for sweeps.
template <int WARPS_M, int MT, int NT, int BK, int STAGES, int MIN_BLOCKS, bool PAIR = false, int PROBE = 0>
cudaError_t pipe_cfg(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                     cudaStream_t stream) {
  using PL = PipeLaunch<WARPS_M, MT, NT, BK, STAGES, MIN_BLOCKS, PAIR, PROBE>;
  size_t bytes = 0;
  if (PAIR && !pairable(x, s)) return cudaErrorNotSupported;  // the row is skipped
  if (!PL::prepare(s, &bytes)) return cudaErrorInvalidConfiguration;
  return PL::launch(x, w, b, y, s, selu_, bytes, stream);
}

// A launcher struct's row: its kernel where it takes the layer (PL::takes), skipped elsewhere.
template <typename PL>
cudaError_t launcher_row(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                         cudaStream_t stream) {
  if (!PL::takes(x, w, y, s)) return cudaErrorNotSupported;  // the row is skipped
  return PL::launch(x, w, b, y, s, selu_, stream);
}

// The 2 x 2 patch kernel (conv_patch; conv4's 8 x 8 -> 4 x 4) in any tile configuration.
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS, bool LDSM_A = false, int NWARPS = 8,
          int PROBE = 0>
constexpr Launcher patch_cfg =
    launcher_row<PatchLaunch<WARPS_M, MT, NT, IMGS, STAGES, MIN_BLOCKS, 4, 4, LDSM_A, NWARPS, PROBE>>;

// The padded patch kernel (conv_patch_pad; conv3's 15 x 15 -> 8 x 8) in any tile configuration.
template <int WARPS_M, int MT, int NT, int IMGS, int STAGES, int MIN_BLOCKS>
constexpr Launcher patch_pad_cfg = launcher_row<PatchPadLaunch<WARPS_M, MT, NT, IMGS, STAGES, MIN_BLOCKS, 8, 8>>;

// The wgmma patch kernel (conv_patch_wgmma; needs the harness built for sm_90a with -DMSCRED_SM90A) in any tile
// configuration: WGS warpgroups (4 images each) x BN output channels; and for conv3's 15 x 15 inputs (PatchPadWgmma:
// WGS images x 128 channels).
template <int WGS, int BN, int STAGES, int MIN_BLOCKS>
constexpr Launcher wgmma_cfg = launcher_row<WgmmaPatchLaunch<WGS, BN, STAGES, MIN_BLOCKS>>;
template <int WGS, int STAGES, int MIN_BLOCKS>
constexpr Launcher wgmma_pad_cfg = launcher_row<PatchPadWgmma<WGS, STAGES, MIN_BLOCKS>>;

// The row kernel (conv_rows; conv1's 3 -> 32, 3 x 3 on 30 x 30): stores straight from the accumulators, or STAGED
// through a per-warp shared tile.
template <bool STAGED>
cudaError_t rows_cfg(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                     cudaStream_t stream) {
  if (!RowLaunch<30, 30, STAGED>::takes(y, s)) return cudaErrorNotSupported;  // the row is skipped
  return RowLaunch<30, 30, STAGED>::launch(x, w, b, y, s, selu_, stream);
}

// The band kernel (conv_band; conv2's 32 -> 64, 3 x 3, stride 2 on 30 x 30).
cudaError_t band_cfg(const float* x, const float* w, const float* b, float* y, const ConvShape& s, bool selu_,
                     cudaStream_t stream) {
  if (!BandLaunch<30, 30>::takes(x, s)) return cudaErrorNotSupported;  // the row is skipped
  return BandLaunch<30, 30>::launch(x, w, b, y, s, selu_, stream);
}

int main(int argc, char** argv) {
  int iters = 30, batch = 640, n = 30;
  std::string only, only_variant, flush_mode = "write";
  for (int a = 1; a + 1 < argc; a += 2) {
    if (!std::strcmp(argv[a], "--iters")) iters = std::atoi(argv[a + 1]);
    else if (!std::strcmp(argv[a], "--batch")) batch = std::atoi(argv[a + 1]);
    else if (!std::strcmp(argv[a], "--n")) n = std::atoi(argv[a + 1]);
    else if (!std::strcmp(argv[a], "--only")) only = argv[a + 1];
    else if (!std::strcmp(argv[a], "--variant") || !std::strcmp(argv[a], "--variants")) only_variant = argv[a + 1];
    else if (!std::strcmp(argv[a], "--flush")) flush_mode = argv[a + 1];  // write (memset, default) or read
  }
  cudaDeviceProp prop{};
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("# device %s, %d SMs, batch %d, n %d, iters %d, L2 flush by %s\n", prop.name, prop.multiProcessorCount,
              batch, n, iters, flush_mode.c_str());

  const Variant variants[] = {
      {"implicit", implicit_forward},
      {"pipe", implicit_pipelined_forward},
      // name: p<WARPS_M><MT><NT>_<BK>_<STAGES>_<MIN_BLOCKS> -> BM = WARPS_M*MT*16, BN = (8/WARPS_M)*NT*8
      {"p214_32_2_4", pipe_cfg<2, 1, 4, 32, 2, 4>},   // 32 x 128 (conv1's)
      {"p122_32_2_4", pipe_cfg<1, 2, 2, 32, 2, 4>},   // 32 x 128, warps 1 x 8
      {"p212_32_2_6", pipe_cfg<2, 1, 2, 32, 2, 6>},   // 32 x 64
      {"p218_32_2_2", pipe_cfg<2, 1, 8, 32, 2, 2>},   // 32 x 256
      {"p224_32_3_2", pipe_cfg<2, 2, 4, 32, 3, 2>},   // 64 x 128 (wide)
      {"p222_32_3_3", pipe_cfg<2, 2, 2, 32, 3, 3>},   // 64 x 64 (narrow)
      {"p224_32_4_2", pipe_cfg<2, 2, 4, 32, 4, 2>},   // 64 x 128, 4 stages
      {"p224_16_4_2", pipe_cfg<2, 2, 4, 16, 4, 2>},   // 64 x 128, BK 16
      {"p222_32_2_4", pipe_cfg<2, 2, 2, 32, 2, 4>},   // 64 x 64, 2 stages, 4 blocks
      {"p424_32_3_2", pipe_cfg<4, 2, 4, 32, 3, 2>},   // 128 x 64
      // probes of that tile, conv3's in the product (outputs wrong, timing only): no copies, no MMAs, no epilogue
      {"p424_noload", pipe_cfg<4, 2, 4, 32, 3, 2, false, 1>},
      {"p424_nomma", pipe_cfg<4, 2, 4, 32, 3, 2, false, 2>},
      {"p424_noepi", pipe_cfg<4, 2, 4, 32, 3, 2, false, 3>},
      {"p244_32_3_1", pipe_cfg<2, 4, 4, 32, 3, 1>},   // 128 x 128, warp 64 x 32
      {"p428_32_3_1", pipe_cfg<4, 2, 8, 32, 3, 1>},   // 128 x 128, warp 32 x 64
      // tap pairs (8-byte gathers, pixel-major B; conv4 only)
      {"P424_32_3_2", pipe_cfg<4, 2, 4, 32, 3, 2, true>},   // 128 x 64
      {"P224_32_3_2", pipe_cfg<2, 2, 4, 32, 3, 2, true>},   // 64 x 128
      {"P222_32_3_3", pipe_cfg<2, 2, 2, 32, 3, 3, true>},   // 64 x 64
      {"P424_32_4_2", pipe_cfg<4, 2, 4, 32, 4, 2, true>},   // 128 x 64, 4 stages
      {"P244_32_3_1", pipe_cfg<2, 4, 4, 32, 3, 1, true>},   // 128 x 128
      {"P424_64_2_2", pipe_cfg<4, 2, 4, 64, 2, 2, true>},   // 128 x 64, K-steps of 64
      // 3 blocks per SM: conv4's 320 tiles of 128 x 64 in one wave (396 slots) instead of 1.2 (264)
      {"P424_32_2_3", pipe_cfg<4, 2, 4, 32, 2, 3, true>},
      {"P424_16_4_3", pipe_cfg<4, 2, 4, 16, 4, 3, true>},
      {"P424_16_3_3", pipe_cfg<4, 2, 4, 16, 3, 3, true>},
      {"p424_32_2_3", pipe_cfg<4, 2, 4, 32, 2, 3>},
      {"p224_32_2_3", pipe_cfg<2, 2, 4, 32, 2, 3>},
      {"p224_16_3_3", pipe_cfg<2, 2, 4, 16, 3, 3>},
      // fewer re-reads from L2 (weights once per pixel tile, x once per channel tile) in one wave of 2 blocks/SM
      {"P244_32_3_2", pipe_cfg<2, 4, 4, 32, 3, 2, true>},   // 128 x 128
      {"P428_32_3_2", pipe_cfg<4, 2, 8, 32, 3, 2, true>},   // 128 x 128
      {"P828_32_2_2", pipe_cfg<8, 2, 8, 32, 2, 2, true>},   // 256 x 64
      {"p228_32_2_2", pipe_cfg<2, 2, 8, 32, 2, 2>},         // 64 x 256
      {"p228_32_3_1", pipe_cfg<2, 2, 8, 32, 3, 1>},         // 64 x 256
      // whole-plane 2 x 2 patch kernel (conv4): Q<WARPS_M><MT><NT>_<images per tile>_<STAGES>_<MIN_BLOCKS>
      {"halo_tma", halo_tma_row},  // the same, output rows by TMA bulk copies
      {"halo", halo_row},          // conv1: whole rows per tile, input rows staged in shared memory
      {"rows", rows_cfg<false>},  // conv1: per-warp ranges of output rows, weights in registers
      {"rows_staged", rows_cfg<true>},
      {"band", band_cfg},         // conv2: persistent blocks, weights resident in shared memory
      {"halo2", halo2_row<0>},          // conv2: producer warps stage the input rows, consumer warps compute
      {"halo2_wgmma", halo2_row<0, true>},  // the same with the consumer groups on wgmma (sm_90a)
      {"halo2_noload", halo2_row<1>},   // probes (wrong output, timing only): no loads,
      {"halo2_nomma", halo2_row<2>},    // no MMAs,
      {"halo2_mma_only", halo2_row<3>}, // no loads and no epilogue,
      {"halo2_noepi", halo2_row<4>},    // no epilogue,
      {"halo2_nostore", halo2_row<5>},  // no loads and no output stores,
      {"halo2_noselu", halo2_row<6>},   // no loads and no SELU
      {"Q425_5_3_2", patch_cfg<4, 2, 5, 5, 3, 2>},    // 128 x 80: 256 tiles, one wave of 2 per SM
      {"Q425_5_2_2", patch_cfg<4, 2, 5, 5, 2, 2>},    // the same, 2 stages
      {"Q424_4_3_2", patch_cfg<4, 2, 4, 4, 3, 2>},    // 128 x 64: 320 tiles (the old tile)
      {"Q426_6_3_2", patch_cfg<4, 2, 6, 6, 3, 2>},    // 128 x 96: 214 tiles
      {"Q445_5_3_1", patch_cfg<4, 4, 5, 5, 3, 1>},    // 256 x 80: 128 tiles, x read once
      {"Q445_5_4_1", patch_cfg<4, 4, 5, 5, 4, 1>},
      {"Q245_10_3_1", patch_cfg<2, 4, 5, 10, 3, 1>},  // 128 x 160: 128 tiles
      {"Q245_10_4_1", patch_cfg<2, 4, 5, 10, 4, 1>},
      // R: the same with W's natural k order, A by ldmatrix (no register moves), B by 4-byte loads
      {"R425_5_3_2", patch_cfg<4, 2, 5, 5, 3, 2, true>},
      {"R424_4_3_2", patch_cfg<4, 2, 4, 4, 3, 2, true>},
      {"R445_5_3_1", patch_cfg<4, 4, 5, 5, 3, 1, true>},
      {"R245_10_3_1", patch_cfg<2, 4, 5, 10, 3, 1, true>},
      {"R245_10_4_1", patch_cfg<2, 4, 5, 10, 4, 1, true>},   // the product's tile at batch 640 (PatchBig)
      {"R245_10_5_1", patch_cfg<2, 4, 5, 10, 5, 1, true>},
      // the product's tile's probes (outputs wrong, timing only): no copies, no MMAs, no output stores
      {"R245_noload", patch_cfg<2, 4, 5, 10, 4, 1, true, 8, 1>},
      {"R245_nomma", patch_cfg<2, 4, 5, 10, 4, 1, true, 8, 2>},
      {"R245_nostore", patch_cfg<2, 4, 5, 10, 4, 1, true, 8, 3>},
      // conv3's whole-plane kernel for 15 x 15 inputs, X<WARPS_M><MT><NT>_<IMGS>_<STAGES>_<MIN>
      {"X424_1_3_2", patch_pad_cfg<4, 2, 4, 1, 3, 2>},    // 128 x 64: 640 tiles, 2 blocks per SM (PatchPadSmall)
      {"X244_2_3_1", patch_pad_cfg<2, 4, 4, 2, 3, 1>},    // 128 x 128: 320 tiles
      {"X2410_5_4_1", patch_pad_cfg<2, 4, 10, 5, 4, 1>},  // 128 x 320: 128 tiles, one wave (PatchPadBig)
      {"X248_4_4_1", patch_pad_cfg<2, 4, 8, 4, 4, 1>},    // 128 x 256: 160 tiles
      // conv4 on wgmma with tensor-map copies: T<WGS>_<BN>_<STAGES>_<MIN_BLOCKS> (the sm_90a build only)
      {"T1_128_3_3", wgmma_cfg<1, 128, 3, 3>},  // the product's tile (PatchWgmma): 4 images x 128, 3 blocks per SM
      {"T1_128_4_2", wgmma_cfg<1, 128, 4, 2>},
      {"T2_128_4_1", wgmma_cfg<2, 128, 4, 1>},  // 8 images x 128
      // conv3 (15 x 15 inputs) on wgmma, the input by bulk copies: U<WGS>_<STAGES>_<MIN_BLOCKS>, WGS images x 128
      {"U1_3_3", wgmma_pad_cfg<1, 3, 3>},
      {"U1_4_2", wgmma_pad_cfg<1, 4, 2>},
      {"U2_3_1", wgmma_pad_cfg<2, 3, 1>},
      // 16 warps (512 threads) per block, one block per SM: twice the warps of the 1-block tiles to hide latency
      {"W425_10_4_1", patch_cfg<4, 2, 5, 10, 4, 1, true, 16>},  // 128 x 160, warp 32 x 40
      {"W425_10_3_1", patch_cfg<4, 2, 5, 10, 3, 1, true, 16>},
      {"W825_5_4_1", patch_cfg<8, 2, 5, 5, 4, 1, true, 16>},    // 256 x 80, warp 32 x 40
  };
  struct Layer { const char* name; int C, O, k, stride; };
  const Layer layers[] = {{"conv1", 3, 32, 3, 1}, {"conv2", 32, 64, 3, 2}, {"conv3", 64, 128, 2, 2},
                          {"conv4", 128, 256, 2, 2}};

  void* flush = nullptr;
  const size_t flush_bytes = size_t(256) << 20;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMemset(flush, 0, flush_bytes));
  float* sink = nullptr;
  CHECK(cudaMalloc(&sink, 4));
  auto flush_l2 = [&](int r) {
    if (flush_mode == "read")
      read_flush<<<prop.multiProcessorCount * 8, 256>>>(static_cast<const float4*>(flush), flush_bytes / 16, sink);
    else
      CHECK(cudaMemsetAsync(flush, r & 0xff, flush_bytes));
  };

  // Copy bandwidth (bytes read + written), the yardstick of "half the card's memory bandwidth".
  {
    const size_t bytes = size_t(1) << 30;
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, bytes));
    CHECK(cudaMalloc(&b, bytes));
    const double ms = median_ms(
        10, [](int) {}, [&](int) { CHECK(cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice)); });
    std::printf("copy_GBps %.0f\n", 2.0 * bytes / ms / 1e6);
    CHECK(cudaFree(a));
    CHECK(cudaFree(b));
  }

  int size = n;
  std::printf("%-6s %-10s %9s %8s %8s %10s %s\n", "layer", "variant", "ms", "GB/s", "TFLOP/s", "rel_err", "ok");
  for (const Layer& L : layers) {
    const ConvShape s = same_shape(batch, L.C, size, L.O, L.k, L.stride);
    size = s.Ho;
    if (!only.empty() && only != L.name) continue;
    const int64_t nx = (int64_t)s.N * s.C * s.H * s.W, nw = (int64_t)s.O * s.K(), ny = (int64_t)s.N * s.O * s.P();
    float *x, *w, *b, *y, *yref;
    CHECK(cudaMalloc(&x, nx * 4));
    CHECK(cudaMalloc(&w, nw * 4));
    CHECK(cudaMalloc(&b, s.O * 4));
    CHECK(cudaMalloc(&y, ny * 4));
    CHECK(cudaMalloc(&yref, ny * 4));
    fill_uniform<<<1024, 256>>>(x, nx, 1u, 1.f);
    fill_uniform<<<1024, 256>>>(w, nw, 2u, 1.f / std::sqrt((float)s.K()));
    fill_uniform<<<1024, 256>>>(b, s.O, 3u, 0.1f);
    direct_conv<<<4096, 256>>>(x, w, b, yref, s, true);
    CHECK(cudaDeviceSynchronize());
    std::vector<float> href(ny), hy(ny);
    CHECK(cudaMemcpy(href.data(), yref, ny * 4, cudaMemcpyDeviceToHost));
    const double bytes = 4.0 * (nx + nw + s.O + ny), flops = 2.0 * s.O * (double)s.K() * s.NP();
    for (const Variant& v : variants) {
      if (!only_variant.empty() && ("," + only_variant + ",").find("," + std::string(v.name) + ",") == std::string::npos)
        continue;
      CHECK(cudaMemset(y, 0xff, ny * 4));  // NaN: a missed output shows up as an error
      const cudaError_t launched = v.fn(x, w, b, y, s, true, 0);
      if (launched == cudaErrorNotSupported) continue;
      CHECK(launched);
      CHECK(cudaDeviceSynchronize());
      CHECK(cudaMemcpy(hy.data(), y, ny * 4, cudaMemcpyDeviceToHost));
      double num = 0, den = 0;
      bool finite = true;
      for (int64_t i = 0; i < ny; ++i) {
        const double d = (double)hy[i] - href[i];
        finite = finite && std::isfinite(hy[i]);
        num += d * d;
        den += (double)href[i] * href[i];
      }
      const double rel = finite ? std::sqrt(num / std::max(den, 1e-30)) : INFINITY;
      const double ms = median_ms(
          iters, flush_l2,
          [&](int) { CHECK(v.fn(x, w, b, y, s, true, 0)); });
      // TF32 operands (2^-11 relative rounding) over K terms: a relative RMS error near 1e-3 or below is TF32.
      std::printf("%-6s %-10s %9.4f %8.0f %8.1f %10.2e %s\n", L.name, v.name, ms, bytes / ms / 1e6,
                  flops / ms / 1e9, rel, rel < 2e-3 ? "ok" : "WRONG");
    }
    CHECK(cudaFree(x));
    CHECK(cudaFree(w));
    CHECK(cudaFree(b));
    CHECK(cudaFree(y));
    CHECK(cudaFree(yref));
  }
  return 0;
}
