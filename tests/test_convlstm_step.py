"""The training ConvLSTM's step kernels (recurrent convolution inside the cell kernels, ``convlstm_step``).

On the CPU they run under Triton's interpreter in float32 with exact dots (MSCRED_STEP_GEMM=all); on a CUDA
machine the bf16 rows run the compiled kernels at the model's full sizes. Each is checked against the float64
reference (error within 2x the reference's own in that dtype) and against the per-step path it replaces.
"""
from __future__ import annotations

import pytest
import torch

from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_step

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not fused.is_available()[0], reason=f"fused ConvLSTM unavailable: "
                                                  f"{fused.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="bf16 step kernels at full size need a CUDA device")
FB = 1.0


def _inputs(B, T, C, Ch, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, C + Ch, k, k, generator=g, dtype=torch.float64) / (k * (C + Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    dout = torch.randn(B, T, Ch, n, n, generator=g, dtype=torch.float64)
    return x, w, b, dout


def _time_major_nhwc(x: torch.Tensor) -> torch.Tensor:
    """x (B, T, C, H, W) stored (T, B, H, W, C), as the encoder stores it while training."""
    return x.permute(1, 0, 3, 4, 2).contiguous().permute(1, 0, 4, 2, 3)


def _train(x, w, b, dout, dtype, time_major):
    """h and the gradients of x, the weight and the bias through ``fused.train`` in ``dtype``."""
    x = x.to(device=DEVICE, dtype=dtype)
    x = (_time_major_nhwc(x) if time_major else x).detach().requires_grad_()
    w_, b_ = (t.to(device=DEVICE, dtype=dtype).requires_grad_() for t in (w, b))
    y = fused.train(x, w_, b_, FB)
    grads = torch.autograd.grad(y, (x, w_, b_), dout.to(device=DEVICE, dtype=y.dtype))
    return [y.detach()] + [g.detach() for g in grads]


def _reference(x, w, b, dout, dtype):
    """h and the gradients of x, the weight and the bias through the PyTorch reference in ``dtype``."""
    x, w, b = (t.to(device=DEVICE, dtype=dtype).requires_grad_() for t in (x, w, b))
    y = ref.convlstm(x, w, b, FB)
    return [y.detach(), *torch.autograd.grad(y, (x, w, b), dout.to(device=DEVICE, dtype=dtype))]


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


@pytest.mark.parametrize("B, T, C, Ch, n, k", [
    (3, 5, 3, 16, 5, 2), (2, 5, 16, 16, 7, 3), (1, 2, 5, 32, 6, 2), (4, 1, 3, 16, 5, 2), (3, 5, 8, 16, 1, 2)])
@pytest.mark.parametrize("time_major", [True, False])
def test_step_kernels_float32_against_float64_reference(B, T, C, Ch, n, k, time_major, monkeypatch):
    """Forward (always the step kernel) and backward (the step kernel for time-major steps, the cell kernel and
    cuDNN's transposed convolution otherwise) in float32 with exact dots: h and every gradient within 2x the
    float32 reference's error of the float64 oracle, at awkward sizes (a single step, a 1 x 1 map, C != Ch)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_STEP_GEMM", "all")
    assert convlstm_step.runs(torch.float32, "nhwc", Ch, torch.device(DEVICE))
    x, w, b, dout = _inputs(B, T, C, Ch, n, k, seed=B * 100 + T * 10 + n + k)
    oracle = _reference(x, w, b, dout, torch.float64)
    theirs = _reference(x, w, b, dout, torch.float32)
    ours = _train(x, w, b, dout, torch.float32, time_major)
    for name, o, t, r in zip(("h", "dx", "dweight", "dbias"), ours, theirs, oracle):
        assert o.shape == r.shape and torch.isfinite(o).all(), name
        err, ref_err = _rel(o, r), _rel(t, r)
        assert err <= 2 * ref_err + 1e-6, f"{name}: step kernels' error {err:.3g} vs reference error {ref_err:.3g}"


def test_step_kernels_equal_the_per_step_path(monkeypatch):
    """The same float32 level through the step kernels and through the per-step path (MSCRED_STEP_GEMM=0): equal to
    float32 rounding (the recurrent gates are summed in another order, nothing else differs)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x, w, b, dout = _inputs(3, 5, 4, 16, 6, 2, seed=7)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "all")
    ours = _train(x, w, b, dout, torch.float32, time_major=True)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "0")
    theirs = _train(x, w, b, dout, torch.float32, time_major=True)
    for name, o, t in zip(("h", "dx", "dweight", "dbias"), ours, theirs):
        assert _rel(o, t) < 1e-5, f"{name}: relative difference {_rel(o, t):.3g} from the per-step path"


def test_where_the_step_kernels_run(monkeypatch):
    """By default bf16 / fp16 on CUDA, channels-last, 16-64 hidden channels, a power of two; =all adds float32
    (never float64); =0 nowhere; anything else is an error."""
    cuda, cpu = torch.device("cuda"), torch.device("cpu")
    monkeypatch.delenv("MSCRED_STEP_GEMM", raising=False)
    assert convlstm_step.runs(torch.bfloat16, "nhwc", 32, cuda) is (convlstm_step.triton is not None)
    assert not convlstm_step.runs(torch.bfloat16, "nhwc", 32, cpu)
    assert not convlstm_step.runs(torch.float32, "nhwc", 32, cuda)
    assert not convlstm_step.runs(torch.bfloat16, "nchw", 32, cuda)
    for ch in (8, 48, 128):
        assert not convlstm_step.runs(torch.bfloat16, "nhwc", ch, cuda)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "all")
    assert convlstm_step.runs(torch.float32, "nhwc", 16, cpu)
    assert not convlstm_step.runs(torch.float64, "nhwc", 16, cpu)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "0")
    assert not convlstm_step.runs(torch.bfloat16, "nhwc", 32, cuda)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "yes")
    with pytest.raises(ValueError, match="MSCRED_STEP_GEMM"):
        convlstm_step.runs(torch.bfloat16, "nhwc", 32, cuda)


def test_blocks_override(monkeypatch):
    """MSCRED_STEP_BLOCKS sets one direction's tile for one level or all (BK optional); BC never exceeds the
    channels nor BK the gate channels; a malformed entry is an error that says the form."""
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # the tile asked for, not the interpreter's
    monkeypatch.setenv("MSCRED_STEP_BLOCKS", "fwd:32:128/32/8;bwd:*:32/16/2/64")
    assert convlstm_step.blocks("fwd", 32) == (128, 32, 8, convlstm_step.FWD_BLOCKS[32][3])
    assert convlstm_step.blocks("fwd", 64) == convlstm_step.FWD_BLOCKS[64]
    assert convlstm_step.blocks("bwd", 64) == (32, 16, 2, 64)
    assert convlstm_step.blocks("bwd", 16) == (32, 16, 2, 64)
    monkeypatch.setenv("MSCRED_STEP_BLOCKS", "fwd:*:64/64/4/128")
    assert convlstm_step.blocks("fwd", 16) == (64, 16, 4, 64)
    for bad in ("fwd:32:64/32", "fwd:32:a/32/4", "up:32:64/32/4", "64/32/4"):
        monkeypatch.setenv("MSCRED_STEP_BLOCKS", bad)
        with pytest.raises(ValueError, match="DIR:CH:BM/BC/warps"):
            convlstm_step.blocks("fwd", 32)


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (7, 32, 30), (3, 64, 15), (5, 16, 9)])
def test_bf16_full_size_against_oracle_and_per_step_path(B, C, n, monkeypatch):
    """Levels 1-2 of the default model in bf16 at batch 128 and awkward batches (time-major, as the encoder
    trains): within 2x the bf16 reference's error of the float64 oracle, and close to the per-step path."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.delenv("MSCRED_STEP_GEMM", raising=False)
    x, w, b, dout = _inputs(B, 5, C, C, n, 2, seed=B + C + n)
    oracle = _reference(x, w, b, dout, torch.float64)
    theirs = _reference(x, w, b, dout, torch.bfloat16)
    ours = _train(x, w, b, dout, torch.bfloat16, time_major=True)
    monkeypatch.setenv("MSCRED_STEP_GEMM", "0")
    old = _train(x, w, b, dout, torch.bfloat16, time_major=True)
    for name, o, t, r, p in zip(("h", "dx", "dweight", "dbias"), ours, theirs, oracle, old):
        err, ref_err, old_err = _rel(o, r), _rel(t, r), _rel(p, r)
        assert err <= 2 * ref_err + 1e-3, f"{name}: step kernels' error {err:.3g} vs reference error {ref_err:.3g}"
        assert err <= 1.5 * old_err + 1e-3, f"{name}: step kernels' error {err:.3g} vs per-step path's {old_err:.3g}"
