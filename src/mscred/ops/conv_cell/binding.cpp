// PyTorch glue for conv_cell.cu: checks the tensors of one step and launches on the current CUDA stream (so that
// CUDA-graph capture and stream semantics hold). When it runs and the weight's layout live in Python (__init__.py).
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "binding_checks.h"
#include "conv_cell.h"

namespace {

using mscred_conv_cell_binding::aligned;
using mscred_conv_cell_binding::packed_channels_last;
using mscred_conv_cell_binding::sm_count;

// One step: xh_t (B, C + Ch, H + 1, W + 1) bf16, the zero-bordered [x_t, h_{t-1}]; w (4Ch, 4 (C + Ch)) bf16, row n
// the gate weight of column n with k = (ky * 2 + kx) * (C + Ch) + ci; bias (4Ch,) float32; c_prev (None at the
// first step) and c (B, Ch, H, W) float16; pre (B, 4Ch, H, W) bf16; out_t (B, Ch, H, W) bf16 with each map's
// (H, W, Ch) contiguous (a step of the level's (B, T, Ch, H, W) output); hp (None at the last step) the next
// step's xh, whose channels C.. get h_t and zeros on their border. All channels-last, 16-byte aligned.
void step(const at::Tensor& xh, const at::Tensor& w, const at::Tensor& bias, const c10::optional<at::Tensor>& c_prev,
          at::Tensor& c, at::Tensor& pre, at::Tensor& out, const c10::optional<at::Tensor>& hp, int64_t C,
          double forget_bias) {
  TORCH_CHECK(xh.is_cuda(), "conv cell: CUDA tensors only");
  const int64_t B = pre.size(0), G4 = pre.size(1), H = pre.size(2), W = pre.size(3), Ch = G4 / 4, K0 = C + Ch;
  TORCH_CHECK(packed_channels_last(xh) && xh.scalar_type() == at::kBFloat16 && xh.size(0) == B &&
                  xh.size(1) == K0 && xh.size(2) == H + 1 && xh.size(3) == W + 1,
              "conv cell: xh must be a packed channels-last bf16 (B, C + Ch, H + 1, W + 1), got ", xh.sizes());
  TORCH_CHECK(w.scalar_type() == at::kBFloat16 && w.is_contiguous() && aligned(w) && w.dim() == 2 &&
                  w.size(0) == G4 && w.size(1) == 4 * K0,
              "conv cell: w must be a contiguous bf16 (4Ch, 4 (C + Ch)), got ", w.sizes());
  TORCH_CHECK(bias.scalar_type() == at::kFloat && bias.is_contiguous() && bias.numel() == G4,
              "conv cell: bias must be a contiguous float32 (4Ch,)");
  TORCH_CHECK(packed_channels_last(pre) && pre.scalar_type() == at::kBFloat16, "conv cell: pre (B, 4Ch, H, W) bf16");
  auto cell_ok = [&](const at::Tensor& t) {
    return packed_channels_last(t) && t.scalar_type() == at::kHalf && t.size(0) == B && t.size(1) == Ch &&
           t.size(2) == H && t.size(3) == W;
  };
  TORCH_CHECK(cell_ok(c) && (!c_prev || cell_ok(*c_prev)), "conv cell: cells must be packed channels-last float16 "
              "(B, Ch, H, W)");
  TORCH_CHECK(out.dim() == 4 && out.scalar_type() == at::kBFloat16 && out.size(0) == B && out.size(1) == Ch &&
                  out.size(2) == H && out.size(3) == W && out.stride(1) == 1 && out.stride(3) == Ch &&
                  out.stride(2) == W * Ch && (B == 1 || out.stride(0) % 8 == 0) && aligned(out),
              "conv cell: out must be (B, Ch, H, W) bf16 with contiguous (H, W, Ch) maps");
  TORCH_CHECK(!hp || (packed_channels_last(*hp) && hp->sizes() == xh.sizes() && hp->scalar_type() == at::kBFloat16),
              "conv cell: hp must be another step's xh");
  TORCH_CHECK(B * (H + 1) * (W + 1) + 64 + W < (int64_t{1} << 31) / K0, "conv cell: too many rows for 32-bit indices");
  for (const at::Tensor* t : std::initializer_list<const at::Tensor*>{&w, &bias, &c, &pre, &out}) {
    TORCH_CHECK(t->device() == xh.device(), "conv cell: all tensors on one device");
  }
  const c10::cuda::CUDAGuard guard(xh.device());
  mscred_conv_cell::ConvCellParams p{};
  p.xh = reinterpret_cast<const __nv_bfloat16*>(xh.data_ptr());
  p.w = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr());
  p.bias = bias.data_ptr<float>();
  p.c_prev = c_prev ? reinterpret_cast<const __half*>(c_prev->data_ptr()) : nullptr;
  p.c = reinterpret_cast<__half*>(c.data_ptr());
  p.pre = reinterpret_cast<__nv_bfloat16*>(pre.data_ptr());
  p.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  p.out_sb = out.stride(0);
  p.hp = hp ? reinterpret_cast<__nv_bfloat16*>(hp->data_ptr()) : nullptr;
  p.B = static_cast<int>(B); p.H = static_cast<int>(H); p.W = static_cast<int>(W); p.C = static_cast<int>(C);
  p.forget_bias = static_cast<float>(forget_bias);
  const cudaError_t err = mscred_conv_cell::conv_cell_step(p, static_cast<int>(Ch), sm_count(),
                                                           c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "conv cell: launch failed: ", cudaGetErrorString(err));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  // as the .cu was built (MSCRED_CONV_CELL_FLAGS reach nvcc only, not this file's compiler)
  m.attr("pre_with_bias") = mscred_conv_cell::pre_with_bias();
  m.def("step", &step, "one training forward step of a large ConvLSTM level: gate convolution + cell update");
  m.def("shared_bytes", &mscred_conv_cell::shared_bytes, "shared memory of one block (C, Ch, W)");
}
