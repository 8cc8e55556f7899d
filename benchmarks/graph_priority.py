"""Does the chain of the graphed training step run faster when its kernels outrank the side stream's?

``graph_timeline.py`` showed the weight gradients on the side stream stalling the backward's chain: level 1's
weight gradient (80.8 us) ran alone for 75.6 us while the encoder's next data gradient waited for SMs
(`results/graph_timeline/`). CUDA stream priorities decide which ready blocks get a free SM first, but a graph
launched normally runs every node at the launch stream's priority; with ``CU_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY``
each kernel node runs at its own priority attribute. Variants, each the product's GraphedStep captured again:

- ``default``: as the product (torch's instantiation);
- ``captured``: the capture stream at high priority, the side stream at the lowest, the graph instantiated with the
  node-priority flag (whatever priorities the capture recorded in the nodes);
- ``by_name``: as ``captured``, and every kernel node's priority set by its kernel's name: weight gradients (and
  cuDNN's workspace initialisations) lowest, everything else highest;
- with ``--split K``, also ``default@splitK`` and ``by_name@splitK``: those two captured with
  ``MSCRED_WGRAD_SPLIT=K`` (each weight gradient as K calls over slices of the images, ``wgrad_stream.weight_grad``),
  whose blocks end K times as often, so that a higher-priority chain kernel can take their SMs sooner.

Printed first: the priorities the capture recorded per kernel family. Then the step in alternation, ms a step
(CUDA events over 40 replays, median of 5), and each variant's loss after the timed steps against the default's.
Driver API through ctypes (libcuda): the graph is torch's (``CUDAGraph(keep_graph=True)``), instantiated and
launched here.
Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/graph_priority.py --out DIR [--split K] [--rounds N]
"""
from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import os

import torch

import bench_train as bt  # noqa: E402 (benchmarks/ is the script's own folder)
import step_alternation  # noqa: E402
import sweep_report  # noqa: E402
from mscred import train_graphs
from mscred.ops import wgrad_stream

BATCH = step_alternation.BATCH
PRIORITY_ATTR = 8  # CU_LAUNCH_ATTRIBUTE_PRIORITY
USE_NODE_PRIORITY = 8  # CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY
LOW_NAMES = ("wgrad", "init_device_workspace")

cuda = ctypes.CDLL("libcuda.so.1")


def _ok(res: int, what: str) -> None:
    if res != 0:
        raise RuntimeError(f"{what} failed: CUresult {res}")


class KernelNodeParams(ctypes.Structure):  # CUDA_KERNEL_NODE_PARAMS_v2
    _fields_ = [("func", ctypes.c_void_p), ("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint),
                ("gridDimZ", ctypes.c_uint), ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint),
                ("blockDimZ", ctypes.c_uint), ("sharedMemBytes", ctypes.c_uint), ("kernelParams", ctypes.c_void_p),
                ("extra", ctypes.c_void_p), ("kern", ctypes.c_void_p), ("ctx", ctypes.c_void_p)]


class AttrValue(ctypes.Union):  # CUlaunchAttributeValue: 64 bytes, the priority an int at its start
    _fields_ = [("priority", ctypes.c_int), ("pad", ctypes.c_char * 64)]


def kernel_nodes(graph: int) -> list[tuple[int, str]]:
    count = ctypes.c_size_t(0)
    _ok(cuda.cuGraphGetNodes(ctypes.c_void_p(graph), None, ctypes.byref(count)), "cuGraphGetNodes")
    nodes = (ctypes.c_void_p * count.value)()
    _ok(cuda.cuGraphGetNodes(ctypes.c_void_p(graph), nodes, ctypes.byref(count)), "cuGraphGetNodes")
    out = []
    for node in nodes:
        kind = ctypes.c_int(-1)
        _ok(cuda.cuGraphNodeGetType(ctypes.c_void_p(node), ctypes.byref(kind)), "cuGraphNodeGetType")
        if kind.value != 0:  # CU_GRAPH_NODE_TYPE_KERNEL
            continue
        params = KernelNodeParams()
        _ok(cuda.cuGraphKernelNodeGetParams_v2(ctypes.c_void_p(node), ctypes.byref(params)),
            "cuGraphKernelNodeGetParams")
        name = ctypes.c_char_p()
        if params.func:
            res = cuda.cuFuncGetName(ctypes.byref(name), ctypes.c_void_p(params.func))
        else:
            res = cuda.cuKernelGetName(ctypes.byref(name), ctypes.c_void_p(params.kern))
        out.append((node, name.value.decode(errors="replace") if res == 0 and name.value else "?"))
    return out


def node_priority(node: int) -> int:
    value = AttrValue()
    _ok(cuda.cuGraphKernelNodeGetAttribute(ctypes.c_void_p(node), PRIORITY_ATTR, ctypes.byref(value)),
        "cuGraphKernelNodeGetAttribute")
    return value.priority


def set_priority(node: int, priority: int) -> None:
    value = AttrValue()
    value.priority = priority
    _ok(cuda.cuGraphKernelNodeSetAttribute(ctypes.c_void_p(node), PRIORITY_ATTR, ctypes.byref(value)),
        "cuGraphKernelNodeSetAttribute")


class _OwnExec:
    """Stands for the torch graph in ``_GatherThenReplay``: launches an executable instantiated here."""

    def __init__(self, torch_graph, flags: int):
        self.torch_graph = torch_graph  # keeps the graph (and its memory pool) alive
        self.exec = ctypes.c_void_p()
        _ok(cuda.cuGraphInstantiateWithFlags(ctypes.byref(self.exec), ctypes.c_void_p(torch_graph.raw_cuda_graph()),
                                             ctypes.c_ulonglong(flags)), "cuGraphInstantiateWithFlags")

    def __del__(self) -> None:
        cuda.cuGraphExecDestroy(self.exec)

    def replay(self) -> None:
        _ok(cuda.cuGraphLaunch(self.exec, ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)), "cuGraphLaunch")


@contextlib.contextmanager
def split_setting(variant: str):
    """The environment a variant is captured in: ``MSCRED_WGRAD_SPLIT=K`` for a name ending in ``@splitK``."""
    _, _, pieces = variant.partition("@split")
    before = os.environ.get(wgrad_stream.SPLIT_VARIABLE)
    if pieces:
        os.environ[wgrad_stream.SPLIT_VARIABLE] = pieces
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(wgrad_stream.SPLIT_VARIABLE, None)
        else:
            os.environ[wgrad_stream.SPLIT_VARIABLE] = before


def make(variant: str, data, device, lines: list[str]):
    with split_setting(variant):
        return _make(variant.partition("@")[0], variant, data, device, lines)


def _make(variant: str, label: str, data, device, lines: list[str]):
    net, opt = bt.build("fused", 30, device, capturable=True)
    if variant == "default":
        return train_graphs.GraphedStep(net, opt, data, BATCH, True)
    least, greatest = ctypes.c_int(), ctypes.c_int()
    _ok(cuda.cuCtxGetStreamPriorityRange(ctypes.byref(least), ctypes.byref(greatest)), "cuCtxGetStreamPriorityRange")
    low, high = least.value, greatest.value  # (0, -5) on the H100/H200; torch streams take 0 (low) and -1 (high)
    wgrad_stream._STREAMS[device.index or 0] = torch.cuda.Stream(device=device, priority=0)
    real_stream, real_graph = torch.cuda.Stream, torch.cuda.CUDAGraph
    torch.cuda.Stream = lambda device=None, priority=0, **kw: real_stream(device=device, priority=-1, **kw)
    torch.cuda.CUDAGraph = lambda: real_graph(keep_graph=True)
    try:
        step = train_graphs.GraphedStep(net, opt, data, BATCH, True)
    finally:
        torch.cuda.Stream, torch.cuda.CUDAGraph = real_stream, real_graph
    graph = step.graph.cuda_graph
    nodes = kernel_nodes(graph.raw_cuda_graph())
    seen = collections.Counter((("low-name" if any(s in n for s in LOW_NAMES) else "other"), node_priority(nd))
                               for nd, n in nodes)
    lines.append(f"- {label}: {len(nodes)} kernel nodes; (name class, captured priority): count "
                 f"{dict(sorted(seen.items()))}; stream priorities low {low}, high {high}")
    if variant == "by_name":
        for nd, n in nodes:
            set_priority(nd, low if any(s in n for s in LOW_NAMES) else high)
    step.graph.cuda_graph = _OwnExec(graph, USE_NODE_PRIORITY)
    return step


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/graph_priority")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--split", type=int, default=0,
                    help="also default and by_name captured with MSCRED_WGRAD_SPLIT=K (K >= 2)")
    args = ap.parse_args()
    if args.split == 1 or args.split < 0:
        ap.error("--split wants K >= 2 (or 0: no split variants)")
    data, device = step_alternation.thesis_data()
    lines = ["# The graphed step with the chain's kernels at a higher priority (graph_priority.py)", "",
             f"{sweep_report.machine_line()}.", "", "Captured node priorities:", ""]
    variants = ("default", "captured", "by_name")
    if args.split:
        variants += (f"default@split{args.split}", f"by_name@split{args.split}")
    # (each variant built anew per round and dropped after its timing: with all of them alive at once the first
    # one's replays hit an illegal address once the others were captured -- not understood; not the product's use)
    failures: dict[str, str] = {}  # a variant that fails leaves the others their rounds (step_alternation)
    times, losses = step_alternation.alternate(lambda v, r: make(v, data, device, lines if r == 0 else []),
                                               variants, args.rounds,
                                               step_alternation.random_batches(len(data), device), failures)
    lines += [""] + step_alternation.table(times, losses, failures)
    step_alternation.report(args.out, "graph_priority.md", lines)


if __name__ == "__main__":
    main()
