// PyTorch glue for resident_lstm.cu: checks the tensors and launches on the current CUDA stream (so that CUDA-graph
// capture and stream semantics hold). The decision to run it and the weight packing live in Python (__init__.py).
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "resident_lstm.h"

namespace {

// Every h_t of one ConvLSTM level: out (B, T, Ch, H, W) stored (B, T, H, W, Ch), from the input gates gx (B, T, 4Ch,
// H, W) (any strides with the channels contiguous and even element strides: a crop, or the sliding view of shared
// steps), the float32 bias (4Ch,) and the packed recurrent weight (4Ch, 4Ch).
void forward(const at::Tensor& gx, const at::Tensor& bias, const at::Tensor& w, at::Tensor& out, int64_t pad_t,
             int64_t pad_l, double forget_bias) {
  TORCH_CHECK(gx.is_cuda() && bias.is_cuda() && w.is_cuda() && out.is_cuda(), "resident lstm: CUDA tensors only");
  TORCH_CHECK(gx.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16 &&
                  out.scalar_type() == at::kBFloat16 && bias.scalar_type() == at::kFloat,
              "resident lstm: bf16 gates, weight and output, float32 bias");
  TORCH_CHECK(gx.dim() == 5 && out.dim() == 5, "resident lstm: gx and out must be 5-D");
  const int64_t B = out.size(0), T = out.size(1), Ch = out.size(2), H = out.size(3), W = out.size(4);
  TORCH_CHECK(gx.size(0) == B && gx.size(1) == T && gx.size(2) == 4 * Ch && gx.size(3) == H && gx.size(4) == W,
              "resident lstm: gx shape ", gx.sizes(), " does not match out ", out.sizes());
  TORCH_CHECK(w.is_contiguous() && w.size(0) == 4 * Ch && w.size(1) == 4 * Ch, "resident lstm: weight (4Ch, 4Ch)");
  TORCH_CHECK(bias.is_contiguous() && bias.numel() == 4 * Ch, "resident lstm: bias (4Ch,)");
  TORCH_CHECK(bias.device() == gx.device() && w.device() == gx.device() && out.device() == gx.device(),
              "resident lstm: all tensors on one device");
  // 16-byte loads of 8 gates: the channels contiguous, every other stride (of a dimension longer than 1) a multiple
  // of 8 elements and the data 16-byte aligned; the same for the weight rows and the output maps.
  auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; };
  bool gx_ok = gx.stride(2) == 1 && aligned(gx);
  for (int d : {0, 1, 3, 4}) gx_ok = gx_ok && (gx.size(d) == 1 || gx.stride(d) % 8 == 0);
  TORCH_CHECK(gx_ok, "resident lstm: gx needs contiguous channels, strides in multiples of 8 and 16-byte alignment");
  TORCH_CHECK(aligned(w), "resident lstm: the weight must be 16-byte aligned");
  TORCH_CHECK(out.stride(2) == 1 && out.stride(4) == Ch && out.stride(3) == W * Ch &&
                  (B == 1 || out.stride(0) % 8 == 0) && (T == 1 || out.stride(1) % 8 == 0) && aligned(out),
              "resident lstm: out needs contiguous, 16-byte aligned (H, W, Ch) maps");
  const c10::cuda::CUDAGuard guard(gx.device());
  mscred_resident::ResidentParams p;
  p.gx = reinterpret_cast<const __nv_bfloat16*>(gx.data_ptr());
  p.gx_sb = gx.stride(0); p.gx_st = gx.stride(1); p.gx_sy = gx.stride(3); p.gx_sx = gx.stride(4);
  p.bias = bias.data_ptr<float>();
  p.w = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr());
  p.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  p.out_sb = out.stride(0); p.out_st = out.stride(1);
  p.B = static_cast<int>(B); p.T = static_cast<int>(T); p.H = static_cast<int>(H); p.W = static_cast<int>(W);
  p.pad_t = static_cast<int>(pad_t); p.pad_l = static_cast<int>(pad_l);
  p.forget_bias = static_cast<float>(forget_bias);
  int device = 0, sms = 0;
  TORCH_CHECK(cudaGetDevice(&device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "resident lstm: cannot read the device's SM count");
  const cudaError_t err = mscred_resident::window_lstm_resident_forward(p, static_cast<int>(Ch), sms,
                                                                        c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "resident lstm: launch failed: ", cudaGetErrorString(err));
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "every h_t of a ConvLSTM level, the window's state resident on the SM (bf16 inference)");
  m.def("shared_bytes", &mscred_resident::shared_bytes, "shared memory of one block (channels, pixels)");
}
