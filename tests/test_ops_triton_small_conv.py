"""The small-channel convolution op (encoder conv1, decoder deconv1) against float64 PyTorch, forward and every
gradient (x, weight, bias).

On a CPU machine conftest.py switches Triton's interpreter on: float32 at small, awkward sizes (n = 5, 16; batch 1
and prime; 3 -> 32 and 64 -> 3 and odd channel counts; channels-last and NCHW input; with and without SELU and
bias). On CUDA the full-size rows (batch 640 / 128 at n = 30, float32 and bf16) run too, where the op's error must
stay within 2x cuDNN's own error in that dtype (plus a small floor).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet
from mscred.ops.triton import small_conv as sc

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not sc.is_available()[0], reason=f"fused small conv unavailable: "
                                                                  f"{sc.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size and bf16 rows need a CUDA device")


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _grads(fn, x, w, b, dout, selu):
    x, w = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
    b = None if b is None else b.detach().clone().requires_grad_()
    out = fn(x, w, b, selu)
    inputs = (x, w) if b is None else (x, w, b)
    return (out.detach(), *torch.autograd.grad(out, inputs, dout.to(out.dtype)))


def _check(N, CI, CO, n, selu, dtype, seed, channels_last=True, bias=True, k=3, floor=2e-6):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(N, CI, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(CO, CI, k, k, generator=g, dtype=torch.float64) * (2.0 / (CI * k * k)) ** 0.5
    b = torch.randn(CO, generator=g, dtype=torch.float64) * 0.5 if bias else None
    dout = torch.randn(N, CO, n, n, generator=g, dtype=torch.float64)
    x, w, dout = x.to(DEVICE), w.to(DEVICE), dout.to(DEVICE)
    b = None if b is None else b.to(DEVICE)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    oracle = _grads(sc.reference, x, w, b, dout, selu)
    # bf16 as under autocast: x and weight in bf16, the master bias in float32 (its gradient must come back so).
    bias_dtype = torch.float32 if dtype == torch.bfloat16 else dtype
    bb = None if b is None else b.to(bias_dtype)
    ours = _grads(sc.conv_act, x.to(dtype), w.to(dtype), bb, dout.to(dtype), selu)
    theirs = _grads(sc.reference, x.to(dtype), w.to(dtype), None if b is None else b.to(dtype), dout.to(dtype), selu)
    assert ours[0].shape == (N, CO, n, n) and ours[0].dtype == dtype
    assert ours[0].is_contiguous(memory_format=torch.channels_last)
    if b is not None:
        assert ours[3].dtype == bias_dtype
    report, bad = [], []
    for name, o, t, r in zip(("out", "dx", "dweight", "dbias"), ours, theirs, oracle):
        assert o.shape == r.shape and torch.isfinite(o).all(), name
        err, ref_err = _rel(o, r), _rel(t, r)
        report.append(f"{name} {err:.3g} (PyTorch {ref_err:.3g})")
        if err > 2 * ref_err + floor:
            bad.append(name)
    assert not bad, f"{bad} over 2x PyTorch's error + {floor:g}: " + ", ".join(report)


@pytest.mark.parametrize("selu", [True, False])
@pytest.mark.parametrize("N,CI,CO,n", [(2, 3, 32, 5), (1, 3, 32, 16), (3, 64, 3, 5), (7, 5, 20, 6), (2, 6, 3, 9)])
def test_small_sizes_float32(N, CI, CO, n, selu):
    _check(N, CI, CO, n, selu, torch.float32, seed=N * 100 + CI + CO + n)


def test_nchw_input_without_bias():
    _check(2, 3, 17, 7, True, torch.float32, seed=5, channels_last=False, bias=False)


def test_kernel_5():
    _check(2, 3, 8, 7, False, torch.float32, seed=6, k=5)


def test_flat_taps_without_a_spare_row():
    # 1 x 1 over 16 channels: K = 16 fills the one flat block, so the bias gradient is summed beside the product
    # (the 3-channel layers have K = 27 of 32 and get it as the product's spare row).
    _check(3, 16, 5, 6, True, torch.float32, seed=8, k=1)


@pytest.mark.parametrize("tile", ["32/2/1", "64/4/2"])
def test_weight_gradient_tile_override(monkeypatch, tile):
    """MSCRED_SMALL_CONV_WGRAD_TILE="BLOCK_P/warps/programs-per-SM" (A/B runs): small tiles over few programs make
    each program loop over many tiles (the flat layer with the bias as the product's spare row, the per-tap layer
    with it summed beside); the gradients stay the oracle's."""
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_TILE", tile)
    _check(3, 3, 32, 9, True, torch.float32, seed=9)
    _check(2, 64, 3, 7, True, torch.float32, seed=10)


def test_weight_gradient_tiles_narrower_than_the_map(monkeypatch):
    """Maps wider than a tile (21 columns, tiles of 16 pixels in one row): two tiles a row, the second 5 columns
    wide, so the gather's column masks move with the tile (x0 = 16); flat (conv1-like), per tap, and taps-in-N."""
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_TILE", "16/2/3")
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_GATHER_TILE", "16/2/3")
    assert sc.wgrad_tile_shape(16, 21) == (1, 16)
    _check(2, 3, 32, 21, True, torch.float32, seed=11)
    _check(1, 64, 3, 21, False, torch.float32, seed=12)
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_GATHER", "0")
    _check(1, 64, 3, 19, True, torch.float32, seed=13)


@pytest.mark.parametrize("N,CI,CO,k,selu", [(3, 64, 3, 3, False), (2, 80, 3, 3, True), (2, 20, 7, 3, True),
                                          (1, 24, 2, 5, False)])
def test_weight_gradient_with_the_taps_beside_the_output_channels(N, CI, CO, k, selu, monkeypatch):
    """Many input, few output channels (deconv1: 64 -> 3): the weight gradient reads x once and gathers dz at every
    tap's shift (taps x output channels as the product's columns), with two channel blocks (80), all 64 columns
    used (9 x 7 = 63), and a 5 x 5 kernel (25 x 2 = 50); and the per-tap form it replaced, on the same layers."""
    assert sc.taps_in_n(CI, CO, k)
    _check(N, CI, CO, 7, selu, torch.float32, seed=CI + CO + k)
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_GATHER_TILE", "32/2/1")  # one program looping over every tile
    _check(N, CI, CO, 7, selu, torch.float32, seed=CI + CO + k + 1)
    monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_GATHER", "0")
    assert not sc.taps_in_n(CI, CO, k)
    _check(N, CI, CO, 7, selu, torch.float32, seed=CI + CO + k + 2)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_model_launches_fit_the_h200_shared_memory(monkeypatch, dtype):
    """Every kernel launch of the model's two small-channel layers (conv1 3 -> 32 with its bordered output, deconv1
    64 -> 3): the forward, and the weight gradient in the form each takes (FLAT for conv1; taps-in-N for deconv1,
    and per tap with MSCRED_SMALL_CONV_WGRAD_GATHER=0), compiled for sm_90 here (tests/sm90_compile.py: the
    interpreter checks no such limit) within the H200's 227 KB of shared memory. float32's taps-in-N tile at the
    bf16 default of 256 pixels asked for 256-320 KB (results/small_conv_confirm/): the launch halves it to fit."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    pointer = "*bf16" if dtype == torch.bfloat16 else "*fp32"
    forward, wgrad, names = [], [], []
    for ci, co, border in ((3, 32, True), (64, 3, False)):
        forward.append(dict(constants=dict(x_sc=1, o_sc=1, SELU=True, HAS_BIAS=True, BORDER=border,
                                           **sc.fwd_constants(ci, co, 3, dtype)),
                            pointers=dict(x_ptr=pointer, w_ptr=pointer, o_ptr=pointer), num_warps=sc.FWD_WARPS))
        for gather_switch in ("1", "0") if sc.taps_in_n(ci, co, 3) else ("1",):
            monkeypatch.setenv("MSCRED_SMALL_CONV_WGRAD_GATHER", gather_switch)
            tile, warps, _, _ = sc.wgrad_launch(ci, co, 3, dtype, 30)
            names.append((ci, co, "taps-in-N" if tile["TAPS_IN_N"] else "flat" if tile["FLAT"] else "per tap",
                          tile["ROWS"] * tile["COLS"]))
            wgrad.append(dict(constants=dict(x_sc=1, g_sc=1, g2_sc=1, o_sc=1, SELU=True, HAS_G2=True, **tile),
                              pointers={name: pointer for name in ("x_ptr", "g_ptr", "g2_ptr", "o_ptr")},
                              num_warps=warps))
    assert [form for _, _, form, _ in names] == ["flat", "taps-in-N", "per tap"]
    fwd_shared = sm90_compile.shared_bytes("mscred.ops.triton.small_conv", "_small_conv_fwd_kernel", forward)
    wgrad_shared = sm90_compile.shared_bytes("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", wgrad)
    assert max(fwd_shared) <= sm90_compile.HOPPER_SHARED_MEMORY, fwd_shared
    assert max(wgrad_shared) <= sm90_compile.HOPPER_SHARED_MEMORY, list(zip(names, wgrad_shared))


@pytest.mark.parametrize("N,CI,CO,k,n,selu", [(3, 64, 3, 3, 7, False), (2, 80, 3, 3, 6, True),
                                             (2, 20, 7, 3, 5, True), (1, 24, 2, 5, 8, False),
                                             (2, 64, 1, 3, 9, True)])
def test_forward_with_the_taps_beside_the_output_channels(N, CI, CO, k, n, selu, monkeypatch):
    """Many input, few output channels (deconv1: 64 -> 3): the forward's GEMM over input pixels into k*k*Co
    partial sums (two channel blocks at 80, 63 of 64 columns at 9 x 7, a 5 x 5 kernel, a single output channel's
    9 columns padded to 16), then their gather; against float64 with every gradient, on NCHW input too, and equal
    to the generic forward it replaced (MSCRED_SMALL_CONV_FWD_TAPS=0) to float32 rounding."""
    from mscred.ops.triton import small_conv_taps

    assert small_conv_taps.suits(CI, CO, k)
    _check(N, CI, CO, n, selu, torch.float32, seed=CI + CO + k + 7, k=k)
    _check(N, CI, CO, n, selu, torch.float32, seed=CI + CO + k + 8, k=k, channels_last=False, bias=False)
    g = torch.Generator().manual_seed(CI * CO)
    x = torch.randn(N, CI, n, n, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(CO, CI, k, k, generator=g) * (2.0 / (CI * k * k)) ** 0.5).to(DEVICE)
    b = torch.randn(CO, generator=g).to(DEVICE)
    taps = sc.conv_act(x, w, b, selu, out_pads=(1, 0, 0, 2))
    monkeypatch.setenv("MSCRED_SMALL_CONV_FWD_TAPS", "0")
    assert not small_conv_taps.suits(CI, CO, k)
    generic = sc.conv_act(x, w, b, selu, out_pads=(1, 0, 0, 2))
    torch.testing.assert_close(taps, generic, rtol=1e-5, atol=1e-6)
    assert (taps[:, :, :1] == 0).all() and (taps[..., -2:] == 0).all()  # the border written, zero


def test_forward_taps_only_where_the_partial_sums_fit_a_row():
    from mscred.ops.triton import small_conv_taps

    assert small_conv_taps.suits(64, 3, 3) and small_conv_taps.suits(64, 7, 3) and small_conv_taps.suits(16, 2, 5)
    assert not small_conv_taps.suits(3, 32, 3)  # flat: the generic kernel reads all taps in one block already
    assert not small_conv_taps.suits(64, 8, 3) and not small_conv_taps.suits(16, 3, 5)  # 72, 75 columns


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_forward_taps_kernels_compile_for_sm90(dtype):
    """deconv1's two forward kernels compiled for sm_90 here (tests/sm90_compile.py), within the H200's shared
    memory; their launch numbers as ``small_conv_taps.forward`` sets them."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    from mscred.ops.triton import small_conv_taps as st

    pointer = "*bf16" if dtype == torch.bfloat16 else "*fp32"
    gemm = dict(constants=dict(x_sc=1, CI=64, NT=27, COLUMNS=32, PREC=sc._precision(dtype),
                               BLOCK_P=st.GEMM_BLOCK_P, BLOCK_K=64),
                pointers=dict(x_ptr=pointer, w_ptr=pointer, y_ptr="*fp32"), num_warps=st.GEMM_WARPS)
    gather = dict(constants=dict(o_sc=1, CO=3, CO_PAD=4, KS=3, COLUMNS=32, SELU=False, HAS_BIAS=True,
                                 BLOCK_P=st.SUM_BLOCK_P),
                  pointers=dict(y_ptr="*fp32", b_ptr="*fp32", o_ptr=pointer), num_warps=st.SUM_WARPS)
    for kernel, config in (("_taps_gemm_kernel", gemm), ("_taps_sum_kernel", gather)):
        shared = sm90_compile.shared_bytes("mscred.ops.triton.small_conv_taps", kernel, [config])
        assert shared[0] <= sm90_compile.HOPPER_SHARED_MEMORY, (kernel, shared)


def test_taps_in_n_only_for_many_inputs_and_few_outputs():
    assert sc.taps_in_n(64, 3, 3) and sc.taps_in_n(64, 7, 3) and sc.taps_in_n(16, 2, 5)
    assert not sc.taps_in_n(3, 32, 3)  # flat: all taps of the input channels in one block already
    assert not sc.taps_in_n(64, 8, 3) and not sc.taps_in_n(16, 3, 5)  # 72 and 75 columns: over one block of 64


def test_deconv_as_conv_is_the_cropped_transposed_convolution():
    """What the decoder relies on: stride-1 conv_transpose2d, cropped by k // 2 on each side (TF "same") equals
    conv2d with the transposed, flipped kernel and padding k // 2."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(3, 6, 9, 9, generator=g, dtype=torch.float64)
    w = torch.randn(6, 3, 3, 3, generator=g, dtype=torch.float64)  # conv_transpose2d layout (in, out, k, k)
    full = F.conv_transpose2d(x, w, stride=1)  # (3, 3, 11, 11)
    torch.testing.assert_close(F.conv2d(x, sc.deconv_as_conv(w), padding=1), full[:, :, 1:10, 1:10])


def test_suits_only_the_weak_layers_in_half_precision(monkeypatch):
    bf16, f32 = torch.bfloat16, torch.float32
    assert sc.suits(3, 32, 3, 1, bf16) and sc.suits(64, 3, 3, 1, bf16) and sc.suits(3, 32, 3, 1, torch.float16)
    assert not sc.suits(32, 64, 3, 2, bf16) and not sc.suits(3, 32, 3, 2, bf16) and not sc.suits(3, 32, 2, 1, bf16)
    assert not sc.suits(8, 32, 3, 1, bf16) and not sc.suits(3, 128, 3, 1, bf16)
    assert not sc.suits(3, 32, 3, 1, f32) and not sc.suits(3, 32, 3, 1, torch.float64)  # cuDNN is faster there
    monkeypatch.setenv("MSCRED_SMALL_CONV", "all")
    assert sc.suits(3, 32, 3, 1, f32) and not sc.suits(3, 32, 3, 1, torch.float64)
    monkeypatch.setenv("MSCRED_SMALL_CONV", "0")
    assert not sc.suits(3, 32, 3, 1, bf16)


def test_bad_weight_is_refused():
    with pytest.raises(ValueError, match="odd square kernel"):
        sc.conv_act(torch.zeros(1, 3, 4, 4), torch.zeros(8, 3, 2, 2), None, True)


@pytest.mark.parametrize("n", [4, 5, 6, 9])
def test_fused_model_with_small_convs_matches_reference_float32(n, monkeypatch):
    """A whole fused MSCREDNet (conv1 and deconv1 on this op, forced in float32 by MSCRED_SMALL_CONV=all, which
    compares to float64 tightly; the bf16 model's run under the interpreter is test_interpreter_bf16.py's; the
    small ConvLSTM levels on their padded copies; the stride-2 TF padding by
    ops/padding.py) against the reference network in float64: output and every parameter's gradient, same weights,
    at awkward sizes (odd n: every asymmetric padding and crop)."""
    monkeypatch.setenv("MSCRED_SMALL_CONV", "all")
    torch.manual_seed(n)
    cfg = dict(n_sensors=n, channels=(3, 4, 4, 5), n_scales=3)
    ref = MSCREDNet(ModelConfig(**cfg, backend="reference")).double().to(DEVICE)
    ours = MSCREDNet(ModelConfig(**cfg, backend="fused")).to(DEVICE)
    ours.load_state_dict({k: v.float() for k, v in ref.state_dict().items()})
    x = torch.rand(2, 5, 3, n, n, dtype=torch.float64, device=DEVICE)
    out_ref, out = ref(x), ours(x.float())
    F.mse_loss(out_ref, x[:, -1]).backward()
    F.mse_loss(out.double(), x[:, -1]).backward()
    assert _rel(out, out_ref) < 1e-5
    for (name, p), q in zip(ref.named_parameters(), ours.parameters()):
        assert _rel(q.grad, p.grad) < 1e-4, name


@needs_cuda
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("N,CI,CO,selu", [(640, 3, 32, True), (128, 64, 3, False), (131, 3, 32, True)])
def test_full_size(N, CI, CO, selu, dtype):
    # float32 floor 1e-5: the float32 dots (tf32x3 now; "ieee" before) sum each output's K = 9 * Ci products in one
    # chain; at K = 288 (conv1's dx, which the model never asks for: its input is the data) the exact dots measured
    # 3.7e-6 on the H200 where cuDNN's float32 got 1.5e-7. Plain TF32 is ~1e-3 for both.
    _check(N, CI, CO, 30, selu, dtype, seed=N + CI, floor=1e-5)


@pytest.mark.parametrize("selu", [True, False])
def test_opcheck_schema_fake_and_autograd(selu):
    """torch.library.opcheck: schema, fake (meta) kernel, autograd registration of the custom op."""
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 3, 5, 5, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(16, 3, 3, 3, generator=g) * 0.3).to(DEVICE)
    b = torch.randn(16, generator=g).to(DEVICE)
    for t in (x, w, b):
        t.requires_grad_()
    for pads in ([0, 0, 0, 0], [0, 1, 0, 1]):
        torch.library.opcheck(sc.small_conv_fused, (x, w, b, selu, pads),
                              test_utils=("test_schema", "test_autograd_registration", "test_faketensor"))


@pytest.mark.parametrize("out_pads", [(0, 1, 0, 1), (1, 1, 1, 1)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_bordered_output_is_the_padded_result(out_pads, dtype):
    """out_pads: the output inside a zero border, equal to padding the plain output (the border exactly zero),
    fused (float32) and on the PyTorch path (float64); the gradients come from the interior only. The float32
    interior is compared to float32 rounding, not bit for bit: under TRITON_INTERPRET=1 tl.dot is numpy's matmul,
    whose BLAS kernels may sum in an order that follows the operands' alignment (numpy 2.4.6 in a fresh environment
    on 2026-12-02 differed in 13-15% of the elements, by 9.5e-07 at most)."""
    g = torch.Generator().manual_seed(4)
    x = torch.randn(2, 3, 6, 6, generator=g, dtype=dtype).to(DEVICE).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(8, 3, 3, 3, generator=g, dtype=dtype) * 0.3).to(DEVICE)
    b = torch.randn(8, generator=g, dtype=dtype).to(DEVICE)
    top, bottom, left, right = out_pads
    dout = torch.randn(2, 8, 6 + top + bottom, 6 + left + right, generator=g, dtype=dtype).to(DEVICE)
    plain = _grads(sc.conv_act, x, w, b, dout[..., top:6 + top, left:6 + left], True)
    ours = _grads(lambda *a: sc.conv_act(*a, out_pads=out_pads), x, w, b, dout, True)
    assert ours[0].shape == dout.shape and ours[0].is_contiguous(memory_format=torch.channels_last)
    padded = torch.nn.functional.pad(plain[0], (left, right, top, bottom))
    interior = torch.zeros_like(padded, dtype=torch.bool)
    interior[..., top:6 + top, left:6 + left] = True
    assert (ours[0][~interior] == 0).all()  # the border exactly zero
    exact = dtype == torch.float64
    torch.testing.assert_close(ours[0], padded, rtol=0 if exact else 1e-5, atol=0 if exact else 1e-6)
    for o, p in zip(ours[1:], plain[1:]):
        torch.testing.assert_close(o, p, rtol=1e-6, atol=1e-6)


def test_shared_output_sums_both_gradients_in_the_kernel():
    """conv_act_shared: (out, a view of out) for two consumers; the weight gradient's kernel sums their two
    gradients (dout2), and x's, the weight's and the bias's gradients equal those of one output read by both."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 6, 6, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    w = (torch.randn(8, 3, 3, 3, generator=g) * 0.3).to(DEVICE)
    b = torch.randn(8, generator=g).to(DEVICE)
    pads = (0, 1, 0, 1)
    d1, d2 = (torch.randn(2, 8, 7, 7, generator=g).to(DEVICE) for _ in range(2))
    grads = []
    for shared in (False, True):
        xx, ww, bb = (t.clone().requires_grad_() for t in (x, w, b))
        if shared:
            out, other = sc.conv_act_shared(xx, ww, bb, True, pads)
            assert other.data_ptr() == out.data_ptr() and other is not out
        else:
            out = other = sc.conv_act(xx, ww, bb, True, out_pads=pads)
        ((out * d1).sum() + (other * d2).sum()).backward()
        grads.append((out.detach(), xx.grad, ww.grad, bb.grad))
    for name, s, o in zip(("out", "dx", "dweight", "dbias"), grads[1], grads[0]):
        torch.testing.assert_close(s, o, rtol=1e-5, atol=1e-5, msg=name)
