// PyTorch glue for conv_cell_bwd.cu (an extension of its own: its build cannot take the forward kernel's down):
// checks the tensors of one backward step and launches on the current CUDA stream. When it runs lives in Python.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "binding_checks.h"
#include "conv_cell.h"

namespace {

using mscred_conv_cell_binding::aligned;
using mscred_conv_cell_binding::packed_channels_last;
using mscred_conv_cell_binding::sm_count;

// One backward step t (T - 2 .. 0) of level 1: dpre_next (step t + 1's gate gradients) and pre, dpre (B, 4Ch, H, W)
// bf16; w_t (4, C + Ch, 4Ch) bf16 the transposed gate weight; bias (4Ch,) float32; c_prev (None at step 0) (B, Ch,
// H, W) float16; dout (B, Ch, H, W) bf16 with contiguous (H, W, Ch) maps; dc (B, Ch, H, W) float32, in place;
// dx_next (B, C, H + 1, W + 1) bf16, step t + 1's input gradient; dbias (4Ch,) float32, added to; attn_g, attn_hl
// (as dout) and attn_coef (B, 2) float32, all or none: dout_t made from the level's attention instead of read
// (conv_cell.h; dout is then not read).
void step_backward(const at::Tensor& dpre_next, const at::Tensor& w_t, const at::Tensor& bias, const at::Tensor& pre,
                   const c10::optional<at::Tensor>& c_prev, const at::Tensor& dout, at::Tensor& dc, at::Tensor& dpre,
                   at::Tensor& dx_next, at::Tensor& dbias, double forget_bias,
                   const c10::optional<at::Tensor>& attn_g, const c10::optional<at::Tensor>& attn_hl,
                   const c10::optional<at::Tensor>& attn_coef) {
  TORCH_CHECK(pre.is_cuda(), "conv cell backward: CUDA tensors only");
  const int64_t B = pre.size(0), G4 = pre.size(1), H = pre.size(2), W = pre.size(3), Ch = G4 / 4;
  const int64_t C = dx_next.size(1), K0 = C + Ch;
  auto gates_ok = [&](const at::Tensor& t) {
    return packed_channels_last(t) && t.scalar_type() == at::kBFloat16 && t.sizes() == pre.sizes();
  };
  TORCH_CHECK(gates_ok(pre) && gates_ok(dpre_next) && gates_ok(dpre),
              "conv cell backward: pre, dpre_next and dpre must be packed channels-last bf16 (B, 4Ch, H, W)");
  TORCH_CHECK(w_t.scalar_type() == at::kBFloat16 && w_t.is_contiguous() && aligned(w_t) && w_t.dim() == 3 &&
                  w_t.size(0) == 4 && w_t.size(1) == K0 && w_t.size(2) == G4,
              "conv cell backward: w_t must be a contiguous bf16 (4, C + Ch, 4Ch), got ", w_t.sizes());
  TORCH_CHECK(bias.scalar_type() == at::kFloat && bias.is_contiguous() && bias.numel() == G4 &&
                  dbias.scalar_type() == at::kFloat && dbias.is_contiguous() && dbias.numel() == G4,
              "conv cell backward: bias and dbias must be contiguous float32 (4Ch,)");
  TORCH_CHECK(!c_prev || (packed_channels_last(*c_prev) && c_prev->scalar_type() == at::kHalf &&
                          c_prev->size(0) == B && c_prev->size(1) == Ch && c_prev->size(2) == H && c_prev->size(3) == W),
              "conv cell backward: c_prev must be a packed channels-last float16 (B, Ch, H, W)");
  TORCH_CHECK(packed_channels_last(dc) && dc.scalar_type() == at::kFloat && dc.size(0) == B && dc.size(1) == Ch &&
                  dc.size(2) == H && dc.size(3) == W,
              "conv cell backward: dc must be a packed channels-last float32 (B, Ch, H, W)");
  TORCH_CHECK(dout.dim() == 4 && dout.scalar_type() == at::kBFloat16 && dout.size(0) == B && dout.size(1) == Ch &&
                  dout.size(2) == H && dout.size(3) == W && dout.stride(1) == 1 && dout.stride(3) == Ch &&
                  dout.stride(2) == W * Ch && (B == 1 || dout.stride(0) % 8 == 0) && aligned(dout),
              "conv cell backward: dout must be (B, Ch, H, W) bf16 with contiguous (H, W, Ch) maps");
  // The attention folded in (conv_cell.h): g and h_{T-1} as dout's maps, (a_t, s_t) two float32s per image.
  auto maps_ok = [&](const at::Tensor& t) {
    return t.dim() == 4 && t.scalar_type() == at::kBFloat16 && t.size(0) == B && t.size(1) == Ch && t.size(2) == H &&
           t.size(3) == W && t.stride(1) == 1 && t.stride(3) == Ch && t.stride(2) == W * Ch &&
           (B == 1 || t.stride(0) % 8 == 0) && aligned(t);
  };
  TORCH_CHECK(attn_g.has_value() == attn_hl.has_value() && attn_g.has_value() == attn_coef.has_value(),
              "conv cell backward: attn_g, attn_hl and attn_coef go together");
  TORCH_CHECK(!attn_g || (maps_ok(*attn_g) && maps_ok(*attn_hl)),
              "conv cell backward: attn_g and attn_hl must be (B, Ch, H, W) bf16 with contiguous (H, W, Ch) maps");
  TORCH_CHECK(!attn_coef || (attn_coef->scalar_type() == at::kFloat && attn_coef->dim() == 2 &&
                             attn_coef->size(0) == B && attn_coef->size(1) == 2 && attn_coef->stride(1) == 1 &&
                             (B == 1 || attn_coef->stride(0) % 2 == 0) &&
                             reinterpret_cast<uintptr_t>(attn_coef->data_ptr()) % 8 == 0),
              "conv cell backward: attn_coef must be a float32 (B, 2) of 8-byte aligned rows");
  TORCH_CHECK(packed_channels_last(dx_next) && dx_next.scalar_type() == at::kBFloat16 && dx_next.size(0) == B &&
                  dx_next.size(2) == H + 1 && dx_next.size(3) == W + 1,
              "conv cell backward: dx_next must be a packed channels-last bf16 (B, C, H + 1, W + 1)");
  TORCH_CHECK(B * (H + 1) * (W + 1) < (int64_t{1} << 31) / G4, "conv cell backward: too many rows for 32-bit indices");
  const c10::cuda::CUDAGuard guard(pre.device());
  mscred_conv_cell::ConvCellBwdParams p{};
  p.dpre_next = reinterpret_cast<const __nv_bfloat16*>(dpre_next.data_ptr());
  p.w_t = reinterpret_cast<const __nv_bfloat16*>(w_t.data_ptr());
  p.bias = bias.data_ptr<float>();
  p.pre = reinterpret_cast<const __nv_bfloat16*>(pre.data_ptr());
  p.c_prev = c_prev ? reinterpret_cast<const __half*>(c_prev->data_ptr()) : nullptr;
  p.dout = reinterpret_cast<const __nv_bfloat16*>(dout.data_ptr());
  p.dout_sb = dout.stride(0);
  if (attn_g) {
    p.attn_g = reinterpret_cast<const __nv_bfloat16*>(attn_g->data_ptr());
    p.attn_g_sb = attn_g->stride(0);
    p.attn_hl = reinterpret_cast<const __nv_bfloat16*>(attn_hl->data_ptr());
    p.attn_hl_sb = attn_hl->stride(0);
    p.attn_coef = attn_coef->data_ptr<float>();
    p.attn_coef_sb = attn_coef->stride(0);
  }
  p.dc = dc.data_ptr<float>();
  p.dpre = reinterpret_cast<__nv_bfloat16*>(dpre.data_ptr());
  p.dx_next = reinterpret_cast<__nv_bfloat16*>(dx_next.data_ptr());
  p.dbias = dbias.data_ptr<float>();
  p.B = static_cast<int>(B); p.H = static_cast<int>(H); p.W = static_cast<int>(W);
  p.forget_bias = static_cast<float>(forget_bias);
  const cudaError_t err = mscred_conv_cell::conv_cell_step_backward(p, static_cast<int>(C), static_cast<int>(Ch),
                                                                    sm_count(), c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "conv cell backward: launch failed: ", cudaGetErrorString(err));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // as the .cu was built (MSCRED_CONV_CELL_FLAGS reach nvcc only, not this file's compiler)
  m.attr("pre_with_bias") = mscred_conv_cell::pre_with_bias_backward();
  m.def("step_backward", &step_backward,
        "one training backward step of level 1: step t + 1's transposed convolution and step t's cell backward");
  m.def("shared_bytes_backward", &mscred_conv_cell::shared_bytes_backward,
        "shared memory of one block of the backward (C, Ch, W)");
}
