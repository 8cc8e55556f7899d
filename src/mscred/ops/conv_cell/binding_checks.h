// The tensor checks and device queries both bindings share (binding.cpp: the forward step; binding_bwd.cpp: the
// backward step), each in its own extension so that one's build cannot take the other down.
#pragma once

#include <torch/extension.h>

#include <cuda_runtime.h>

namespace mscred_conv_cell_binding {

inline bool aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }

inline int sm_count() {
  int device = 0, sms = 0;
  TORCH_CHECK(cudaGetDevice(&device) == cudaSuccess &&
                  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess,
              "conv cell: cannot read the device's SM count");
  return sms;
}

// A (B, K, H', W') map stored (B, H', W', K) contiguously: channels-last with no gaps.
inline bool packed_channels_last(const at::Tensor& t) {
  return t.dim() == 4 && t.is_contiguous(at::MemoryFormat::ChannelsLast) && aligned(t);
}

}  // namespace mscred_conv_cell_binding
