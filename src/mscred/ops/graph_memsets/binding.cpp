// PyTorch glue for graph_memsets.cu: the graph surgery on a torch.cuda.CUDAGraph's raw cudaGraph_t (an integer on
// the Python side), and, for the tests, memsets of 1-, 2- and 4-byte elements on the current stream (the runtime
// API has byte memsets only; the others come from the driver's entry points), so that a capture holds memset
// nodes of every kind a library may leave in it.
#include <torch/extension.h>

#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <cuda_runtime.h>

#include <stdexcept>

#include "graph_memsets.h"

namespace {

int64_t memsets_to_kernels(int64_t graph) {
  try {
    return mscred_graph_memsets::memsets_to_kernels(static_cast<std::uintptr_t>(graph));
  } catch (const std::runtime_error& err) {
    TORCH_CHECK(false, "graph memsets: ", err.what());
  }
}

int64_t count_memset_nodes(int64_t graph) {
  try {
    return mscred_graph_memsets::count_memset_nodes(static_cast<std::uintptr_t>(graph));
  } catch (const std::runtime_error& err) {
    TORCH_CHECK(false, "graph memsets: ", err.what());
  }
}

template <typename Fn>
Fn driver_entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &found);
  TORCH_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && fn, "graph memsets: no driver entry ",
              name);
  return reinterpret_cast<Fn>(fn);
}

// height rows of width elements of element_size bytes, pitch bytes apart, from byte offset of t's storage, set to
// value, on the current stream (as cudaMemset*Async / cuMemsetD*Async would be called by a library).
void memset_async(const at::Tensor& t, int64_t offset, int64_t value, int64_t element_size, int64_t width,
                  int64_t height, int64_t pitch) {
  TORCH_CHECK(t.is_cuda() && t.is_contiguous(), "graph memsets: a contiguous CUDA tensor");
  TORCH_CHECK(element_size == 1 || element_size == 2 || element_size == 4, "graph memsets: element size 1, 2 or 4");
  TORCH_CHECK(offset >= 0 && offset % element_size == 0 && width >= 0 && height >= 1 &&
                  (height == 1 || pitch >= width * element_size) &&
                  offset + (height - 1) * pitch + width * element_size <= t.nbytes(),
              "graph memsets: the region must lie in the tensor");
  const at::cuda::CUDAGuard guard(t.device());
  cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  char* dst = static_cast<char*>(t.data_ptr()) + offset;
  const auto ptr = reinterpret_cast<unsigned long long>(dst);
  const auto v = static_cast<unsigned>(value);
  using D16 = int (*)(unsigned long long, unsigned short, size_t, cudaStream_t);
  using D32 = int (*)(unsigned long long, unsigned, size_t, cudaStream_t);
  using D2D16 = int (*)(unsigned long long, size_t, unsigned short, size_t, size_t, cudaStream_t);
  using D2D32 = int (*)(unsigned long long, size_t, unsigned, size_t, size_t, cudaStream_t);
  int status = 0;
  if (element_size == 1) {
    cudaError_t err = height == 1 ? cudaMemsetAsync(dst, static_cast<int>(value), width, stream)
                                  : cudaMemset2DAsync(dst, pitch, static_cast<int>(value), width, height, stream);
    status = static_cast<int>(err);
  } else if (element_size == 2) {
    status = height == 1 ? driver_entry<D16>("cuMemsetD16Async")(ptr, static_cast<unsigned short>(v), width, stream)
                         : driver_entry<D2D16>("cuMemsetD2D16Async")(ptr, pitch, static_cast<unsigned short>(v),
                                                                      width, height, stream);
  } else {
    status = height == 1 ? driver_entry<D32>("cuMemsetD32Async")(ptr, v, width, stream)
                         : driver_entry<D2D32>("cuMemsetD2D32Async")(ptr, pitch, v, width, height, stream);
  }
  TORCH_CHECK(status == 0, "graph memsets: the memset failed with status ", status);
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("memsets_to_kernels", &memsets_to_kernels, "replace a captured graph's memset nodes by kernel nodes");
  m.def("count_memset_nodes", &count_memset_nodes, "a captured graph's memset nodes");
  m.def("memset_async", &memset_async, "a memset of 1-, 2- or 4-byte elements on the current stream (tests)");
}
