"""The training ConvLSTM's conv + cell step kernel (``ops/conv_cell``, CUDA C++ on Hopper's warpgroup MMAs): level 1
of the default model on the concatenated-gates path by default, level 2 too with MSCRED_LSTM_CONV_CELL=all.

In CI (no GPU) its source is compiled for sm_90a and its PTX checked (warpgroup MMAs per k16 step, cp.async row
tiles, 16-byte global stores only); its Python side's conditions and weight layout are checked on the CPU. On an
H100 / H200 the training op with the kernel runs forward and backward against the float64 oracle, within twice
the error of the split path (cuDNN's convolution + the Triton cell kernel) at the model's sizes and awkward ones
(one window, batches that leave the last tile short, maps of odd sizes, 1 to 5 steps), with its buffer poisoned
first (the kernel must write every element of the next step's h half, border included).
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import torch

from mscred.ops import conv_cell
from mscred.ops import reference as ref
from mscred.ops.cuda_extension import cuda_target
from mscred.ops.triton import convlstm_concat
from mscred.ops.triton.runtime import tl
from mscred.sass.toolchain import find_tool
from test_ops_triton_convlstm import _fwd_bwd, _inputs, _rel, _time_major_fwd_bwd, pytestmark  # noqa: F401

NVCC = find_tool("nvcc")
SRC = conv_cell._SRC / "conv_cell.cu"
SOURCES = [SRC, conv_cell._SRC / "conv_cell_bwd.cu"]  # the forward step kernels and the backward's
HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="the kernel runs on Hopper (sm_90a wgmma) only; compiled in CI")


@pytest.fixture(scope="module")
def nvcc_sm90a(tmp_path_factory):
    """``build(source, *extra)``: nvcc -c of ``source`` for sm_90a as the extensions build it, with ptxas's report
    (and ``extra`` flags), keeping its PTX (--keep); (the report, the PTX, the object), after asserting the build
    succeeded. Each source and flags are built once in this module: the shared-memory tests link their host program
    with the objects the build tests compiled."""
    builds = {}

    def build(source: Path, *extra: str) -> tuple[str, str, Path]:
        if (source, extra) not in builds:
            out = tmp_path_factory.mktemp(source.stem)
            cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(9, 0)[1], *extra, f"-I{conv_cell._SRC}", "-Xptxas", "-v",
                   "-c", str(source), "-o", str(out / f"{source.stem}.o"), "--keep", f"--keep-dir={out}"]
            builds[source, extra] = subprocess.run(cmd, capture_output=True, text=True, timeout=600), out
        proc, out = builds[source, extra]
        assert proc.returncode == 0, proc.stderr[-4000:]
        ptx = "".join(p.read_text() for p in out.glob("*.ptx"))
        return proc.stdout + proc.stderr, ptx, out / f"{source.stem}.o"
    return build


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
def test_compiles_to_warpgroup_mmas(nvcc_sm90a):
    builds = [nvcc_sm90a(src) for src in SOURCES]
    report = "".join(report for report, _, _ in builds)
    parts = re.split(r"Compiling entry function '([^']+)'", report)
    kernels = {parts[i]: parts[i + 1] for i in range(1, len(parts), 2)}
    # the forward at levels 1 and 2, the backward at level 1
    assert sum("conv_cell_kernel" in k for k in kernels) == 2 and sum("conv_cell_bwd_kernel" in k for k in kernels) == 1
    assert len(kernels) == 3
    for name, info in kernels.items():  # level 1's A operand in shared memory leaves room at 168 registers
        frame = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads", info)
        assert frame and tuple(map(int, frame.groups())) == (0, 0, 0), f"{name}: {frame and frame.group(0)}"
    ptx = "".join(ptx for _, ptx, _ in builds)
    # one warpgroup MMA per k16 step of the four taps: forward 4 x 64 / 16 at level 1, 4 x 128 / 16 at level 2;
    # backward (N = C + Ch = 64) 4 x 128 / 16
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16") == 16 + 32
    assert ptx.count("wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16") == 32
    assert "cp.async.cg.shared.global" in ptx and "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx  # (level 2)
    stores = re.findall(r"\bst\.(?!shared)\S*", ptx)
    assert stores and set(stores) == {"st.global.v4.u32"}, sorted(set(stores))
    for body in ptx.split(".entry")[1:]:  # the weight visible to the tensor cores before the block's barrier
        assert -1 < body.find("fence.proxy.async.shared::cta") < body.find("bar.sync"), "fence before barrier"


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("flags", ["-DMSCRED_CONV_CELL_SMEM_A=0", "-DMSCRED_CONV_CELL_STAGES=3",
                                   "-DMSCRED_CONV_CELL_BASE_OFFSET=1", "-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1",
                                   "-DMSCRED_CONV_CELL_WARPGROUPS=4"])
def test_ab_variants_compile(flags, nvcc_sm90a):
    """The A/B builds a device call times (MSCRED_CONV_CELL_FLAGS) compile for Hopper: level 1's A operand by
    ldmatrix into registers (the first build; ptxas keeps a few values on the stack at 168 registers), three row
    buffers a warpgroup, the PTX ISA's descriptor base offset (wrong gates on the H200, kept to show it), the gates
    stored with the bias (conv_cell.h; right on the H200, 2% on the forward kernel, not adopted), four warpgroups at
    level 1 (128 registers with a few spills; 9% slower on the H200, results/conv_cell_next/)."""
    report, _, _ = nvcc_sm90a(SRC, *flags.split())
    assert len(re.findall(r"Compiling entry function", report)) == 2  # the forward's two


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
def test_backward_ab_variant_compiles_without_spills(nvcc_sm90a):
    """The backward kernel's one A/B build, the gates read as stored with the bias (right on the H200, the forward
    ~3 us faster, not adopted: results/conv_cell_bwd_steps/), fits its registers (no stack frame, no spills). The
    builds measured and removed are listed in conv_cell_bwd.cu."""
    report, _, _ = nvcc_sm90a(SOURCES[1], "-DMSCRED_CONV_CELL_PRE_WITH_BIAS=1")
    assert len(re.findall(r"Compiling entry function", report)) == 1
    assert "0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads" in report, report[-2000:]


SHARED_BYTES_PROGRAM = r"""
#include <cstdio>
#include <cstddef>
namespace mscred_conv_cell { size_t shared_bytes(int, int, int); size_t shared_bytes_backward(int, int, int); }
int main() {  // level 1 (30 x 30 maps) and level 2 (15 x 15) of the default model, as the launch code asks
#ifdef BACKWARD
  printf("%zu\n", mscred_conv_cell::shared_bytes_backward(32, 32, 30));
#else
  printf("%zu %zu\n", mscred_conv_cell::shared_bytes(32, 32, 30), mscred_conv_cell::shared_bytes(64, 64, 15));
#endif
}
"""


@pytest.mark.skipif(NVCC is None, reason="nvcc not found (CUDA toolkit not installed); cannot compile the .cu here")
@pytest.mark.parametrize("source, flags, expected", [
    ("conv_cell_bwd.cu", "", [220_672]),
    ("conv_cell.cu", "", [140_800, 214_528]),
    ("conv_cell.cu", "-DMSCRED_CONV_CELL_WARPGROUPS=4", [165_376, 214_528]),
])
def test_blocks_fit_hopper_shared_memory(source, flags, expected, tmp_path, nvcc_sm90a):
    """One block's shared memory as the launch code computes it (host code, linked with the object the build tests
    above compiled with these flags: shared_bytes does not depend on the sm_90a switch), for the default builds and
    those A/B builds that change it -- the figures the source comments and result READMEs quote -- each within
    Hopper's 227 KB a block."""
    _, _, kernel_object = nvcc_sm90a(conv_cell._SRC / source, *flags.split())
    main = tmp_path / "main.cu"
    main.write_text(SHARED_BYTES_PROGRAM)
    exe = tmp_path / "shared_bytes"
    extra = ["-DBACKWARD"] if source == "conv_cell_bwd.cu" else []
    cmd = [NVCC, "-std=c++17", "-O3", *cuda_target(9, 0)[1], *extra, f"-I{conv_cell._SRC}", str(main),
           str(kernel_object), "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = [int(v) for v in subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()]
    assert got == expected
    assert max(got) <= 227 * 1024


def test_takes_only_what_it_is_written_for(monkeypatch):
    bf16, f16 = torch.bfloat16, torch.float16

    def takes(dtype=bf16, cell=f16, C=32, Ch=32, kernel=(2, 2), pads=(0, 1, 0, 1)):
        return conv_cell.takes(dtype, cell, C, Ch, kernel, pads)

    monkeypatch.delenv("MSCRED_LSTM_CONV_CELL", raising=False)
    assert takes() and not takes(C=64, Ch=64)  # level 1 only by default
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "0")
    assert not takes()
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "all")
    assert takes() and takes(C=64, Ch=64)
    assert not takes(C=16, Ch=32) and not takes(C=128, Ch=128) and not takes(C=32, Ch=64)
    assert not takes(torch.float16) and not takes(torch.float32) and not takes(cell=torch.float32)
    assert not takes(kernel=(3, 3), pads=(1, 1, 1, 1)) and not takes(pads=(1, 0, 1, 0))
    xh = torch.zeros(5, 2, 64, 31, 31, dtype=bf16)
    assert not conv_cell.runs(xh, f16, 32, 32, (2, 2), (0, 1, 0, 1))  # a CPU tensor


def test_packed_weight_rows_are_taps_then_channels():
    w = torch.randn(8, 3, 2, 2, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    rows = conv_cell.packed_weight(w)
    assert rows.shape == (8, 12) and rows.is_contiguous()
    for ky in range(2):
        for kx in range(2):
            tap = ky * 2 + kx
            torch.testing.assert_close(rows[:, tap * 3:(tap + 1) * 3], w[:, :, ky, kx])


@pytest.fixture
def kernel_on(monkeypatch):
    """The concatenated path at every map size with the step kernel switched on; counts its steps."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "all")  # level 2's build too
    steps = []
    real = conv_cell.step
    monkeypatch.setattr(conv_cell, "step", lambda *a: steps.append(1) or real(*a))
    return steps


# (B, T, C = Ch, n): the model's levels at the training batch, and awkward ones: one window, batches whose rows leave
# the last 64-row tile short, odd and tiny maps, one step (no recurrence) and two.
@needs_hopper
@pytest.mark.parametrize("B, T, C, n", [(128, 5, 32, 30), (128, 5, 64, 15), (3, 5, 32, 7), (1, 2, 32, 5),
                                        (37, 3, 64, 15), (2, 5, 64, 9), (5, 1, 32, 30), (7, 4, 64, 3)])
def test_training_level_tracks_split_path(B, T, C, n, kernel_on, monkeypatch):
    """h and the gradients of x, the weight and the bias, bf16, against the float64 oracle: within twice the split
    path's error (both round the gates to bf16 once). The level's buffer is poisoned with NaN first."""
    real = convlstm_concat.buffers

    def poisoned(*args):
        out, cells, xh = real(*args)
        return out.fill_(float("nan")), cells.fill_(float("nan")), xh.fill_(float("nan"))
    monkeypatch.setattr(convlstm_concat, "buffers", poisoned)
    x, w, b, dout = _inputs(B, T, C, C, n, 2, seed=300 + B + T + n)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    ours = _time_major_fwd_bwd(*low, 2)
    assert len(kernel_on) == T
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "0")
    split = _time_major_fwd_bwd(*low, 2)
    assert len(kernel_on) == T
    for name, o, s, e in zip(("h", "dx", "dweight", "dbias"), ours, split, oracle):
        assert torch.isfinite(o).all(), name
        assert _rel(o, e) <= 2 * _rel(s, e) + 1e-3, f"{name}: {_rel(o, e):.3g} vs split path {_rel(s, e):.3g}"


@needs_hopper
def test_step_outputs_match_split_path_and_replay_in_a_graph(kernel_on, monkeypatch):
    """convlstm_concat.forward at level 1's training size: the pre-activations, cells and h of the kernel against
    the split path's (different summation orders: a few bf16 ulps), and the same from a CUDA graph's replay."""
    B, T, C, n, pads = 64, 5, 32, 30, (0, 1, 0, 1)
    g = torch.Generator(device="cuda").manual_seed(5)
    images = torch.zeros(T * B, n + 1, n + 1, C, device="cuda", dtype=torch.bfloat16)
    images[:, :n, :n] = torch.randn(T * B, n, n, C, device="cuda", generator=g).to(torch.bfloat16)
    images = images.permute(0, 3, 1, 2)
    fmt = torch.channels_last
    w_x = (torch.randn(4 * C, C, 2, 2, device="cuda", generator=g) / 16).to(torch.bfloat16).contiguous(memory_format=fmt)
    w_h = (torch.randn(4 * C, C, 2, 2, device="cuda", generator=g) / 16).to(torch.bfloat16).contiguous(memory_format=fmt)
    bias = (torch.randn(4 * C, device="cuda", generator=g) * 0.5).to(torch.bfloat16)

    def run():
        bufs = convlstm_concat.buffers(B, T, C, C, n, n, pads, images, torch.float16)
        gates = convlstm_concat.forward(images, w_x, w_h, bias, *bufs, pads, 1.0, tl.float32)
        return [bufs[0], bufs[1], torch.stack(gates)]

    ours = run()
    assert len(kernel_on) == T
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "0")
    split = run()
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "all")
    if conv_cell._pre_with_bias(conv_cell._extension()):  # (builds storing the gates with the bias)
        split[2] = split[2].float() + bias.float().view(1, 1, -1, 1, 1)
    for name, o, s in zip(("h", "c", "pre"), ours, split):
        scale = s.float().abs().max()
        assert ((o.float() - s.float()).abs().max() / scale).item() < 2e-2, name
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        run()  # warm-up outside the capture
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        replayed = run()
    graph.replay()
    torch.cuda.synchronize()
    for name, r, o in zip(("h", "c", "pre"), replayed, ours):
        assert torch.equal(r, o), name  # the same kernel on the same inputs: bit-equal


# ----------------------------------------------------------------------------------------------------------------
# The backward step kernel (conv_cell_bwd.cu, the default at level 1's sizes; MSCRED_LSTM_CONV_CELL_BWD=0 off)
# ----------------------------------------------------------------------------------------------------------------
def test_backward_runs_only_where_written_for(monkeypatch):
    xh = torch.zeros(5, 2, 64, 31, 31, dtype=torch.bfloat16)
    dout = torch.zeros(2, 5, 30, 30, 32, dtype=torch.bfloat16).permute(0, 1, 4, 2, 3)
    f16, f32 = torch.float16, torch.float32

    def runs(**kw):
        args = dict(cell_dtype=f16, dc_dtype=f32, recompute_c=True, bias_grad_dtype=f32, C=32, Ch=32)
        args.update(kw)
        return conv_cell.runs_backward(xh, dout, args["cell_dtype"], args["dc_dtype"], args["recompute_c"],
                                       args["bias_grad_dtype"], args["C"], args["Ch"], (2, 2), (0, 1, 0, 1))

    monkeypatch.delenv("MSCRED_LSTM_CONV_CELL_BWD", raising=False)
    assert not runs()  # a CPU tensor
    assert not runs(C=64, Ch=64) and not runs(recompute_c=False) and not runs(dc_dtype=torch.bfloat16)
    assert not runs(bias_grad_dtype=torch.float64)


def test_backward_check_compares_the_right_gradients():
    """``is_backward_available``'s comparison (``_level_backward_errors``: the time-major bordered input gradient
    unbordered and put back in (B, T) order, the two weight halves joined) run on the path that works everywhere --
    the split backward, float64 (the Triton interpreter on a CPU) -- agrees with the float64 reference to rounding;
    with the weight halves swapped it would not."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    for attention in (False, True):  # dL/dh read, and made from the level's attention (FoldedGrad)
        errors = conv_cell._level_backward_errors(device, torch.float64, torch.float64, attention=attention)
        assert set(errors) == {"input", "weight", "bias"}
        assert max(errors.values()) < 1e-6, (attention, errors)


@needs_hopper
def test_backward_kernel_reports_itself_available_with_and_without_the_attention():
    """``is_backward_available`` (what ``mscred env`` prints): the built kernel passes its self-check, dL/dh read and
    made from the level's attention (the two code paths of its epilogue's dout)."""
    ok, why = conv_cell.is_backward_available()
    assert ok, why


def test_transposed_weight_is_taps_then_input_channels_then_gates():
    w = torch.randn(8, 3, 2, 2, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    w_t = conv_cell.transposed_weight(w)
    assert w_t.shape == (4, 3, 8) and w_t.is_contiguous()
    for ky in range(2):
        for kx in range(2):
            torch.testing.assert_close(w_t[ky * 2 + kx], w[:, :, ky, kx].T)


@needs_hopper
@pytest.mark.parametrize("B, T, n", [(128, 5, 30), (3, 5, 7), (1, 2, 5), (5, 3, 30), (2, 4, 3)])
def test_backward_kernel_tracks_split_path(B, T, n, kernel_on, monkeypatch):
    """Level 1's training op with the backward step kernel (the default): h and the gradients of x, the weight and
    the bias, bf16, against the float64 oracle within twice the split path's error; dout in the output's
    channels-last layout (the kernel reads 16 bytes of a map at a time; another layout keeps the split path)."""
    monkeypatch.delenv("MSCRED_LSTM_CONV_CELL_BWD", raising=False)
    calls = []
    real = conv_cell.step_backward
    monkeypatch.setattr(conv_cell, "step_backward", lambda *a: calls.append(1) or real(*a))
    x, w, b, dout = _inputs(B, T, 32, 32, n, 2, seed=400 + B + T + n)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    dout_cl = dout.to(torch.bfloat16).permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)
    ours = _time_major_fwd_bwd(*low, dout_cl, 2)
    assert len(calls) == T - 1
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL_BWD", "0")
    split = _time_major_fwd_bwd(*low, dout_cl, 2)
    assert len(calls) == T - 1
    for name, o, s, e in zip(("h", "dx", "dweight", "dbias"), ours, split, oracle):
        assert torch.isfinite(o).all(), name
        assert _rel(o, e) <= 2 * _rel(s, e) + 1e-3, f"{name}: {_rel(o, e):.3g} vs split path {_rel(s, e):.3g}"


@needs_hopper
def test_backward_kernel_runs_in_the_model_training_step(monkeypatch):
    """The full-size model (n = 30) trained one epoch, fused backend, bf16, eager (each call counted): with
    the default settings level 1's backward takes the kernel (the gradient reaching the op has the output's
    channels-last layout: else the split path would run and this would catch it), and the losses track the split
    path's run from the same weights within bf16's tolerance."""
    from mscred.config import ModelConfig, TrainConfig
    from mscred.model import MSCREDNet
    from mscred.train import Trainer

    seg = torch.rand(140, 3, 30, 30, generator=torch.Generator().manual_seed(0))
    calls = []
    real = conv_cell.step_backward
    monkeypatch.setattr(conv_cell, "step_backward", lambda *a: calls.append(1) or real(*a))
    histories = []
    for setting in ("default", "0"):
        monkeypatch.delenv("MSCRED_LSTM_CONV_CELL_BWD", raising=False)
        if setting == "0":
            monkeypatch.setenv("MSCRED_LSTM_CONV_CELL_BWD", setting)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=30, backend="fused"))
        cfg = TrainConfig(epochs=1, batch_size=64, progress=False, device="cuda", bf16=True, cuda_graphs=False)
        histories.append(Trainer(net, cfg).fit(seg, seg[100:]))
        if setting == "default":
            assert len(calls) >= 4, "level 1's backward did not take the kernel"  # (T - 1 a backward call)
    for ours, split in zip(*histories):
        assert torch.isfinite(torch.tensor(ours["train_loss"]))
        assert ours["train_loss"] == pytest.approx(split["train_loss"], rel=3e-2)
        assert ours["val_loss"] == pytest.approx(split["val_loss"], rel=3e-2)
