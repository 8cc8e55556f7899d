// The weight gradient of the encoder's conv1 (3 -> CO channels, 3 x 3, stride 1, + bias, SELU) in CUDA C++: see
// small_conv_wgrad.cu for the design, __init__.py for when it runs.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mscred_small_conv {

constexpr int kCI = 3;        // input channels (the signature matrices' scales)
constexpr int kKS = 3;        // kernel side
constexpr int kK = kKS * kKS * kCI;  // 27 patch columns; row kK of the product is the bias (a column of ones)
constexpr int kMaxCO = 32;    // output channels, a multiple of 8 up to 32
constexpr int kThreads = 128;  // one thread a pixel, one tile of 128 pixels a block iteration
constexpr int kBlocksPerSM = 4;

struct WgradParams {
  const __nv_bfloat16* x;   // (N, 3, H, W), any strides
  const __nv_bfloat16* g;   // dout (N, CO, H, W): channels contiguous, other strides multiples of 8, 16-byte aligned
  const __nv_bfloat16* g2;  // a second gradient of the output (same layout rules), or nullptr
  const __nv_bfloat16* o;   // the forward's output (SELU's derivative), or nullptr (no SELU)
  float* dw;                // (27, CO) float32, zeroed by the caller; row (ky * 3 + kx) * 3 + ci
  float* db;                // (CO,) float32, zeroed by the caller
  int64_t x_sb, x_sc, x_sy, x_sx;
  int64_t g_sb, g_sy, g_sx, g2_sb, g2_sy, g2_sx, o_sb, o_sy, o_sx;
  int N, H, W, CO;
};

// Launches on `stream`: dw += patches^T . dz, db += sum of dz, dz = (g + g2) * selu'(o).
// blocks_per_sm: the grid's blocks an SM (0: kBlocksPerSM).
void launch_wgrad(const WgradParams& p, int sm_count, int blocks_per_sm, cudaStream_t stream);

}  // namespace mscred_small_conv
