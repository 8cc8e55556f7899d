// The training ConvLSTM step kernel's interface (conv_cell.cu), shared with the PyTorch glue (binding.cpp).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

// MSCRED_CONV_CELL_PRE_WITH_BIAS 1 has the forward kernel store the gates' pre-activations WITH the bias, rounded
// once (pre = bf16(conv + bias)), and the backward kernels read them as they are: the forward's epilogue loses one
// bf16 round trip a gate pair and the backward's its bias add and rounding (level 1's tile loops 1,640 -> 1,424 and
// 2,770 -> 2,533 instructions, results/conv_cell_ab_sass/), the numerics a rounding closer to float32. 0 (the
// default): pre = bf16(conv) without the bias, z = bf16(pre + bias) as the split path's cuDNN + cell kernels compute
// it. The modules export it (pre_with_bias) so that the Python side's Triton cell backward (the last step, the split
// backward) reads pre the same way. Right on the H200 (tests/test_conv_cell.py whole) but not adopted: level 1's
// five forward steps 146.3 -> 143.2 us, the backward's four 228.8 against 229.8 / 230.0 us
// (results/conv_cell_bwd_steps/), ~3 us a training step. A/B builds: MSCRED_CONV_CELL_FLAGS.
#ifndef MSCRED_CONV_CELL_PRE_WITH_BIAS
#define MSCRED_CONV_CELL_PRE_WITH_BIAS 0
#endif

namespace mscred_conv_cell {

// One step t of a large level's training forward on the concatenated-gates path (ops/triton/convlstm_concat.py):
// the convolution of the zero-bordered [x_t, h_{t-1}] rows with the whole gate weight and the cell update.
// Rows: the step's bordered maps as a (B * Hp * Wp, K0) matrix, K0 = C + Ch channels per row (channels-last), with
// TF "same" padding of a 2 x 2 kernel (Hp = H + 1, Wp = W + 1: the border is the last row and column), so that output
// pixel (b, y, x) is row q = (b * Hp + y) * Wp + x and its taps rows q, q + 1, q + Wp, q + Wp + 1.
struct ConvCellParams {
  const __nv_bfloat16* xh;  // the step's rows (B * Hp * Wp, K0)
  const __nv_bfloat16* w;   // gate weight (4Ch gate columns, 4 K0), k = (ky * 2 + kx) * K0 + ci (channels-last)
  const float* bias;        // (4Ch,), gate blocks i, g, f, o
  const __half* c_prev;     // c_{t-1} (B, H, W, Ch) float16, or null at the first step (h_{-1} = c_{-1} = 0)
  __half* c;                // out: c_t (B, H, W, Ch)
  __nv_bfloat16* pre;       // out: the convolution without the bias (with it: MSCRED_CONV_CELL_PRE_WITH_BIAS),
                            // rounded to bf16 (B, H, W, 4Ch)
  __nv_bfloat16* out;       // out: h_t (B, H, W, Ch) maps, map b at out + b * out_sb
  long long out_sb;
  __nv_bfloat16* hp;        // out: h_t into the next step's rows at channel C (and zeros on their border), or null
  int B, H, W, C;
  float forget_bias;
};

// Shared memory of one block for K0 = c + ch row channels, ch hidden channels and maps W pixels wide.
size_t shared_bytes(int c, int ch, int w);
// Whether this build stores the gates with the bias (MSCRED_CONV_CELL_PRE_WITH_BIAS, as nvcc saw it).
bool pre_with_bias();

// Launches one step on `stream` (persistent blocks, one per SM); cudaErrorInvalidValue for sizes it has no build for
// (C = Ch = 32: level 1 of the default model; C = Ch = 64: level 2).
cudaError_t conv_cell_step(const ConvCellParams& p, int ch, int sms, cudaStream_t stream);

// One step of the backward (conv_cell_bwd.cu), for t = T - 2 .. 0: the transposed convolution of step t + 1's gate
// gradients -- [dx_{t+1}, dh_t] at every row of the bordered index -- and step t's cell backward on the same rows,
// dh_t's recurrent part taken from the accumulators. Level 1's sizes (C = Ch = 32) only.
struct ConvCellBwdParams {
  const __nv_bfloat16* dpre_next;  // step t + 1's gate gradients (B, H, W, 4Ch)
  const __nv_bfloat16* w_t;        // the gate weight transposed: (4 taps, C + Ch, 4Ch), [ky * 2 + kx][ci][gate col]
  const float* bias;               // (4Ch,)
  const __nv_bfloat16* pre;        // step t's convolution without the bias (B, H, W, 4Ch)
  const __half* c_prev;            // c_{t-1} (B, H, W, Ch) float16, or null at step 0
  const __nv_bfloat16* dout;       // dL/dh_t from the level's output: (H, W, Ch) maps, map b at dout + b * dout_sb
  long long dout_sb;
  // The level's temporal attention folded in (attn_g null: dout is read as it is). dL/dh_t of the attention output
  // for t < T - 1 is a_t g + s_t h_{T-1} per image (ops/triton/attention.py), made here as the attention's backward
  // would store it, bf16(a_t g + s_t h_{T-1}), from g (the attention output's gradient: (H, W, Ch) maps at attn_g +
  // b * attn_g_sb), h_{T-1} (at attn_hl + b * attn_hl_sb) and (a_t, s_t) of image b at attn_coef + b * attn_coef_sb
  // (two float32s), instead of read from a dL/dh the attention wrote for every step.
  const __nv_bfloat16* attn_g;
  long long attn_g_sb;
  const __nv_bfloat16* attn_hl;
  long long attn_hl_sb;
  const float* attn_coef;
  long long attn_coef_sb;
  float* dc;                       // in: dc_t from step t + 1; out: dc_{t-1} (B, H, W, Ch) float32
  __nv_bfloat16* dpre;             // out: step t's gate gradients (B, H, W, 4Ch)
  __nv_bfloat16* dx_next;          // out: dx_{t+1} at every row of the bordered index (B, Hp, Wp, C)
  float* dbias;                    // in/out: (4Ch,) float32, step t's gate gradients added
  int B, H, W;
  float forget_bias;
};

size_t shared_bytes_backward(int c, int ch, int w);
// Whether this build reads the gates as stored with the bias (as nvcc saw MSCRED_CONV_CELL_PRE_WITH_BIAS).
bool pre_with_bias_backward();
cudaError_t conv_cell_step_backward(const ConvCellBwdParams& p, int c, int ch, int sms, cudaStream_t stream);

}  // namespace mscred_conv_cell
