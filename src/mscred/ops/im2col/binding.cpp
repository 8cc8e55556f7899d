// PyTorch glue for im2col.cu: checks the tensors, allocates outputs through PyTorch's caching allocator and
// launches on the current CUDA stream (so that CUDA-graph capture and stream semantics hold). The op registration
// (schema, fake, autograd, CPU path) lives in Python (__init__.py); these two functions are its CUDA kernels.
#include <torch/extension.h>

#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>

#include "im2col.h"

namespace {

using mscred_im2col::ConvShape;
using mscred_im2col::Gemm;

void check_input(const at::Tensor& t, const char* name) {
  TORCH_CHECK(t.is_cuda(), "im2col conv: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.scalar_type() == at::kFloat, "im2col conv: ", name, " must be float32, got ", t.scalar_type());
  TORCH_CHECK(t.is_contiguous(), "im2col conv: ", name, " must be contiguous");
}

void check_launch(cudaError_t err, const char* what) {
  TORCH_CHECK(err == cudaSuccess, "im2col conv: launch of ", what, " failed: ", cudaGetErrorString(err));
}

ConvShape make_shape(const at::Tensor& x, const at::Tensor& w, int64_t stride, int64_t pad_top, int64_t pad_left,
                     int64_t Ho, int64_t Wo) {
  TORCH_CHECK(x.dim() == 4 && w.dim() == 4, "im2col conv: x and weight must be 4-D");
  TORCH_CHECK(x.size(1) == w.size(1), "im2col conv: x has ", x.size(1), " channels, weight expects ", w.size(1));
  TORCH_CHECK(x.size(0) * Ho * Wo < (int64_t)INT32_MAX && x.numel() < (int64_t)INT32_MAX * 8,
              "im2col conv: batch too large for 32-bit pixel indices");
  ConvShape s;
  s.N = (int)x.size(0); s.C = (int)x.size(1); s.H = (int)x.size(2); s.W = (int)x.size(3);
  s.O = (int)w.size(0); s.KH = (int)w.size(2); s.KW = (int)w.size(3);
  s.stride = (int)stride; s.pad_top = (int)pad_top; s.pad_left = (int)pad_left;
  s.Ho = (int)Ho; s.Wo = (int)Wo;
  return s;
}

Gemm gemm_of(int64_t variant) { return variant == 0 ? Gemm::Global : Gemm::Shared; }

// variant: 0 = im2col + global-memory GEMM, 1 = im2col + shared-memory GEMM, 2 = implicit GEMM (TF32),
// 3 = pipelined implicit GEMM (TF32, cp.async). The backward of 1, 2 and 3 uses the shared-memory GEMM.
at::Tensor forward(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& bias, int64_t stride,
                   int64_t pad_top, int64_t pad_left, int64_t Ho, int64_t Wo, bool selu, int64_t variant) {
  check_input(x, "x");
  check_input(w, "weight");
  if (bias) check_input(*bias, "bias");
  const c10::cuda::CUDAGuard guard(x.device());
  const ConvShape s = make_shape(x, w, stride, pad_top, pad_left, Ho, Wo);
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  at::Tensor y = at::empty({s.N, s.O, s.Ho, s.Wo}, x.options());
  if (y.numel() == 0) return y;
  const float* b = bias ? bias->data_ptr<float>() : nullptr;
  if (variant == 2) {
    check_launch(mscred_im2col::implicit_forward(x.data_ptr<float>(), w.data_ptr<float>(), b, y.data_ptr<float>(),
                                                 s, selu, stream), "implicit_forward");
  } else if (variant == 3) {
    check_launch(mscred_im2col::implicit_pipelined_forward(x.data_ptr<float>(), w.data_ptr<float>(), b,
                                                           y.data_ptr<float>(), s, selu, stream),
                 "implicit_pipelined_forward");
  } else {
    at::Tensor col = at::empty({s.K(), s.NP()}, x.options());
    check_launch(mscred_im2col::im2col(x.data_ptr<float>(), col.data_ptr<float>(), s, stream), "im2col");
    check_launch(mscred_im2col::gemm_forward(gemm_of(variant), w.data_ptr<float>(), col.data_ptr<float>(), b,
                                             y.data_ptr<float>(), s, selu, stream), "gemm_forward");
  }
  return y;
}

// Gradients of y = act(conv(x, w) + b) given gy and the saved output y. Returns (gx, gw, gb); an output that is
// not asked for is an empty tensor.
std::vector<at::Tensor> backward(const at::Tensor& gy_in, const at::Tensor& x, const at::Tensor& w,
                                 const at::Tensor& y, int64_t stride, int64_t pad_top, int64_t pad_left, bool selu,
                                 int64_t variant, bool need_x, bool need_w, bool need_b) {
  const at::Tensor gy = gy_in.contiguous();
  check_input(gy, "grad");
  check_input(x, "x");
  check_input(w, "weight");
  check_input(y, "y");
  const c10::cuda::CUDAGuard guard(x.device());
  const ConvShape s = make_shape(x, w, stride, pad_top, pad_left, y.size(2), y.size(3));
  cudaStream_t stream = c10::cuda::getCurrentCUDAStream();
  const Gemm g = gemm_of(variant);

  at::Tensor gz = gy;
  if (selu && gy.numel() > 0) {
    gz = at::empty_like(gy);
    check_launch(mscred_im2col::selu_backward(gy.data_ptr<float>(), y.data_ptr<float>(), gz.data_ptr<float>(),
                                              gy.numel(), stream), "selu_backward");
  }
  at::Tensor gx = need_x ? at::empty_like(x) : at::empty({0}, x.options());
  at::Tensor gw = need_w ? at::zeros_like(w) : at::empty({0}, w.options());
  at::Tensor gb = need_b ? at::zeros({s.O}, w.options()) : at::empty({0}, w.options());
  if (gy.numel() == 0) return {gx, gw, gb};
  if (need_x && x.numel() > 0) {
    at::Tensor gcol = at::empty({s.K(), s.NP()}, x.options());
    check_launch(mscred_im2col::grad_col(g, w.data_ptr<float>(), gz.data_ptr<float>(), gcol.data_ptr<float>(), s,
                                         stream), "grad_col");
    check_launch(mscred_im2col::col2im(gcol.data_ptr<float>(), gx.data_ptr<float>(), s, stream), "col2im");
  }
  if (need_w) {
    at::Tensor col = at::empty({s.K(), s.NP()}, x.options());
    check_launch(mscred_im2col::im2col(x.data_ptr<float>(), col.data_ptr<float>(), s, stream), "im2col");
    check_launch(mscred_im2col::grad_weight(g, gz.data_ptr<float>(), col.data_ptr<float>(), gw.data_ptr<float>(), s,
                                            stream), "grad_weight");
  }
  if (need_b)
    check_launch(mscred_im2col::grad_bias(gz.data_ptr<float>(), gb.data_ptr<float>(), s, stream), "grad_bias");
  return {gx, gw, gb};
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "mscred im2col / GEMM / implicit-GEMM convolution kernels (CUDA)";
  m.def("forward", &forward, "conv + bias (+ SELU) forward");
  m.def("backward", &backward, "conv + bias (+ SELU) backward: (grad_x, grad_weight, grad_bias)");
}
