"""A captured CUDA graph's memset nodes made kernel nodes (``graph_memsets.cu``), for the graphed step and scoring.

cuDNN zeroes a small buffer with ``cudaMemsetAsync`` before some of its convolutions: 18 of the graphed bf16
training step's on the H200 (cuDNN 9.19). In a replay 17 of those memset nodes took ~4-8 us from the end of the
kernel before it to the start of the convolution after it (the node itself 0.7-1.6 us), where one kernel node
follows another within ~0.4 us (``results/graph_timeline_fold/``): ~0.1 ms of the 2.5 ms step. ``capture`` captures
into a graph kept un-instantiated (``torch.cuda.CUDAGraph(keep_graph=True)``), replaces each memset node by a node
of our kernel that writes the same bytes, with the same dependencies and dependents, then instantiates it.

Measured on the H200 (``results/graph_memsets/``, ``results/graph_launch_cost/``): the graphed bf16 training step
2.445-2.450 -> 2.419-2.428 ms and 2.462-2.467 -> 2.438 ms in alternation on two machines, one step from an idle GPU
2.489 -> 2.472 ms, and the host's cudaGraphLaunch 31-35 -> 9 us (memset nodes are dear to launch as well). On by
default; ``MSCRED_GRAPH_MEMSET_KERNELS=0`` keeps the memset nodes. Where the extension cannot be built (a warning says
so once), or this torch has no ``keep_graph``, graphs are captured as before (``mscred env`` says which).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

import torch

from mscred.ops.cuda_extension import LazyExtension
from mscred.ops.triton.runtime import switched_off

# no tensor cores in it: any GPU CUDA 13 builds for (Turing, 7.5, and later)
_extension = LazyExtension("graph memset extension", "mscred_graph_memsets", Path(__file__).resolve().parent,
                           ["binding.cpp", "graph_memsets.cu"], min_capability=(7, 5))


def enabled() -> bool:
    """Whether captures replace their memset nodes (unless MSCRED_GRAPH_MEMSET_KERNELS=0)."""
    return not switched_off("MSCRED_GRAPH_MEMSET_KERNELS")


def module():
    """The compiled extension (RuntimeError if it cannot be built here)."""
    return _extension()


def _kept_graph():
    """An un-instantiated graph to edit, or None where it cannot be had (no extension, no keep_graph)."""
    if not _extension.usable("graph captures keep their memset nodes"):
        return None
    try:
        return torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:  # an older torch, without keep_graph
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


def is_available() -> tuple[bool, str]:
    """(True, "") when captures here replace their memset nodes, checked on a graph of two memsets and a kernel
    reading what they wrote; else (False, why) (``mscred env``)."""
    if not enabled():
        return False, "MSCRED_GRAPH_MEMSET_KERNELS=0"
    if not torch.cuda.is_available():
        return False, "no CUDA device"
    try:
        torch.cuda.CUDAGraph(keep_graph=True)
    except TypeError:
        return False, f"torch {torch.__version__} has no CUDAGraph(keep_graph=True)"
    try:
        ext = module()
        buf = torch.full((67,), 0xAB, dtype=torch.uint8, device="cuda")
        out = torch.empty(67, dtype=torch.int16, device="cuda")
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with capture(stream) as graph:
            ext.memset_async(buf, 1, 0x5A, 1, 33, 1, 0)
            ext.memset_async(buf, 36, 0x01020304, 4, 7, 1, 0)
            out.copy_(buf.to(torch.int16))
        buf.fill_(0xAB)
        graph.replay()
        torch.cuda.synchronize()
    except RuntimeError as err:
        return False, str(err).splitlines()[0]
    expected = [0xAB] + [0x5A] * 33 + [0xAB] * 2 + [4, 3, 2, 1] * 7 + [0xAB] * 3
    if graph.memset_kernels != 2 or out.tolist() != expected:
        return False, f"self-check failed ({graph.memset_kernels} memset nodes replaced, wrote {out.tolist()})"
    return True, ""
