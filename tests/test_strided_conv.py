"""The training step's strided convolutions on Triton GEMMs of our own (``ops/triton/strided_conv.py``): data
gradients (MSCRED_PHASE_DGRAD), the decoder's forwards (MSCRED_PHASE_DECONV), the encoder's (MSCRED_PHASE_CONV),
all opt-in.

CPU, under the Triton interpreter (conftest): which convolutions each takes and with which kernel; the kernels
against float64 ``conv2d`` / ``conv_transpose2d`` and their gradients at odd sizes (row and column tiles cut short,
strides 2 and 3, kernels 1-5, padding, trailing input rows no tap reads, one image, channels below the dot's 16) in
float32 and bf16; the side-gradient convolution through them, switched on, against switched off, plain and
transposed; the fused model with each switch, its CUDA routing simulated, against the switch off; the kernels
compiled for sm_90 within the H200's shared memory, their dots on the tensor cores. CUDA: the same at full size
(the encoder's conv2-4 at batch 128 x 5 steps, the decoder's deconv4-2 at 128), and the fused bf16 training step
with each switch against without, to rounding, its path taken.
"""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_step_close, fused_training_step, off_and_on

from mscred.ops import wgrad_stream
from mscred.ops.triton import strided_conv
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_kernels = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                   reason="the kernels need Triton (CUDA, or the CPU interpreter)")


@pytest.mark.parametrize("setting, kernels", [(None, ()), ("0", ()), ("off", ()), ("1", strided_conv.KERNELS),
                                               ("columns/taps", ("columns", "taps")), (" Gather ", ("gather",))])
def test_switch(setting, kernels, set_env):
    set_env("MSCRED_PHASE_DGRAD", setting)
    assert [k for k in strided_conv.KERNELS if strided_conv.enabled(k)] == list(kernels)


def test_switch_rejects_unknown_kernels(monkeypatch):
    monkeypatch.setenv("MSCRED_PHASE_DGRAD", "columns/tap")
    with pytest.raises(ValueError, match="MSCRED_PHASE_DGRAD"):
        strided_conv.enabled("columns")


@pytest.mark.parametrize("setting, conv, deconv", [("1", "columns", "gather"), ("columns", "columns", None),
                                                   ("taps", "taps", None), ("columns/taps", "columns", None),
                                                   ("gather", None, "gather"), ("0", None, None)])
def test_chosen_follows_the_switch(setting, conv, deconv, monkeypatch):
    monkeypatch.setenv("MSCRED_PHASE_DGRAD", setting)
    assert strided_conv.chosen(torch.Size((2, 32, 31, 31)), _w(64, 32, 3), 2, (0, 0), False) == conv
    assert strided_conv.chosen(torch.Size((2, 256, 8, 8)), _w(256, 64, 2), 2, (0, 0), True) == deconv
    assert strided_conv.chosen(torch.Size((2, 4, 8, 8)), _w(5, 4, 2), 1, (0, 0), False) is None  # stride 1


def _w(o, c, k, dtype=torch.bfloat16):
    return torch.zeros(o, c, k, k, dtype=dtype)


@pytest.mark.parametrize("x_shape, w, stride, padding, transposed, kernel", [
    ((2, 32, 31, 31), _w(64, 32, 3), 2, (0, 0), False, "columns"),  # conv2 on its padded input
    ((2, 32, 31, 31), _w(64, 32, 3), 2, (1, 1), False, "columns"),  # conv2 at n = 31: symmetric padding
    ((2, 64, 16, 16), _w(128, 64, 2), 2, (0, 0), False, "columns"),  # conv3 on its padded input
    ((2, 128, 8, 8), _w(256, 128, 2), 2, (0, 0), False, "columns"),  # conv4
    ((2, 4, 9, 6), _w(5, 4, 3), 3, (0, 0), False, "columns"),  # stride 3
    ((2, 4, 8, 8), _w(5, 4, 2, torch.float32), 2, (0, 0), False, "columns"),
    ((2, 128, 9, 9), _w(256, 128, 2), 2, (0, 0), False, "columns"),  # conv4 on level 3's bordered buffer
    ((2, 4, 8, 8), _w(5, 4, 2), 2, (1, 1), False, "columns"),  # padded
    ((2, 4, 8, 8), _w(5, 4, 2), 3, (0, 0), False, None),  # kernel below the stride
    ((2, 4, 8, 8), _w(5, 4, 3), 2, (3, 3), False, None),  # padding as wide as the kernel
    ((2, 4, 8, 8), _w(5, 4, 2), 1, (0, 0), False, None),  # stride 1
    ((2, 256, 8, 8), _w(256, 64, 2), 2, (0, 0), True, "gather"),  # deconv3 (transposed: w is (Cin, Cout, k, k))
    ((2, 128, 15, 15), _w(128, 32, 3), 2, (0, 0), True, "gather"),  # deconv2
    ((2, 4, 8, 8), _w(4, 5, 1), 2, (0, 0), True, "gather"),  # transposed: any kernel
    ((2, 4, 8, 8), _w(5, 4, 2), 2, (0, 0), True, None),  # transposed, the weight's first dimension not x's channels
    ((2, 4, 8, 8), _w(4, 5, 3), 1, (0, 0), True, None),  # transposed, stride 1
    ((2, 4, 8, 8), _w(5, 4, 2, torch.float64), 2, (0, 0), False, None),  # float64: cuDNN / ATen
])
def test_which_convolutions_and_which_kernel(x_shape, w, stride, padding, transposed, kernel):
    taken = strided_conv.applies(torch.Size(x_shape), w, stride, padding, transposed)
    assert taken is (kernel is not None)
    if taken:
        assert strided_conv.form(transposed) == kernel


def _assert_float64_close(got, want, dtype, terms):
    """``got`` (dtype, channels-last) against float64 ``want`` of the same rounded inputs: each value sums ``terms``
    products in float32, so float32 (tf32x3 dots) is close to 1e-5 and bf16 to its output's rounding (2^-8
    relative), the absolute part scaled by the sum's typical size (sqrt(terms))."""
    assert got.shape == want.shape and got.dtype == dtype
    assert got.is_contiguous(memory_format=torch.channels_last)
    rtol, atol = (1e-5, 1e-5) if dtype == torch.float32 else (1e-2, 1e-2)
    torch.testing.assert_close(got.double(), want, rtol=rtol, atol=atol * terms ** 0.5)


def _case(N, C, H, W, O, k, s, pad, dtype, device=DEVICE, seed=0):
    gen = torch.Generator().manual_seed(seed)
    ho, wo = (H + 2 * pad - k) // s + 1, (W + 2 * pad - k) // s + 1
    dy = torch.randn(N, O, ho, wo, generator=gen).to(device=device, dtype=dtype)
    w = torch.randn(O, C, k, k, generator=gen).to(device=device, dtype=dtype)
    x64 = torch.zeros(N, C, H, W, dtype=torch.float64, device=device, requires_grad=True)
    F.conv2d(x64, w.double(), stride=s, padding=pad).backward(dy.double())
    return dy.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last), x64.grad


SMALL_SHAPES = [  # N, C, H, W, O, k, s, padding
    (3, 5, 8, 6, 7, 2, 2, 0), (1, 16, 16, 16, 32, 2, 2, 0), (2, 4, 9, 6, 3, 3, 3, 0), (5, 64, 16, 16, 128, 2, 2, 0),
    (2, 5, 9, 7, 6, 2, 2, 0), (3, 16, 9, 9, 32, 2, 2, 0),  # rows / columns no tap reads
    (2, 6, 11, 9, 5, 3, 2, 0), (2, 6, 12, 9, 5, 3, 2, 0), (3, 32, 31, 31, 64, 3, 2, 0), (2, 6, 9, 9, 5, 3, 2, 1),
    (1, 3, 13, 10, 17, 5, 2, 2), (2, 4, 10, 11, 6, 4, 3, 1), (2, 4, 8, 8, 5, 2, 2, 1),
]
SMALL = [(*shape, kernel) for shape in SMALL_SHAPES for kernel in ("columns", "taps")]
FULL = [(640, 32, 31, 31, 64, 3, 2, 0, "columns"), (640, 32, 31, 31, 64, 3, 2, 0, "taps"),
        (640, 64, 16, 16, 128, 2, 2, 0, "columns"), (640, 128, 9, 9, 256, 2, 2, 0, "columns"),
        (640, 64, 16, 16, 128, 2, 2, 0, "taps"), (640, 128, 9, 9, 256, 2, 2, 0, "taps"),
        (7, 32, 31, 31, 64, 3, 2, 1, "columns"), (7, 32, 31, 31, 64, 3, 2, 1, "taps")]


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N, C, H, W, O, k, s, pad, kernel", FULL if DEVICE == "cuda" else SMALL)
def test_the_kernels_are_the_float64_gradient(N, C, H, W, O, k, s, pad, kernel, dtype, strict_float32):
    dy, w, want = _case(N, C, H, W, O, k, s, pad, dtype)
    shape = torch.Size((N, C, H, W))
    _assert_float64_close(strided_conv.dgrad(dy, w, shape, s, (pad, pad), kernel=kernel), want, dtype, k * k * O)
    _assert_float64_close(strided_conv.reference(dy, w, shape, s, (pad, pad)), want, dtype, k * k * O)


TRANSPOSED_SMALL = [  # N, CI, H, W, CO, k, s, padding: deconv (CI -> CO) of an H x W input
    (3, 5, 4, 3, 7, 2, 2, 0), (2, 6, 5, 4, 3, 3, 2, 0), (2, 6, 5, 4, 3, 3, 2, 1), (1, 17, 3, 5, 9, 4, 3, 1),
    (2, 40, 8, 8, 20, 2, 2, 0), (2, 24, 7, 6, 12, 3, 2, 0), (1, 3, 4, 4, 2, 1, 2, 0),
]
TRANSPOSED_FULL = [(128, 256, 8, 8, 64, 2, 2, 0), (128, 128, 15, 15, 32, 3, 2, 0), (128, 256, 4, 4, 128, 2, 2, 0),
                   (7, 128, 15, 15, 32, 3, 2, 0)]


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N, CI, H, W, CO, k, s, pad", TRANSPOSED_FULL if DEVICE == "cuda" else TRANSPOSED_SMALL)
def test_the_transposed_convolutions_gather_is_the_float64_gradient(N, CI, H, W, CO, k, s, pad, dtype,
                                                                     strict_float32):
    gen = torch.Generator().manual_seed(3)
    x64 = torch.zeros(N, CI, H, W, dtype=torch.float64, device=DEVICE, requires_grad=True)
    w = torch.randn(CI, CO, k, k, generator=gen).to(device=DEVICE, dtype=dtype)
    y = F.conv_transpose2d(x64, w.double(), stride=s, padding=pad)
    dy = torch.randn(y.shape, generator=gen).to(device=DEVICE, dtype=dtype)
    y.backward(dy.double())
    dy, w = dy.to(memory_format=torch.channels_last), w.to(memory_format=torch.channels_last)
    shape = torch.Size((N, CI, H, W))
    _assert_float64_close(strided_conv.dgrad(dy, w, shape, s, (pad, pad), transposed=True), x64.grad, dtype,
                          k * k * CO)
    _assert_float64_close(strided_conv.reference(dy, w, shape, s, (pad, pad), True), x64.grad, dtype, k * k * CO)


def _side_convolution_off_and_on(monkeypatch, variable: str, recorded: str, k: int, pad: int, transposed: bool,
                                 dtype):
    """``_SideWeightGradConv`` of a small odd-sized input, forward and backward, with ``variable`` = 0 and = 1:
    ({setting: (output, input gradient, weight gradient)}, the arguments after the first two of every call of
    ``strided_conv.<recorded>`` in the second run)."""
    calls = []
    real = getattr(strided_conv, recorded)
    monkeypatch.setattr(strided_conv, recorded, lambda *a, **kw: calls.append(a[2:]) or real(*a, **kw))
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(3, 6, 11, 8, generator=gen).to(device=DEVICE, dtype=dtype, memory_format=torch.channels_last)
    w = torch.randn(*((6, 9) if transposed else (9, 6)), k, k, generator=gen).to(
        device=DEVICE, dtype=dtype, memory_format=torch.channels_last)
    conv = F.conv_transpose2d if transposed else F.conv2d
    dy = torch.randn(conv(x.float(), w.float(), stride=2, padding=pad).shape, generator=gen).to(
        device=DEVICE, dtype=dtype)
    runs = {}
    for setting in ("0", "1"):
        monkeypatch.setenv(variable, setting)
        calls.clear()
        xs, ws = x.clone().requires_grad_(), w.clone().requires_grad_()
        y = wgrad_stream._SideWeightGradConv.apply(xs, ws, 2, (pad, pad), transposed)
        y.backward(dy)
        runs[setting] = y.detach(), xs.grad, ws.grad
    return runs, calls


def _assert_same_runs(runs, dtype, exact_weight_grad: bool = False):
    """The switch-on run's (output, input gradient, weight gradient) against the switch-off run's: to rounding, and
    the weight gradient bit for bit where asked -- on the CPU only, as cuDNN may pick another algorithm per call."""
    for name, got, want in zip(("output", "input gradient", "weight gradient"), runs["1"], runs["0"]):
        # bf16: a few roundings of the largest value, the sums of both being of terms that large (ATen's CPU bf16
        # convolution takes another path on an AVX2-only machine: 1.7 eps x max apart there, 2026-12-06)
        tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else \
            dict(rtol=1e-2, atol=max(2e-2, 4 * torch.finfo(torch.bfloat16).eps * want.float().abs().max().item()))
        exact = exact_weight_grad and name == "weight gradient" and DEVICE == "cpu"
        torch.testing.assert_close(got, want, **(dict(rtol=0, atol=0) if exact else tol), msg=lambda m: f"{name}: {m}")


@needs_kernels
@pytest.mark.parametrize("k, pad, transposed", [(2, 0, False), (3, 1, False), (3, 0, False), (2, 0, True),
                                                (3, 0, True)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_side_gradient_convolution_uses_it(k, pad, transposed, dtype, monkeypatch, strict_float32):
    """Switched on, ``_SideWeightGradConv``'s data gradient goes through the kernels and equals the switched-off
    one's (cuDNN / ATen) to rounding; the forward and the weight gradient are untouched."""
    runs, calls = _side_convolution_off_and_on(monkeypatch, "MSCRED_PHASE_DGRAD", "dgrad", k, pad, transposed, dtype)
    assert calls == [(torch.Size((3, 6, 11, 8)), 2, [pad, pad], transposed)]
    _assert_same_runs(runs, dtype, exact_weight_grad=True)




@pytest.mark.parametrize("tile", ["64/64/4", "128/128/8", "128/256/8"])
def test_the_kernels_compile_for_the_h200_within_its_shared_memory(tile):
    """Compiled for sm_90 here (tests/sm90_compile.py) at conv2-4's and deconv3-2's bf16 shapes, at the default
    tiles and the benchmark's extremes: shared memory within the H200's, the dots on the tensor cores
    (HGMMA/HMMA)."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    block_m, block_n, warps = (int(v) for v in tile.split("/"))
    pointers = dict(dy_ptr="*bf16", w_ptr="*bf16", dx_ptr="*bf16")
    configs = [("_columns_kernel", dict(O=O, C=C, K=k, S=2, TMAX=-(-k // 2), WX=WX, PREC="tf32", BLOCK_M=block_m,
                                        BLOCK_N=min(block_n, 4 * C), BLOCK_K=64))
               for O, C, k, WX in ((128, 64, 2, 16), (256, 128, 2, 9), (64, 32, 3, 31))]
    configs.append(("_taps_kernel", dict(O=64, C=32, K=3, S=2, TMAX=2, PREC="tf32", BLOCK_M=block_m,
                                         BLOCK_N=32, BLOCK_K=64)))
    configs += [("_gather_kernel", dict(CI=CI, CO=CO, K=k, S=2, PREC="tf32", BLOCK_M=block_m,
                                        BLOCK_N=min(block_n, CI), BLOCK_K=min(64, CO)))
                for CI, CO, k in ((256, 64, 2), (128, 32, 3))]
    for name, constants in configs:
        code = sm90_compile.compiled_code("mscred.ops.triton.strided_conv", name,
                                          dict(constants=constants, pointers=pointers, num_warps=warps))
        assert code["shared"] <= sm90_compile.HOPPER_SHARED_MEMORY, (tile, name, code["shared"])
        assert "HGMMA" in code["listing"] or "HMMA" in code["listing"], (tile, name)


FORWARD_SWITCHES = {  # switch: its test, the forward it routes through the kernels (conv_transpose / conv)
    "MSCRED_PHASE_DECONV": (strided_conv.deconv_enabled, "conv_transpose"),
    "MSCRED_PHASE_CONV": (strided_conv.conv_enabled, "conv"),
}


@pytest.mark.parametrize("variable", sorted(FORWARD_SWITCHES))
@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_forward_switches(variable, setting, on, set_env):
    set_env(variable, setting)
    assert FORWARD_SWITCHES[variable][0]() is on


DECONV_SMALL = [  # N, CI, H, W, CO, k, s, padding: a transposed convolution (CI -> CO) of an H x W input
    (3, 5, 4, 3, 7, 2, 2, 0), (2, 6, 5, 4, 3, 3, 2, 0), (2, 6, 5, 4, 3, 3, 2, 1), (1, 17, 3, 5, 9, 4, 3, 1),
    (2, 40, 4, 4, 20, 2, 2, 0), (2, 24, 7, 6, 12, 3, 2, 0),
]
DECONV_FULL = [(128, 256, 4, 4, 128, 2, 2, 0), (128, 256, 8, 8, 64, 2, 2, 0), (128, 128, 15, 15, 32, 3, 2, 0),
               (7, 128, 15, 15, 32, 3, 2, 0)]
CONV_SMALL = [  # N, CI, H, W, CO, k, s, padding: a convolution (CI -> CO) of an H x W input
    (3, 5, 8, 6, 7, 2, 2, 0), (2, 6, 11, 9, 5, 3, 2, 0), (2, 6, 9, 9, 5, 3, 2, 1), (1, 3, 13, 10, 17, 5, 2, 2),
    (2, 4, 10, 11, 6, 4, 3, 1), (3, 16, 9, 9, 32, 2, 2, 0), (2, 8, 31, 31, 16, 3, 2, 0),
]
CONV_FULL = [(640, 32, 31, 31, 64, 3, 2, 0), (640, 64, 16, 16, 128, 2, 2, 0), (640, 128, 9, 9, 256, 2, 2, 0),
             (7, 32, 31, 31, 64, 3, 2, 1)]
FORWARDS = {  # kind: (applies, the kernels' forward, the reference, the weight's shape from (CI, CO))
    "deconv": (strided_conv.deconv_applies, strided_conv.conv_transpose, F.conv_transpose2d, lambda ci, co: (ci, co)),
    "conv": (strided_conv.conv_applies, strided_conv.conv, F.conv2d, lambda ci, co: (co, ci)),
}
FORWARD_CASES = ([("deconv", *c) for c in (DECONV_FULL if DEVICE == "cuda" else DECONV_SMALL)]
                 + [("conv", *c) for c in (CONV_FULL if DEVICE == "cuda" else CONV_SMALL)])


@needs_kernels
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("kind, N, CI, H, W, CO, k, s, pad", FORWARD_CASES)
def test_the_forwards_are_the_float64_ones(kind, N, CI, H, W, CO, k, s, pad, dtype, strict_float32):
    """``conv_transpose`` and ``conv`` (the decoder's deconv4-2 and the encoder's conv2-4 in the step, on their
    padded / bordered inputs, at full size on CUDA) against float64 ``conv_transpose2d`` / ``conv2d`` of the same
    rounded inputs."""
    applies, forward, reference, weight_shape = FORWARDS[kind]
    gen = torch.Generator().manual_seed(4 if kind == "deconv" else 6)
    x = torch.randn(N, CI, H, W, generator=gen).to(device=DEVICE, dtype=dtype, memory_format=torch.channels_last)
    w = torch.randn(*weight_shape(CI, CO), k, k, generator=gen).to(device=DEVICE, dtype=dtype,
                                                                   memory_format=torch.channels_last)
    assert applies(x, w, s, (pad, pad))
    _assert_float64_close(forward(x, w, s, (pad, pad)), reference(x.double(), w.double(), stride=s, padding=pad),
                          dtype, k * k * CI)


def test_deconv_applies_only_where_a_kernel_computes_it():
    x = torch.zeros(2, 8, 5, 5, dtype=torch.bfloat16, device=DEVICE)
    fused = runs_fused(x)
    assert strided_conv.deconv_applies(x, torch.zeros(8, 4, 3, 3, dtype=torch.bfloat16, device=DEVICE), 2, (0, 0)) \
        is fused
    assert not strided_conv.deconv_applies(x, torch.zeros(8, 4, 3, 3, dtype=torch.bfloat16, device=DEVICE), 1, (0, 0))
    assert not strided_conv.deconv_applies(x, torch.zeros(8, 4, 3, 3, dtype=torch.float32, device=DEVICE), 2, (0, 0))
    assert not strided_conv.deconv_applies(x, torch.zeros(8, 4, 1, 1, dtype=torch.bfloat16, device=DEVICE), 2, (0, 0))


def test_conv_applies_only_where_the_kernel_computes_it():
    x = torch.zeros(2, 8, 5, 5, dtype=torch.bfloat16, device=DEVICE)
    w = torch.zeros(4, 8, 3, 3, dtype=torch.bfloat16, device=DEVICE)
    assert strided_conv.conv_applies(x, w, 2, (0, 0)) is runs_fused(x)
    assert not strided_conv.conv_applies(x, w, 1, (0, 0))  # stride 1
    assert not strided_conv.conv_applies(x, w.float(), 2, (0, 0))  # dtypes differ
    assert not strided_conv.conv_applies(x, w, 2, (3, 3))  # padding as wide as the kernel
    assert not strided_conv.conv_applies(x[:, :, :2, :2], w, 2, (0, 0))  # no output


@needs_kernels
@pytest.mark.parametrize("variable, transposed, k, pad, dtype", [
    ("MSCRED_PHASE_DECONV", True, 2, 0, torch.float32), ("MSCRED_PHASE_DECONV", True, 3, 0, torch.float32),
    ("MSCRED_PHASE_DECONV", True, 3, 0, torch.bfloat16), ("MSCRED_PHASE_CONV", False, 2, 0, torch.float32),
    ("MSCRED_PHASE_CONV", False, 3, 1, torch.float32), ("MSCRED_PHASE_CONV", False, 3, 0, torch.bfloat16)])
def test_the_side_gradient_convolution_runs_its_forward_on_them(variable, transposed, k, pad, dtype, monkeypatch,
                                                                 strict_float32):
    """Switched on, ``_SideWeightGradConv``'s forward goes through ``conv_transpose`` / ``conv`` and equals cuDNN's /
    ATen's to rounding, and its gradients (not these kernels' business) are the same."""
    runs, calls = _side_convolution_off_and_on(monkeypatch, variable, FORWARD_SWITCHES[variable][1], k, pad,
                                               transposed, dtype)
    assert calls == [(2, (pad, pad))]
    _assert_same_runs(runs, dtype)


STEP_PATHS = {  # switch: (the strided_conv function recorded, what its calls in the step return)
    # conv2-4 (on their padded copies and level 3's bordered buffer) on the columns kernel, deconv4-2 gathered (conv1
    # and deconv1 run on small_conv, not through here)
    "MSCRED_PHASE_DGRAD": ("chosen", ["columns", "columns", "columns", "gather", "gather", "gather"]),
    "MSCRED_PHASE_DECONV": ("deconv_applies", [True, True, True]),  # deconv4-2's forwards
    "MSCRED_PHASE_CONV": ("conv_applies", [True, True, True]),  # conv2-4's forwards
}


@pytest.mark.skipif(DEVICE != "cuda", reason="the fused model's encoder and decoder take the side-gradient "
                                            "convolution on CUDA only (wgrad_stream.conv2d); the ops are tested above")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("variable", sorted(STEP_PATHS))
def test_the_bf16_step_trains_the_same_with_it(variable, monkeypatch):
    """The fused bf16 model at n = 30: the loss and every gradient with the switch as without (to rounding), and
    its path taken where it should be."""
    recorded, expected = STEP_PATHS[variable]
    run = fused_training_step(30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), DEVICE)
    ref, ours, returned = off_and_on(run, monkeypatch, variable, strided_conv, recorded)
    assert sorted(returned, key=str) == sorted(expected, key=str), returned
    assert_step_close(ours, ref, bf16=True)


CPU_ROUTED = {  # switch: what the recorded function returns for the small float32 model's side convolutions
    # conv2-4 on the columns kernel, deconv4-2 gathered, deconv1 (stride 1, on cuDNN / ATen in float32) not taken
    "MSCRED_PHASE_DGRAD": ["columns", "columns", "columns", "gather", "gather", "gather", None],
    "MSCRED_PHASE_DECONV": [True, True, True, False],  # deconv4-2's forwards; deconv1 not
    "MSCRED_PHASE_CONV": [True, True, True, False],  # conv2-4's forwards; conv1 (stride 1) not
}


@needs_kernels
@pytest.mark.skipif(DEVICE == "cuda", reason="on CUDA the model takes these paths itself "
                                            "(test_the_bf16_step_trains_the_same_with_it)")
@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
@pytest.mark.parametrize("variable", sorted(CPU_ROUTED))
def test_the_fused_model_trains_the_same_with_it_routed_on_the_cpu(variable, monkeypatch, strict_float32):
    """The model's convolutions take the side-gradient path on CUDA only (``wgrad_stream.conv2d``); here that routing
    is simulated -- the switch on, the side stream's work run in place, every weight the cast cache's -- so that the
    fused float32 model (n = 30, small channels) runs through the kernels under the interpreter: its loss and every
    gradient equal the switch-off run's to float32 rounding (another order of sums), the path taken at every strided
    convolution."""
    from mscred.ops import weight_cache

    monkeypatch.setattr(wgrad_stream, "switched", lambda x: True)
    monkeypatch.setattr(wgrad_stream, "run", lambda fn, reads: fn())
    monkeypatch.setattr(weight_cache, "made_here", lambda *tensors: True)
    run = fused_training_step(30, 2, contextlib.nullcontext, "cpu", channels=(4, 8, 8, 16))
    ref, ours, returned = off_and_on(run, monkeypatch, variable, strided_conv, STEP_PATHS[variable][0])
    assert sorted(returned, key=str) == sorted(CPU_ROUTED[variable], key=str), returned
    assert_step_close(ours, ref, bf16=False)
