// A captured CUDA graph's memset nodes replaced by kernel nodes that write the same bytes (graph_memsets.cu).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mscred_graph_memsets {

// Replaces every memset node of the graph (a cudaGraph_t, not yet instantiated) whose edges are plain ones by a
// kernel node with the same dependencies and dependents; returns how many it replaced. Throws std::runtime_error
// naming the failed call.
int64_t memsets_to_kernels(std::uintptr_t graph);

// The graph's memset nodes.
int64_t count_memset_nodes(std::uintptr_t graph);

}  // namespace mscred_graph_memsets
