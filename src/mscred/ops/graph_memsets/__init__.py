"""A captured CUDA graph's memset nodes made kernel nodes (``graph_memsets.cu``), for the graphed step and scoring.

cuDNN zeroes a small buffer with ``cudaMemsetAsync`` before some of its convolutions: 17 of the graphed bf16
training step's on the H200 (cuDNN 9.19). In a replay each of those memset nodes took ~4-8 us from the end of the
kernel before it to the start of the convolution after it (the node itself 0.7-1.6 us), where one kernel node
follows another within ~0.4 us (``results/graph_timeline_fold/``): ~0.1 ms of the 2.5 ms step. ``capture`` captures
into a graph kept un-instantiated (``torch.cuda.CUDAGraph(keep_graph=True)``), replaces each memset node by a node
of our kernel that writes the same bytes, with the same dependencies and dependents, then instantiates it.

``MSCRED_GRAPH_MEMSET_KERNELS=1`` turns it on (opt-in until measured on the GPU). Where the extension cannot be
built, or this torch has no ``keep_graph``, graphs are captured as before (a warning says so once).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from mscred.ops.cuda_extension import LazyExtension
from mscred.ops.triton.runtime import switched_on

_extension = LazyExtension("graph memset extension", "mscred_graph_memsets", Path(__file__).resolve().parent,
                           ["binding.cpp", "graph_memsets.cu"])


def enabled() -> bool:
    """Whether captures replace their memset nodes (MSCRED_GRAPH_MEMSET_KERNELS=1)."""
    return switched_on("MSCRED_GRAPH_MEMSET_KERNELS")


def module():
    """The compiled extension (RuntimeError if it cannot be built here)."""
    return _extension()


def _kept_graph():
    """An un-instantiated graph to edit, or None where it cannot be had (no extension, no keep_graph)."""
    if not _extension.usable("graph captures keep their memset nodes"):
        return None
    try:
        return torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # a torch before keep_graph (2.7)
        return None


@contextlib.contextmanager
def capture(stream: torch.cuda.Stream):
    """``with capture(stream) as graph:`` the body captured into ``graph`` on ``stream`` (torch.cuda.graph); when
    enabled, its memset nodes are then replaced and the graph instantiated. ``graph.memset_kernels`` is how many
    nodes were replaced (0 when not enabled or not possible here)."""
    kept = _kept_graph() if enabled() else None
    graph = kept if kept is not None else torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        yield graph
    graph.memset_kernels = 0
    if kept is not None:
        graph.memset_kernels = module().memsets_to_kernels(graph.raw_cuda_graph())
        graph.instantiate()
