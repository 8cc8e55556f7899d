// A kernel's dynamic shared-memory allowance (the resident ConvLSTM kernel's and the conv + cell step kernel's).
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstddef>
#include <mutex>

namespace mscred_resident {

// Raises `Kernel`'s dynamic shared-memory allowance on the current device to at least `smem` bytes. The allowance is
// a per-device function attribute: it is only ever raised, so that a launch with less (mscred env's check, a small
// batch, narrower maps) never lowers it under a larger launch in another thread or under a CUDA graph captured with
// the larger one.
template <auto Kernel>
cudaError_t allow_shared_memory(size_t smem) {
  static std::mutex lock;
  static std::array<size_t, 64> allowed{};  // per device index
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device < 0 || device >= static_cast<int>(allowed.size())) return cudaErrorInvalidDevice;
  std::lock_guard<std::mutex> guard(lock);
  if (smem <= allowed[device]) return cudaSuccess;
  err = cudaFuncSetAttribute(Kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err == cudaSuccess) allowed[device] = smem;
  return err;
}

}  // namespace mscred_resident
