// PyTorch glue for small_conv_wgrad.cu: checks the tensors and launches on the current CUDA stream (so that CUDA-graph
// capture and stream semantics hold). When to run it lives in Python (__init__.py).
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "small_conv_wgrad.h"

namespace {

// 16-byte loads of 8 channels: bf16, the channels contiguous, every other stride a multiple of 8 elements, aligned.
bool vector_rows(const at::Tensor& t) {
  if (t.scalar_type() != at::kBFloat16 || t.dim() != 4 || t.stride(1) != 1) return false;
  if (reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 != 0) return false;
  for (int d : {0, 2, 3}) {
    if (t.size(d) != 1 && t.stride(d) % 8 != 0) return false;
  }
  return true;
}

// dw (27, CO) and db (CO,) float32, zeroed here and summed into by the kernel, for conv1 x (N, 3, H, W) bf16 (any
// strides), dout / dout2 / out (N, CO, H, W) bf16 with vector rows (dout2 and out may be empty: none, no SELU);
// at most blocks_per_sm blocks an SM (0: kBlocksPerSM, the most that are resident at once).
void wgrad(const at::Tensor& x, const at::Tensor& dout, const at::Tensor& dout2, const at::Tensor& out,
           at::Tensor& dw, at::Tensor& db, int64_t blocks_per_sm) {
  const int64_t N = x.size(0), H = x.size(2), W = x.size(3), CO = dout.size(1);
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == at::kBFloat16 && x.dim() == 4 &&
                  x.size(1) == mscred_small_conv::kCI, "small conv wgrad: x must be CUDA bf16 (N, 3, H, W)");
  TORCH_CHECK(CO % 8 == 0 && CO <= mscred_small_conv::kMaxCO, "small conv wgrad: output channels a multiple of 8 "
              "up to 32, got ", CO);
  const bool has_g2 = dout2.numel() > 0, selu = out.numel() > 0;
  if (N * H * W == 0) {
    dw.zero_();
    db.zero_();
    return;
  }
  for (const at::Tensor* t : {&dout, &dout2, &out}) {
    if (t->numel() == 0 && t != &dout) continue;
    TORCH_CHECK(t->device() == x.device() && t->size(0) == N && t->size(1) == CO && t->size(2) == H &&
                    t->size(3) == W, "small conv wgrad: gradient/output shape ", t->sizes(), " does not match x");
    TORCH_CHECK(vector_rows(*t), "small conv wgrad: dout, dout2 and out need bf16 contiguous channels, strides in "
                "multiples of 8 and 16-byte alignment");
  }
  TORCH_CHECK(dw.is_cuda() && dw.scalar_type() == at::kFloat && dw.is_contiguous() &&
                  dw.numel() == mscred_small_conv::kK * CO, "small conv wgrad: dw must be float32 (27, CO)");
  TORCH_CHECK(db.is_cuda() && db.scalar_type() == at::kFloat && db.is_contiguous() && db.numel() == CO,
              "small conv wgrad: db must be float32 (CO,)");
  TORCH_CHECK(N * H * W < (int64_t(1) << 40) && H * W < (int64_t(1) << 31), "small conv wgrad: maps too large");
  const c10::cuda::CUDAGuard guard(x.device());
  dw.zero_();
  db.zero_();
  mscred_small_conv::WgradParams p{};
  p.x = reinterpret_cast<const __nv_bfloat16*>(x.data_ptr());
  p.g = reinterpret_cast<const __nv_bfloat16*>(dout.data_ptr());
  p.g2 = has_g2 ? reinterpret_cast<const __nv_bfloat16*>(dout2.data_ptr()) : nullptr;
  p.o = selu ? reinterpret_cast<const __nv_bfloat16*>(out.data_ptr()) : nullptr;
  p.dw = dw.data_ptr<float>();
  p.db = db.data_ptr<float>();
  p.x_sb = x.stride(0); p.x_sc = x.stride(1); p.x_sy = x.stride(2); p.x_sx = x.stride(3);
  p.g_sb = dout.stride(0); p.g_sy = dout.stride(2); p.g_sx = dout.stride(3);
  if (has_g2) { p.g2_sb = dout2.stride(0); p.g2_sy = dout2.stride(2); p.g2_sx = dout2.stride(3); }
  if (selu) { p.o_sb = out.stride(0); p.o_sy = out.stride(2); p.o_sx = out.stride(3); }
  p.N = int(N); p.H = int(H); p.W = int(W); p.CO = int(CO);
  int sms = 0;  // (cudaDeviceGetAttribute: ATen/cuda/CUDAContext.h pulls in cuSPARSE's headers)
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, x.get_device()));
  mscred_small_conv::launch_wgrad(p, sms, int(blocks_per_sm), c10::cuda::getCurrentCUDAStream().stream());
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("wgrad", &wgrad, "conv1's weight and bias gradient (small_conv_wgrad.cu)");
}
