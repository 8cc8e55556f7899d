// A captured CUDA graph's memset nodes replaced by kernel nodes that write the same bytes.
//
// Why: cuDNN zeroes a small buffer with cudaMemsetAsync before 18 of the graphed training step's convolutions, and
// in a replay 17 of those memset nodes cost ~4-8 us between the kernel before it and the convolution after it (the node
// itself 0.7-1.6 us, the rest idle: results/graph_timeline_fold/), where one kernel node follows another within
// ~0.4 us. A kernel node writing the same bytes keeps the chain of kernel nodes unbroken.
//
// The kernel writes the memset's bytes: byte a of the destination gets byte (a mod 4) of the value replicated to 32
// bits (little-endian), which for element sizes 1, 2 and 4 (dst aligned to its element size, as CUDA requires) is
// the memset's byte there. A 1-D region is written in 16-byte stores between a byte-wise head and tail; a pitched
// 2-D one (height > 1 and pitch > a row's bytes) byte by byte along its rows.
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>
#include <vector>

#include "graph_memsets.h"

namespace mscred_graph_memsets {
namespace {

constexpr unsigned kThreads = 256;
constexpr unsigned kMaxBlocks = 1024;

__device__ __forceinline__ unsigned char pattern_byte(unsigned word, std::uintptr_t address) {
  return static_cast<unsigned char>(word >> (8 * (address & 3)));
}

// bytes [0, n) of dst: the 16-byte-aligned middle as uint4 stores, the head and tail a byte at a time.
__global__ void fill_bytes_kernel(unsigned char* dst, size_t n, unsigned word) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t first = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::uintptr_t base = reinterpret_cast<std::uintptr_t>(dst);
  size_t head = (16 - (base & 15)) & 15;
  if (head > n) head = n;
  const size_t vectors = (n - head) / 16;
  const size_t tail = head + vectors * 16;
  for (size_t i = first; i < head; i += stride) dst[i] = pattern_byte(word, base + i);
  // base + head is 16-byte aligned, so byte k of every uint4 sits at an address = k (mod 4): the word itself
  uint4* middle = reinterpret_cast<uint4*>(dst + head);
  const uint4 four = make_uint4(word, word, word, word);
  for (size_t i = first; i < vectors; i += stride) middle[i] = four;
  for (size_t i = tail + first; i < n; i += stride) dst[i] = pattern_byte(word, base + i);
}

// a pitched 2-D region: height rows of row_bytes bytes, pitch bytes apart
__global__ void fill_rows_kernel(unsigned char* dst, size_t pitch, size_t row_bytes, size_t height, unsigned word) {
  const size_t stride = static_cast<size_t>(gridDim.x) * blockDim.x;
  const size_t n = row_bytes * height;
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    const size_t row = i / row_bytes, col = i - row * row_bytes;
    unsigned char* p = dst + row * pitch + col;
    *p = pattern_byte(word, reinterpret_cast<std::uintptr_t>(p));
  }
}

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(err));
}

unsigned replicated(unsigned value, unsigned element_size) {
  if (element_size == 1) return (value & 0xffu) * 0x01010101u;
  if (element_size == 2) return (value & 0xffffu) * 0x00010001u;
  return value;
}

unsigned blocks_for(size_t units) {
  const size_t blocks = (units + kThreads - 1) / kThreads;
  return static_cast<unsigned>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

bool plain(const std::vector<cudaGraphEdgeData>& edges) {
  for (const cudaGraphEdgeData& e : edges)
    if (e.from_port != 0 || e.to_port != 0 || e.type != cudaGraphDependencyTypeDefault) return false;
  return true;
}

std::vector<cudaGraphNode_t> nodes_of(cudaGraph_t graph) {
  size_t n = 0;
  check(cudaGraphGetNodes(graph, nullptr, &n), "cudaGraphGetNodes");
  std::vector<cudaGraphNode_t> nodes(n);
  if (n) check(cudaGraphGetNodes(graph, nodes.data(), &n), "cudaGraphGetNodes");
  nodes.resize(n);
  return nodes;
}

bool is_memset(cudaGraphNode_t node) {
  cudaGraphNodeType type;
  check(cudaGraphNodeGetType(node, &type), "cudaGraphNodeGetType");
  return type == cudaGraphNodeTypeMemset;
}

// The nodes on one side of ``node`` and their edges' data (incoming: dependencies; outgoing: dependents).
void edges_of(cudaGraphNode_t node, bool incoming, std::vector<cudaGraphNode_t>& nodes,
              std::vector<cudaGraphEdgeData>& edges) {
  size_t n = 0;
  auto query = [&](cudaGraphNode_t* out, cudaGraphEdgeData* data) {
    return incoming ? cudaGraphNodeGetDependencies(node, out, data, &n)
                    : cudaGraphNodeGetDependentNodes(node, out, data, &n);
  };
  check(query(nullptr, nullptr), "cudaGraphNode edges (count)");
  nodes.assign(n, nullptr);
  edges.assign(n, cudaGraphEdgeData{});
  if (n) check(query(nodes.data(), edges.data()), "cudaGraphNode edges");
  nodes.resize(n);
  edges.resize(n);
}

}  // namespace

int64_t count_memset_nodes(std::uintptr_t graph_handle) {
  int64_t count = 0;
  for (cudaGraphNode_t node : nodes_of(reinterpret_cast<cudaGraph_t>(graph_handle))) count += is_memset(node);
  return count;
}

int64_t memsets_to_kernels(std::uintptr_t graph_handle) {
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(graph_handle);
  int64_t replaced = 0;
  std::vector<cudaGraphNode_t> before, after;
  std::vector<cudaGraphEdgeData> before_edges, after_edges;
  for (cudaGraphNode_t node : nodes_of(graph)) {
    if (!is_memset(node)) continue;
    cudaMemsetParams m;
    check(cudaGraphMemsetNodeGetParams(node, &m), "cudaGraphMemsetNodeGetParams");
    edges_of(node, true, before, before_edges);
    edges_of(node, false, after, after_edges);
    if (!plain(before_edges) || !plain(after_edges)) continue;  // a programmatic edge: left as it is

    unsigned char* dst = static_cast<unsigned char*>(m.dst);
    unsigned word = replicated(m.value, m.elementSize);
    size_t row_bytes = m.width * m.elementSize, height = m.height ? m.height : 1, pitch = m.pitch;
    cudaKernelNodeParams k{};
    k.blockDim = dim3(kThreads);
    k.sharedMemBytes = 0;
    k.extra = nullptr;
    size_t bytes = row_bytes * height;
    void* bytes_args[] = {&dst, &bytes, &word};
    void* rows_args[] = {&dst, &pitch, &row_bytes, &height, &word};
    if (height == 1 || pitch == row_bytes) {
      k.func = reinterpret_cast<void*>(&fill_bytes_kernel);
      k.gridDim = dim3(blocks_for(bytes / 16 + 16));
      k.kernelParams = bytes_args;
    } else {
      k.func = reinterpret_cast<void*>(&fill_rows_kernel);
      k.gridDim = dim3(blocks_for(bytes));
      k.kernelParams = rows_args;
    }
    cudaGraphNode_t fill;
    check(cudaGraphAddKernelNode(&fill, graph, before.data(), before.size(), &k), "cudaGraphAddKernelNode");
    for (cudaGraphNode_t next : after)
      check(cudaGraphAddDependencies(graph, &fill, &next, nullptr, 1), "cudaGraphAddDependencies");
    check(cudaGraphDestroyNode(node), "cudaGraphDestroyNode");
    ++replaced;
  }
  return replaced;
}

}  // namespace mscred_graph_memsets
