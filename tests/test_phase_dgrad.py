"""The data gradient of a kernel = stride convolution as one GEMM stored through the taps' phases
(``ops/triton/phase_dgrad.py``, MSCRED_PHASE_DGRAD=1, opt-in).

CPU, under the Triton interpreter (conftest): which convolutions it takes; the kernel against a float64
``conv2d`` gradient at odd sizes (row and column tiles cut short, strides 2 and 3, one image, C and O below the dot's
16) in float32 and bf16; the side-gradient convolution's data gradient through it, switched on, against the
switched-off one. CUDA: the same at full size (the encoder's conv3 and conv4 at batch 128 x 5 steps), and the fused
bf16 training step with the switch against without, to rounding, its path taken.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_same_step, fused_training_step, off_and_on

from mscred.ops import wgrad_stream
from mscred.ops.triton import phase_dgrad
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_kernels = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                   reason="the kernel needs Triton (CUDA, or the CPU interpreter)")


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_PHASE_DGRAD", setting)
    assert phase_dgrad.enabled() is on


def _w(o, c, k, dtype=torch.bfloat16):
    return torch.zeros(o, c, k, k, dtype=dtype)


@pytest.mark.parametrize("x_shape, w, stride, padding, transposed, taken", [
    ((2, 64, 16, 16), _w(128, 64, 2), 2, (0, 0), False, True),  # conv3 on its padded input
    ((2, 128, 8, 8), _w(256, 128, 2), 2, (0, 0), False, True),  # conv4
    ((2, 4, 9, 6), _w(5, 4, 3), 3, (0, 0), False, True),  # stride 3
    ((2, 4, 8, 8), _w(5, 4, 2, torch.float32), 2, (0, 0), False, True),
    ((2, 32, 30, 30), _w(64, 32, 3), 2, (1, 1), False, False),  # conv2: overlapping taps, padded
    ((2, 4, 8, 8), _w(5, 4, 2), 2, (1, 1), False, False),  # padded
    ((2, 4, 9, 8), _w(5, 4, 2), 2, (0, 0), False, False),  # a last row no output pixel covers
    ((2, 4, 8, 8), _w(5, 4, 2), 1, (0, 0), False, False),  # stride 1
    ((2, 4, 8, 8), _w(4, 5, 2), 2, (0, 0), True, False),  # transposed
    ((2, 4, 8, 8), _w(5, 4, 2, torch.float64), 2, (0, 0), False, False),  # float64: cuDNN / ATen
])
def test_applies(x_shape, w, stride, padding, transposed, taken):
    assert phase_dgrad.applies(torch.Size(x_shape), w, stride, padding, transposed) is taken


def _case(N, C, H, W, O, s, dtype, device=DEVICE, seed=0):
    gen = torch.Generator().manual_seed(seed)
    dy = torch.randn(N, O, H // s, W // s, generator=gen).to(device=device, dtype=dtype)
    w = torch.randn(O, C, s, s, generator=gen).to(device=device, dtype=dtype)
    x64 = torch.zeros(N, C, H, W, dtype=torch.float64, device=device, requires_grad=True)
    F.conv2d(x64, w.double(), stride=s).backward(dy.double())
    return dy.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last), x64.grad


SMALL = [(3, 5, 8, 6, 7, 2), (1, 16, 16, 16, 32, 2), (2, 4, 9, 6, 3, 3), (5, 64, 16, 16, 128, 2)]
FULL = [(640, 64, 16, 16, 128, 2), (640, 128, 8, 8, 256, 2), (7, 64, 16, 16, 128, 2)]


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N, C, H, W, O, s", FULL if DEVICE == "cuda" else SMALL)
def test_the_kernel_is_the_float64_gradient(N, C, H, W, O, s, dtype, strict_float32):
    dy, w, want = _case(N, C, H, W, O, s, dtype)
    got = phase_dgrad.dgrad(dy, w, torch.Size((N, C, H, W)))
    assert got.shape == (N, C, H, W) and got.dtype == dtype
    assert got.is_contiguous(memory_format=torch.channels_last)
    # each value is a dot of O products of values rounded to dtype: bf16 sums ~O products of |.| ~ 1 in float32,
    # so its error is the output rounding (2^-8 relative) plus the inputs' (the reference takes the rounded inputs)
    rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (1e-2, 1e-2)
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol * O ** 0.5)
    torch.testing.assert_close(phase_dgrad.reference(dy, w, torch.Size((N, C, H, W))).double(), want,
                               rtol=rtol, atol=atol * O ** 0.5)


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_side_gradient_convolution_uses_it(dtype, monkeypatch, strict_float32):
    """Switched on, ``_SideWeightGradConv``'s data gradient goes through the kernel and equals the switched-off
    one's (cuDNN / ATen) to rounding; the weight gradient is untouched."""
    calls = []
    real = phase_dgrad.dgrad
    monkeypatch.setattr(phase_dgrad, "dgrad", lambda *a: calls.append(a[2]) or real(*a))
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 10, 8, generator=gen).to(device=DEVICE, dtype=dtype, memory_format=torch.channels_last)
    w = torch.randn(9, 6, 2, 2, generator=gen).to(device=DEVICE, dtype=dtype, memory_format=torch.channels_last)
    dy = torch.randn(3, 9, 5, 4, generator=gen).to(device=DEVICE, dtype=dtype)
    grads = {}
    for setting in ("0", "1"):
        monkeypatch.setenv("MSCRED_PHASE_DGRAD", setting)
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        wgrad_stream._SideWeightGradConv.apply(xs, ws, 2, (0, 0), False).backward(dy)
        grads[setting] = xs.grad, ws.grad
    assert calls == [torch.Size((3, 6, 10, 8))]
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=1e-2, atol=2e-2)
    torch.testing.assert_close(grads["1"][0], grads["0"][0], **tol)
    torch.testing.assert_close(grads["1"][1], grads["0"][1], rtol=0, atol=0)


@pytest.mark.skipif(DEVICE != "cuda", reason="the fused model's encoder takes the side-gradient convolution on CUDA "
                                            "only (wgrad_stream.conv2d); the op itself is tested above")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_bf16_step_trains_the_same_with_it(monkeypatch):
    run = fused_training_step(30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), DEVICE)
    ref, ours, shapes = off_and_on(run, monkeypatch, "MSCRED_PHASE_DGRAD", phase_dgrad, "applies")
    assert shapes.count(True) == 2, shapes  # conv3 (on its padded copy) and conv4
    assert_same_step(ours, ref, bf16=True)


@pytest.mark.parametrize("tile", ["64/64/4", "128/128/8", "128/256/8"])
def test_the_kernel_compiles_for_the_h200_within_its_shared_memory(tile):
    """Compiled for sm_90 here (tests/sm90_compile.py) at conv3's and conv4's bf16 shapes, at the default tile and the
    benchmark's extremes: shared memory within the H200's, and the dot on the tensor cores (HGMMA/HMMA)."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    block_m, block_n, warps = (int(v) for v in tile.split("/"))
    for O, C, WX in ((128, 64, 16), (256, 128, 8)):
        config = dict(constants=dict(O=O, C=C, S=2, WX=WX, PREC="tf32", BLOCK_M=block_m,
                                     BLOCK_N=min(block_n, 4 * C), BLOCK_K=64),
                      pointers=dict(dy_ptr="*bf16", w_ptr="*bf16", dx_ptr="*bf16"), num_warps=warps)
        code = sm90_compile.compiled_code("mscred.ops.triton.phase_dgrad", "_phase_dgrad_kernel", config)
        assert code["shared"] <= sm90_compile.HOPPER_SHARED_MEMORY, (tile, O, code["shared"])
        assert "HGMMA" in code["listing"] or "HMMA" in code["listing"], (tile, O)
