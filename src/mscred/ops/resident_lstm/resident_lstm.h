// The window-resident ConvLSTM kernel's interface (resident_lstm.cu), shared with the PyTorch glue (binding.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mscred_resident {

// The largest maps a block holds (pixels H * W): 32 channels (level 1 of the default model, 30 x 30) and 64 (level
// 2, 15 x 15). Shared memory bounds them: weight, bias, two h maps, the cell state and the attention's partial
// scores take 225-226 KB at either bound, of the 227 KB a block may have on the H100/H200; the Python side
// (resident_lstm.fits) checks each shape against the device's limit (163 KB on an A100: smaller maps only) and keeps
// these bounds in MAX_PIXELS.
constexpr int kMaxPixels32 = 1024;
constexpr int kMaxPixels64 = 256;

// The most steps T the fused temporal attention takes: MSCRED's 5 (longer windows keep the two kernels). Its loads of
// the T - 2 scratch maps for two chunks per thread are registers: sized for 8 steps, ptxas spilled in the MMA loop
// at 32 channels (12 warps, 168 registers per thread).
constexpr int kMaxAttentionSteps = 5;
// The most warps a block has (the attention's per-warp score partials take kMaxWarps x kMaxAttentionSteps floats).
constexpr int kMaxWarps = 16;

struct ResidentParams {
  const __nv_bfloat16* gx;  // input-conv gates (B, T, 4Ch, H, W): channel stride 1, the others in elements
  long long gx_sb, gx_st, gx_sy, gx_sx;
  const float* bias;        // (4Ch,)
  const __nv_bfloat16* w;   // recurrent weight as (4Ch gate columns n, 4Ch k), k = (ky * 2 + kx) * Ch + ci
  __nv_bfloat16* out;       // every h_t (B, T, H, W, Ch): each (b, t) map contiguous; unused with `attn`
  long long out_sb, out_st;
  // With `attn` (not null) the level's temporal attention is fused: instead of every h_t, each window's
  //   sum_t softmax_t(<h_t, h_T> / T) h_t        (T <= kMaxAttentionSteps)
  // goes to attn + b * attn_sb + pixel * attn_sp + channel; h_1 .. h_{T-2} pass through the block's slot of
  // `scratch` (grid_of(B, sms) slots of max(T - 2, 0) maps of H * W * Ch, each block reusing its own, so in L2).
  __nv_bfloat16* attn;
  long long attn_sb, attn_sp;
  __nv_bfloat16* scratch;
  int B, T, H, W, pad_t, pad_l;
  float forget_bias;
};

// Shared memory one block of a level of ch channels and hw pixels asks for.
size_t shared_bytes(int ch, int hw);

// The tensor-core instructions of this build's recurrent GEMM: "wgmma" (Hopper builds) or "mma.sync".
const char* mma_kind();

// Blocks a launch over B windows takes on a device of `sms` SMs (one per SM, persistent).
inline int grid_of(int B, int sms) { return B < sms ? B : sms; }

// Launches the kernel on `stream` over min(B, sms) blocks; cudaErrorInvalidValue for a shape it does not take.
cudaError_t window_lstm_resident_forward(const ResidentParams& p, int ch, int sms, cudaStream_t stream);

}  // namespace mscred_resident
