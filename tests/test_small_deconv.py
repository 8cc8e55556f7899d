"""deconv1 on its own weight (``ops/triton/small_deconv.py``, the default; MSCRED_DECONV_DIRECT=0 turns it off):
the same values as the convolution with the flipped, transposed weight (``small_conv.conv_act(x,
deconv_as_conv(w))``) bit for bit -- output and every gradient (on the GPU the weight and bias gradients to the
order of their atomic adds) -- by each of the forms (taps beside the channels, and the generic kernels where those are
switched off or do not fit), the float64 transposed convolution as the oracle, and the model's step the same with
the switch on and off. Under the Triton interpreter on the CPU (conftest), bf16 included."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_same_step, fused_training_step, off_and_on

from mscred.ops.triton import small_conv as sc
from mscred.ops.triton import small_deconv as sd

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
CL = torch.channels_last

pytestmark = pytest.mark.skipif(not sc.is_available()[0], reason=f"fused small conv: {sc.is_available()[1]}")


@pytest.mark.parametrize("setting, on", [(None, True), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_DECONV_DIRECT", setting)
    assert sd.enabled() is on


def _inputs(N, CI, CO, k, n, dtype, channels_last_weight, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, CI, n, n, generator=g).to(dtype).contiguous(memory_format=CL).to(DEVICE)
    w = (torch.randn(CI, CO, k, k, generator=g) / (k * CI ** 0.5)).to(dtype)
    w = (w.contiguous(memory_format=CL) if channels_last_weight else w).to(DEVICE)
    b = (torch.randn(CO, generator=g) * 0.1).to(DEVICE)
    dout = torch.randn(N, CO, n, n, generator=g).to(DEVICE)
    return x, w, b, dout


def _fwd_bwd(fn, x, w, b, dout):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    out = fn(x, w, b)
    grads = torch.autograd.grad(out, (x, w, b), dout.to(out.dtype))
    return [out.detach()] + [g.detach() for g in grads]


def _flipped(selu):
    return lambda x, w, b: sc.conv_act(x, sc.deconv_as_conv(w), b, selu)


def _direct(selu):
    return lambda x, w, b: sd.deconv_act(x, w, b, selu)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N, CI, CO, k, n, selu, cl", [
    (2, 64, 3, 3, 7, True, True),    # deconv1's shape: the taps forms (forward and weight gradient)
    (3, 40, 3, 3, 6, False, False),  # an NCHW weight, odd channels
    (1, 20, 5, 3, 5, True, True),    # the taps forward (180 > 64 taps x channels, 45 columns), batch of one
    (2, 8, 3, 3, 9, True, True),     # 72 taps x channels: taps forward; 8 channels in one block
    (2, 24, 2, 5, 8, False, True),   # a 5 x 5 kernel
    (2, 4, 3, 3, 6, True, True),     # 36 taps x channels: the flat generic forms (the flipped copy, as before)
])
def test_equals_the_flipped_convolution_bit_for_bit(dtype, N, CI, CO, k, n, selu, cl):
    x, w, b, dout = _inputs(N, CI, CO, k, n, dtype, cl, seed=N * CI + k)
    want = _fwd_bwd(_flipped(selu), x, w, b, dout)
    got = _fwd_bwd(_direct(selu), x, w, b, dout)
    for name, g, e in zip(("out", "dx", "dweight", "dbias"), got, want):
        assert g.dtype == e.dtype and g.shape == e.shape, name
        if (name in ("dweight", "dbias") and DEVICE == "cuda") or (DEVICE == "cpu" and dtype == torch.float32):
            # Both sum the weight and bias gradients' partial sums with atomic adds, whose order a GPU does not
            # fix: on an H100 (2026-12-05) one dweight element of (3, 40, 3, 3, 6) differed by one rounding in one
            # run of three. On the CPU the interpreter's float32 tl.dot is numpy's matmul, whose OpenBLAS picks its
            # kernel (and so its order of adds) by the CPU: bit for bit on the machines before 2026-12-06, within
            # ~1.2 eps x max on an AVX2-only AMD EPYC (the two forms dot blocks of other shapes).
            bound = 4 * torch.finfo(e.dtype).eps * e.abs().max().item()
            torch.testing.assert_close(g, e, rtol=0, atol=bound, msg=name)
        else:
            assert torch.equal(g, e), name
    assert got[2].stride() == w.stride()  # the gradient in the weight's own layout


@pytest.mark.parametrize("switch", ["MSCRED_SMALL_CONV_FWD_TAPS", "MSCRED_SMALL_CONV_WGRAD_GATHER"])
def test_the_other_forms_too(switch, monkeypatch):
    """With the taps forward or the taps-in-N weight gradient switched off, the generic kernels on the flipped copy
    (forward) or the float32 rows flipped (weight gradient): still bit for bit."""
    monkeypatch.setenv(switch, "0")
    x, w, b, dout = _inputs(2, 64, 3, 3, 7, torch.float32, True, seed=3)
    for g, e in zip(_fwd_bwd(_direct(True), x, w, b, dout), _fwd_bwd(_flipped(True), x, w, b, dout)):
        # (float32 dots in the order of this CPU's OpenBLAS kernel: within a few eps, as in the test above)
        torch.testing.assert_close(g, e, rtol=0, atol=4 * torch.finfo(e.dtype).eps * e.abs().max().item())


def test_float64_is_the_transposed_convolution():
    """The oracle: TF's stride-1 "same" transposed convolution (padding k // 2), + bias, SELU."""
    x, w, b, dout = _inputs(2, 16, 3, 3, 6, torch.float64, True, seed=5)
    b = b.double()  # (the model's bias is float32 beside bf16 weights; here all float64)
    oracle = _fwd_bwd(lambda x, w, b: F.selu(F.conv_transpose2d(x, w, b, padding=1)), x, w, b, dout)
    got = _fwd_bwd(_direct(True), x, w, b, dout)
    for name, g, e in zip(("out", "dx", "dweight", "dbias"), got, oracle):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-12, msg=name)
    x32, w32, b32 = (t.float() for t in (x, w, b))
    for name, g, e in zip(("out", "dx", "dweight", "dbias"), _fwd_bwd(_direct(True), x32, w32, b32, dout), oracle):
        torch.testing.assert_close(g.double(), e, rtol=1e-4, atol=1e-5, msg=name)


def test_bad_weight_is_refused():
    with pytest.raises(ValueError, match="odd square kernel"):
        sd.deconv_act(torch.zeros(1, 8, 4, 4), torch.zeros(8, 3, 2, 2), torch.zeros(3), True)


def test_opcheck():
    x, w, b, dout = _inputs(2, 64, 3, 3, 5, torch.float32, True, seed=7)
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(sd.small_deconv_fused, (x, w, b, True), test_utils=utils)
    out = sd.small_deconv_fused(x, w, b, True)
    for need_dx in (True, False):
        torch.library.opcheck(sd.small_deconv_fused_backward, (dout, x, w, out, True, need_dx),
                              test_utils=("test_schema", "test_faketensor"))


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_bf16_step_trains_the_same_with_it(monkeypatch):
    """The fused model's bf16 training step (small channel counts, n = 12): the loss and every gradient of the switch
    off, bit for bit, and no flipped weight made."""
    run = fused_training_step(12, 2, lambda: torch.autocast(DEVICE, dtype=torch.bfloat16), DEVICE,
                              channels=(4, 8, 8, 16))
    ref, ours, flips = off_and_on(run, monkeypatch, "MSCRED_DECONV_DIRECT", sc, "deconv_as_conv")
    assert not flips
    assert_same_step(ours, ref, bf16=True)


def _instructions(code: dict) -> int:
    return sum(1 for line in code["listing"].splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line))


def test_sm90_kernels_compile_with_the_default_ones_code_size():
    """Compiled for the H200 here (tests/sm90_compile.py) at deconv1's sizes: the transposed gather and the
    reversed-taps weight gradient are kernels of their own beside the default ones (which keep their arguments);
    the gather reads other columns, constants either way, so it has the default kernel's instruction count; the
    weight gradient stores other rows, within a few instructions of the default's."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile
    gather = dict(constants=dict(CO=3, CO_PAD=4, KS=3, COLUMNS=32, SELU=True, HAS_BIAS=True, BLOCK_P=256, o_sc=1),
                  pointers=dict(y_ptr="*fp32", b_ptr="*fp32", o_ptr="*bf16"), num_warps=4)
    codes = [sm90_compile.compiled_code("mscred.ops.triton.small_conv_taps", name, gather)
             for name in ("_taps_sum_kernel", "_taps_sum_transposed_kernel")]
    assert _instructions(codes[0]) == _instructions(codes[1]) > 100
    tile, warps, _, _ = sc.wgrad_launch(64, 3, 3, torch.bfloat16, 30)
    assert tile["TAPS_IN_N"]
    wgrad = dict(constants=dict(x_sc=1, g_sc=1, g2_sc=1, o_sc=1, SELU=True, HAS_G2=False, **tile),
                 pointers={n: "*bf16" for n in ("x_ptr", "g_ptr", "g2_ptr", "o_ptr")}, num_warps=warps)
    default, reversed_ = (_instructions(sm90_compile.compiled_code("mscred.ops.triton.small_conv", name, wgrad))
                          for name in ("_small_conv_wgrad_kernel", "_small_conv_wgrad_reversed_kernel"))
    assert abs(default - reversed_) <= 0.02 * default, (default, reversed_)
