// PyTorch glue for resident_lstm.cu: checks the tensors and launches on the current CUDA stream (so that CUDA-graph
// capture and stream semantics hold). The decision to run it and the weight packing live in Python (__init__.py).
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "resident_lstm.h"

namespace {

bool aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

// The parameters both entry points share, after checking the input gates gx (B, T, 4Ch, H, W) (any strides with the
// channels contiguous and the others in multiples of 8 elements: a crop, or the sliding view of shared steps), the
// float32 bias (4Ch,) and the packed recurrent weight (4Ch, 4Ch) against the level's sizes and `dst`'s device.
mscred_resident::ResidentParams checked_params(const at::Tensor& gx, const at::Tensor& bias, const at::Tensor& w,
                                               const at::Tensor& dst, int64_t B, int64_t T, int64_t Ch, int64_t H,
                                               int64_t W, int64_t pad_t, int64_t pad_l, double forget_bias) {
  TORCH_CHECK(gx.is_cuda() && bias.is_cuda() && w.is_cuda() && dst.is_cuda(), "resident lstm: CUDA tensors only");
  TORCH_CHECK(gx.scalar_type() == at::kBFloat16 && w.scalar_type() == at::kBFloat16 &&
                  dst.scalar_type() == at::kBFloat16 && bias.scalar_type() == at::kFloat,
              "resident lstm: bf16 gates, weight and output, float32 bias");
  TORCH_CHECK(gx.dim() == 5 && gx.size(0) == B && gx.size(1) == T && gx.size(2) == 4 * Ch && gx.size(3) == H &&
                  gx.size(4) == W,
              "resident lstm: gx shape ", gx.sizes(), " does not match the output's");
  TORCH_CHECK(w.is_contiguous() && w.size(0) == 4 * Ch && w.size(1) == 4 * Ch, "resident lstm: weight (4Ch, 4Ch)");
  TORCH_CHECK(bias.is_contiguous() && bias.numel() == 4 * Ch, "resident lstm: bias (4Ch,)");
  TORCH_CHECK(bias.device() == gx.device() && w.device() == gx.device() && dst.device() == gx.device(),
              "resident lstm: all tensors on one device");
  // 16-byte loads of 8 gates: the channels contiguous, every other stride (of a dimension longer than 1) a multiple
  // of 8 elements and the data 16-byte aligned; the same for the weight rows.
  bool gx_ok = gx.stride(2) == 1 && aligned(gx);
  for (int d : {0, 1, 3, 4}) gx_ok = gx_ok && (gx.size(d) == 1 || gx.stride(d) % 8 == 0);
  TORCH_CHECK(gx_ok, "resident lstm: gx needs contiguous channels, strides in multiples of 8 and 16-byte alignment");
  TORCH_CHECK(aligned(w), "resident lstm: the weight must be 16-byte aligned");
  mscred_resident::ResidentParams p{};
  p.gx = reinterpret_cast<const __nv_bfloat16*>(gx.data_ptr());
  p.gx_sb = gx.stride(0); p.gx_st = gx.stride(1); p.gx_sy = gx.stride(3); p.gx_sx = gx.stride(4);
  p.bias = bias.data_ptr<float>();
  p.w = reinterpret_cast<const __nv_bfloat16*>(w.data_ptr());
  p.B = static_cast<int>(B); p.T = static_cast<int>(T); p.H = static_cast<int>(H); p.W = static_cast<int>(W);
  p.pad_t = static_cast<int>(pad_t); p.pad_l = static_cast<int>(pad_l);
  p.forget_bias = static_cast<float>(forget_bias);
  return p;
}

int sm_count() {
  int device = 0, sms = 0;
  TORCH_CHECK(cudaGetDevice(&device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "resident lstm: cannot read the device's SM count");
  return sms;
}

void launch(const mscred_resident::ResidentParams& p, int64_t Ch, int sms) {
  const cudaError_t err = mscred_resident::window_lstm_resident_forward(p, static_cast<int>(Ch), sms,
                                                                        c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == cudaSuccess, "resident lstm: launch failed: ", cudaGetErrorString(err));
}

// Every h_t of one ConvLSTM level: out (B, T, Ch, H, W) stored (B, T, H, W, Ch), from the input gates gx (B, T, 4Ch,
// H, W), the float32 bias and the packed recurrent weight.
void forward(const at::Tensor& gx, const at::Tensor& bias, const at::Tensor& w, at::Tensor& out, int64_t pad_t,
             int64_t pad_l, double forget_bias) {
  TORCH_CHECK(out.dim() == 5, "resident lstm: out must be 5-D");
  const int64_t B = out.size(0), T = out.size(1), Ch = out.size(2), H = out.size(3), W = out.size(4);
  auto p = checked_params(gx, bias, w, out, B, T, Ch, H, W, pad_t, pad_l, forget_bias);
  TORCH_CHECK(out.stride(2) == 1 && out.stride(4) == Ch && out.stride(3) == W * Ch &&
                  (B == 1 || out.stride(0) % 8 == 0) && (T == 1 || out.stride(1) % 8 == 0) && aligned(out),
              "resident lstm: out needs contiguous, 16-byte aligned (H, W, Ch) maps");
  const c10::cuda::CUDAGuard guard(gx.device());
  p.out = reinterpret_cast<__nv_bfloat16*>(out.data_ptr());
  p.out_sb = out.stride(0); p.out_st = out.stride(1);
  launch(p, Ch, sm_count());
}

// The level's ConvLSTM and its temporal attention in one kernel: attn (B, Ch, H, W) gets each window's attention
// output (channels contiguous, pixels at one stride: a channel slice of a wider channels-last buffer, as the
// decoder's concatenation buffer), from the same inputs as `forward`; T (gx's steps) at most kMaxAttentionSteps.
void forward_attention(const at::Tensor& gx, const at::Tensor& bias, const at::Tensor& w, at::Tensor& attn,
                       int64_t pad_t, int64_t pad_l, double forget_bias) {
  TORCH_CHECK(attn.dim() == 4 && gx.dim() == 5, "resident lstm: attn must be 4-D, gx 5-D");
  const int64_t B = attn.size(0), T = gx.size(1), Ch = attn.size(1), H = attn.size(2), W = attn.size(3);
  TORCH_CHECK(T <= mscred_resident::kMaxAttentionSteps, "resident lstm: the fused attention takes at most ",
              mscred_resident::kMaxAttentionSteps, " steps, got ", T);
  auto p = checked_params(gx, bias, w, attn, B, T, Ch, H, W, pad_t, pad_l, forget_bias);
  const int64_t pixel_stride = attn.stride(3);
  TORCH_CHECK(attn.stride(1) == 1 && (H == 1 || attn.stride(2) == W * pixel_stride) &&
                  (W * H == 1 || (pixel_stride % 8 == 0 && pixel_stride >= Ch)) &&
                  (B == 1 || attn.stride(0) % 8 == 0) && aligned(attn),
              "resident lstm: attn needs contiguous channels, pixels at one stride (a multiple of 8, at least Ch), "
              "16-byte alignment");
  const c10::cuda::CUDAGuard guard(gx.device());
  const int sms = sm_count();
  // Each block's slot for h_1 .. h_{T-2} (bf16): from the caching allocator on the current stream, so that a CUDA
  // graph capture takes it from the graph's pool.
  const int64_t slots = mscred_resident::grid_of(static_cast<int>(B), sms);
  const at::Tensor scratch = at::empty({slots * std::max<int64_t>(T - 2, 0) * H * W * Ch}, gx.options());
  p.attn = reinterpret_cast<__nv_bfloat16*>(attn.data_ptr());
  p.attn_sb = attn.stride(0); p.attn_sp = pixel_stride;
  p.scratch = reinterpret_cast<__nv_bfloat16*>(scratch.data_ptr());
  launch(p, Ch, sms);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "every h_t of a ConvLSTM level, the window's state resident on the SM (bf16 inference)");
  m.def("forward_attention", &forward_attention,
        "a ConvLSTM level and its temporal attention in one kernel, the window's state resident on the SM");
  m.def("shared_bytes", &mscred_resident::shared_bytes, "shared memory of one block (channels, pixels)");
  m.def("mma_kind", &mscred_resident::mma_kind, "the recurrent GEMM's tensor-core instructions: wgmma or mma.sync");
}
