"""The graph surgery of ``ops/graph_memsets``: a captured graph's memset nodes replaced by kernel nodes writing the
same bytes, in the same place of the graph.

CPU: the CUDA source compiles for sm_90a (its binding: test_extension_bindings.py) and the switch reads as
documented. GPU: memsets of 1-, 2- and 4-byte elements, 1-D and pitched 2-D, at awkward offsets and sizes, written by
the replaced graph byte for byte as the memsets write them and nothing beside; the order of a chain of memsets and
kernels (and across two streams) kept; the graphed training step replaying the same losses with them replaced.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from mscred.ops import graph_memsets
from mscred.ops.cuda_extension import cuda_target
from mscred.sass.toolchain import find_tool

SRC = Path(graph_memsets.__file__).resolve().parent
NVCC = find_tool("nvcc")
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="captures CUDA graphs: needs a CUDA GPU")


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
def test_compiles_for_sm90a_without_spills(tmp_path):
    cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(9, 0)[1], f"-I{SRC}", "-Xptxas", "-v", "-c",
           str(SRC / "graph_memsets.cu"), "-o", str(tmp_path / "graph_memsets.o")]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr.count("Compiling entry function") == 2, proc.stderr  # the 1-D and the pitched kernel
    assert re.findall(r"(\d+) bytes spill stores", proc.stderr) == ["0", "0"], proc.stderr


@pytest.mark.parametrize("setting, on", [(None, True), ("0", False), ("off", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_GRAPH_MEMSET_KERNELS", setting)
    assert graph_memsets.enabled() is on
    ok, why = graph_memsets.is_available()
    if not torch.cuda.is_available():
        assert not ok and why == ("no CUDA device" if on else "MSCRED_GRAPH_MEMSET_KERNELS=0")
    else:  # the self-check: two memsets replaced, their bytes read back by a kernel
        assert ok is on and why == ("" if on else "MSCRED_GRAPH_MEMSET_KERNELS=0")


def _expected(size: int, offset: int, value: int, element_size: int, width: int, height: int, pitch: int,
              fill: int = 0xAB) -> np.ndarray:
    """The bytes of a ``size``-byte buffer of ``fill`` after the memset (little-endian elements)."""
    out = np.full(size, fill, dtype=np.uint8)
    element = np.frombuffer(int(value % (1 << (8 * element_size))).to_bytes(element_size, "little"), dtype=np.uint8)
    for row in range(height):
        start = offset + row * pitch
        out[start:start + width * element_size] = np.tile(element, width)
    return out


def _capture(stream, body):
    with graph_memsets.capture(stream) as graph:
        body()
    return graph


# (offset bytes, value, element size, width in elements, height, pitch bytes): heads and tails around 16-byte
# boundaries, one element, long runs, values whose bytes differ (the replicated word), pitched rows
CASES = [(0, 0, 1, 1, 1, 0), (3, 0x5A, 1, 13, 1, 0), (1, 0x1FF, 1, 4099, 1, 0), (16, 7, 1, 16, 1, 0),
         (2, 0xBEEF, 2, 1, 1, 0), (6, 0x1234, 2, 2053, 1, 0), (4, 0xDEADBEEF, 4, 1, 1, 0),
         (12, 0x01020304, 4, 1031, 1, 0), (0, 0, 4, 65536, 1, 0),
         (5, 0x33, 1, 7, 9, 24), (8, 0xCAFE, 2, 5, 3, 40), (4, 0x89ABCDEF, 4, 3, 17, 20), (0, 9, 4, 4, 4, 16)]


@needs_cuda
@pytest.mark.parametrize("case", CASES, ids=[f"off{c[0]}-e{c[2]}-w{c[3]}-h{c[4]}" for c in CASES])
def test_replaced_memsets_write_the_same_bytes(case, monkeypatch):
    monkeypatch.setenv("MSCRED_GRAPH_MEMSET_KERNELS", "1")
    offset, value, element_size, width, height, pitch = case
    size = offset + (height - 1) * pitch + width * element_size + 37
    buf = torch.full((size,), 0xAB, dtype=torch.uint8, device="cuda")
    seen = torch.empty_like(buf, dtype=torch.int16)  # a kernel after the memset, reading what it wrote
    ext = graph_memsets.module()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = _capture(stream, lambda: (ext.memset_async(buf, offset, value, element_size, width, height, pitch),
                                      seen.copy_(buf.to(torch.int16))))
    assert graph.memset_kernels == 1 and ext.count_memset_nodes(graph.raw_cuda_graph()) == 0
    expected = _expected(size, offset, value, element_size, width, height, pitch)
    for _ in range(2):  # replays write again what was overwritten between them
        buf.fill_(0xAB)
        seen.zero_()
        graph.replay()
        torch.cuda.synchronize()
        np.testing.assert_array_equal(buf.cpu().numpy(), expected)
        np.testing.assert_array_equal(seen.cpu().numpy(), expected.astype(np.int16))


@needs_cuda
def test_switched_off_the_memsets_stay(monkeypatch):
    monkeypatch.setenv("MSCRED_GRAPH_MEMSET_KERNELS", "0")
    buf = torch.full((100,), 0xAB, dtype=torch.uint8, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = _capture(stream, lambda: graph_memsets.module().memset_async(buf, 3, 1, 1, 50, 1, 0))
    assert graph.memset_kernels == 0
    buf.fill_(0xAB)
    graph.replay()
    torch.cuda.synchronize()
    np.testing.assert_array_equal(buf.cpu().numpy(), _expected(100, 3, 1, 1, 50, 1, 0))


def _chain(ext, a: torch.Tensor, side: torch.cuda.Stream) -> None:
    """memset, kernel, memset, kernel on one stream, then a memset on a side stream that the first waits for:
    each step reads what the one before wrote, so any order but the captured one changes the result."""
    ext.memset_async(a, 0, 0, 4, a.numel(), 1, 0)  # a = 0 (float32 zero bits)
    a.add_(1.0)
    ext.memset_async(a, 64, 0x40000000, 4, 100, 1, 0)  # a[16:116] = 2.0
    a.mul_(3.0)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        ext.memset_async(a, 4 * 200, 0x3F800000, 4, 50, 1, 0)  # a[200:250] = 1.0
        a[190:260].add_(0.5)
    torch.cuda.current_stream().wait_stream(side)
    a.sqrt_()


@needs_cuda
def test_the_captured_order_holds_across_streams(monkeypatch):
    monkeypatch.setenv("MSCRED_GRAPH_MEMSET_KERNELS", "1")
    ext = graph_memsets.module()
    eager = torch.full((300,), -1.0, device="cuda")
    side = torch.cuda.Stream()
    _chain(ext, eager, side)
    a = torch.full((300,), -1.0, device="cuda")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    graph = _capture(stream, lambda: _chain(ext, a, side))
    assert graph.memset_kernels == 3
    a.fill_(-1.0)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(a, eager)
    assert torch.equal(eager[16:116], torch.full((100,), 6.0, device="cuda").sqrt())


@needs_cuda
def test_graphed_training_step_replays_the_same_losses(monkeypatch):
    """The product's graphed bf16 step at batch 128 (n = 30, cuDNN's heuristics: the same algorithms in both
    captures), memsets kept and replaced: the same losses over 4 steps. On Hopper cuDNN 9 leaves memset nodes in
    that step (18 in results/graph_timeline_fold/), and they are replaced."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    from mscred.train import WindowDataset
    from mscred.train_graphs import GraphedStep

    torch.manual_seed(1)
    data = WindowDataset(torch.rand(260, 3, 30, 30, device="cuda"), 5)
    batches = [torch.randperm(len(data), device="cuda")[:128] for _ in range(4)]
    losses, replaced = {}, {}
    for setting in ("0", "1"):
        monkeypatch.setenv("MSCRED_GRAPH_MEMSET_KERNELS", setting)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused")).cuda()
        opt = torch.optim.Adam(net.parameters(), lr=2e-4, capturable=True)
        step = GraphedStep(net, opt, data, 128, bf16=True, cudnn_benchmark=False)
        replaced[setting] = step.graph.cuda_graph.memset_kernels
        losses[setting] = torch.stack([step(idx) for idx in batches]).cpu()
    assert replaced["0"] == 0
    if torch.cuda.get_device_capability() == (9, 0):
        assert replaced["1"] > 0
    # not bit for bit: atomics in some weight gradients add in any order; a wrong byte in a convolution's zeroed
    # buffer would move the losses by far more
    torch.testing.assert_close(losses["1"], losses["0"], rtol=1e-3, atol=0)
