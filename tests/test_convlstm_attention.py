"""A level's training ConvLSTM and its attention as one op, the attention's backward folded into the ConvLSTM's
(``ops/triton/convlstm_attention.py``, ``ops/triton/attention_last.py``, ``conv_cell_bwd.cu``'s attn_* parameters).

On the CPU (Triton's interpreter) the op, its last-step attention gradient and the maps made from the coefficients
are checked in float64 against the reference's autograd at awkward sizes (one step, two, batches that split the
attention over D and batches that do not), on the concatenated path and the per-step one. On an H100 / H200 the
step kernel making dout_t itself runs against the float64 oracle within the unfolded path's error, and in the
model's training step.
"""
from __future__ import annotations

import pytest
import torch

from mscred.ops import conv_cell
from mscred.ops import reference as ref
from mscred.ops.triton import attention, attention_last, convlstm_attention
from mscred.ops.triton import convlstm as fused
from test_ops_triton_convlstm import DEVICE, FB, _inputs, _rel, _time_major, pytestmark  # noqa: F401

HOPPER = torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0)
needs_hopper = pytest.mark.skipif(not HOPPER, reason="level 1's step kernels run on Hopper (sm_90a) only")


def _channels_last_steps(h: torch.Tensor) -> torch.Tensor:
    """h (B, T, C, H, W) stored (B, T, H, W, C), as the fused ConvLSTM returns it."""
    return h.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


# (B, T, C, n): one step, two, five; B = 3 and 4 split the attention over D under the interpreter, 1, 2 and 5 do not
@pytest.mark.parametrize("B, T, C, n", [(3, 5, 4, 5), (1, 3, 2, 4), (5, 4, 6, 3), (4, 1, 3, 3), (2, 2, 8, 6)])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_last_step_gradient_and_coefficients_are_the_attention_backward(B, T, C, n, dtype):
    """dL/dh_{T-1} and, from the coefficients, every other dL/dh_t equal the reference attention's float64
    gradients; the last step's map is the full attention backward's."""
    g = torch.Generator().manual_seed(B * 10 + T + n)
    h = _channels_last_steps(torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64).to(DEVICE, dtype))
    dout = torch.randn(B, C, n, n, generator=g, dtype=torch.float64).to(DEVICE, dtype)
    h64 = h.detach().double().requires_grad_()
    want = torch.autograd.grad(ref.temporal_attention(h64), h64, dout.double())[0]
    gcl, dlast, coef = attention_last.last_step_grad(dout, h)
    assert coef.shape == (B, T, 2) and dlast.shape == (B, C, n, n)
    assert dlast.is_contiguous(memory_format=torch.channels_last)
    tol = 1e-12 if dtype == torch.float64 else 1e-5
    torch.testing.assert_close(dlast.double(), want[:, T - 1], rtol=tol, atol=tol)
    for t in range(T - 1):
        made = attention_last.step_grad(gcl, h[:, T - 1], coef, t)
        torch.testing.assert_close(made.double(), want[:, t], rtol=tol, atol=tol, msg=f"step {t}")
    # the full backward's last map: bit for bit under the interpreter; compiled, the two kernels' sums and fused
    # multiply-adds may round apart in the last place
    exact = dict(rtol=0, atol=0) if DEVICE == "cpu" else dict(rtol=tol * 0.1, atol=tol * 0.1)
    torch.testing.assert_close(dlast, attention.temporal_attention_fused_backward(dout, h)[:, T - 1], **exact)


def test_last_step_gradient_wants_channels_last_states():
    h = torch.randn(2, 3, 4, 5, 5, dtype=torch.float64, device=DEVICE)
    with pytest.raises(ValueError, match="channels-last"):
        attention_last.last_step_grad(torch.randn(2, 4, 5, 5, dtype=torch.float64, device=DEVICE), h)


def _fold_fwd_bwd(x, w, b, dout, k, time_major):
    """``train_with_attention`` on x as the encoder hands it over (zero-bordered; time-major or not): the attention
    output and the gradients of x, the weight and the bias."""
    xs = (_time_major(x, "nhwc") if time_major else x).detach().requires_grad_()
    w_, b_ = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    y = convlstm_attention.train_with_attention(fused.pad_steps(xs, fused._padding(k), torch.channels_last), w_, b_,
                                                FB, padded=True)
    return [y.detach()] + [g.detach() for g in torch.autograd.grad(y, (xs, w_, b_), dout.to(y.dtype))]


def _reference(x, w, b, dout):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = ref.temporal_attention(ref.convlstm(x, w, b, FB))
    return [y.detach()] + [g.detach() for g in torch.autograd.grad(y, (x, w, b), dout)]


@pytest.mark.parametrize("saved_scores", ["0", "1"])  # the attention's scores recomputed / the forward's
@pytest.mark.parametrize("time_major", [True, False])  # the concatenated path, the per-step path
@pytest.mark.parametrize("B, T, C, n, k", [(3, 5, 4, 7, 2), (2, 3, 3, 5, 2), (1, 4, 4, 6, 3), (2, 1, 3, 5, 2)])
def test_one_op_equals_the_reference_in_float64(B, T, C, n, k, time_major, saved_scores, monkeypatch):
    """The attention output and every gradient equal the float64 reference's ConvLSTM + attention, at one step and
    more: the concatenated path takes the folded gradient (each step's map made where it is read), the per-step
    path every step's map made first."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_ATTN_SAVED_SCORES", saved_scores)
    x, w, b, _ = _inputs(B, T, C, C, n, k, seed=70 + B + T + n)
    dout = torch.randn(B, C, n, n, generator=torch.Generator().manual_seed(3), dtype=torch.float64).to(DEVICE)
    from mscred.ops.triton import convlstm_concat
    took = []
    real = convlstm_concat.backward
    monkeypatch.setattr(convlstm_concat, "backward", lambda dout_, *a: took.append(type(dout_)) or real(dout_, *a))
    got = _fold_fwd_bwd(x, w, b, dout, k, time_major)
    concatenated = time_major or B == 1 or T == 1  # (steps of one window, or one step, are time-major as well)
    assert took == ([attention_last.FoldedGrad] if concatenated else [])
    for name, g, e in zip(("attention", "dx", "dweight", "dbias"), got, _reference(x, w, b, dout)):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


def test_opcheck_schema_fake_and_autograd(monkeypatch):
    """torch.library.opcheck of the one op and of the attention's last-step gradient: schema, fake kernels (their
    strides too), autograd registration."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x, w, b, _ = _inputs(2, 3, 2, 2, 4, 2, seed=9)
    xp, w_x, w_h = fused.train_inputs(_time_major(x, "nhwc"), w, "nhwc")
    for t in (xp, w_x, w_h, b):
        t.requires_grad_()
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    for cat in (False, True):
        torch.library.opcheck(convlstm_attention.convlstm_attention_train, (xp, w_x, w_h, b, FB, "nhwc", cat),
                              test_utils=utils)
    out = convlstm_attention.convlstm_attention_train(xp, w_x, w_h, b, FB, "nhwc", False)[2].detach()
    g = torch.randn(2, 4, 4, 2, dtype=torch.float64, device=DEVICE).permute(0, 3, 1, 2)
    torch.library.opcheck(convlstm_attention.temporal_attention_last_grad, (g, out),
                          test_utils=("test_schema", "test_faketensor"))


def test_fold_setting(monkeypatch):
    """MSCRED_LSTM_ATTN_FOLD: 0 never, 1 wherever the fused ops run, unset only where level 1's step kernels run
    (Hopper, bf16, 32 channels, a 2 x 2 kernel); never for channels-first buffers."""
    x = torch.zeros(2, 5, 32, 4, 4, device=DEVICE)
    w = torch.zeros(128, 64, 2, 2, device=DEVICE)
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", "0")
    assert not convlstm_attention.folds(x, w)
    monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", "1")
    assert convlstm_attention.folds(x, w)
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nchw")
    assert not convlstm_attention.folds(x, w)
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.delenv("MSCRED_LSTM_ATTN_FOLD")
    assert not convlstm_attention.folds(x, w)  # float32 (and, on a CPU, no kernel)
    with torch.autocast(DEVICE, dtype=torch.bfloat16):
        assert convlstm_attention.folds(x, w) == HOPPER
        monkeypatch.setenv("MSCRED_LSTM_CONV_CELL_BWD", "0")  # the split backward: no kernel to fold into
        assert not convlstm_attention.folds(x, w)
        monkeypatch.delenv("MSCRED_LSTM_CONV_CELL_BWD")
    assert not convlstm_attention.folds(x[:, :, :16], torch.zeros(64, 32, 2, 2, device=DEVICE))


def test_model_level_takes_the_one_op_and_keeps_its_gradients(monkeypatch):
    """A small model's fused training step with the fold forced on (MSCRED_LSTM_ATTN_FOLD=1: every level) gives
    the same loss and parameter gradients as with it off."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x = torch.rand(2, 5, 3, 10, 10, generator=torch.Generator().manual_seed(1), dtype=torch.float64).to(DEVICE)
    calls = []
    real = convlstm_attention.train_with_attention
    monkeypatch.setattr(convlstm_attention, "train_with_attention", lambda *a: calls.append(1) or real(*a))
    results = []
    for setting in ("1", "0"):
        monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", setting)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=10, channels=(4, 8, 8, 16), backend="fused")).to(DEVICE, torch.float64)
        loss = torch.nn.functional.mse_loss(net(x), x[:, -1])
        loss.backward()
        results.append((loss.detach(), [p.grad.detach().clone() for p in net.parameters()]))
    assert len(calls) == 4  # the four levels, with the fold on
    (l1, g1), (l0, g0) = results
    torch.testing.assert_close(l1, l0, rtol=1e-12, atol=1e-12)
    for a, b in zip(g1, g0):
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-12)


@needs_hopper
@pytest.mark.parametrize("B, T, n", [(128, 5, 30), (3, 5, 7), (1, 2, 5), (5, 3, 30), (2, 4, 3)])
def test_step_kernel_folds_the_attention_within_the_unfolded_error(B, T, n, monkeypatch):
    """Level 1's sizes (32 channels), bf16: the one op with the step kernel making each dout_t (every backward step
    kernel given the attention's maps) against the float64 oracle, within twice the error of the unfolded path
    (the training op, then the attention: dout_t read from the attention's backward) + 1e-3."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")  # the concatenated path at the small maps too
    monkeypatch.delenv("MSCRED_LSTM_CONV_CELL_BWD", raising=False)
    folded_steps = []
    real = conv_cell.step_backward

    def counted(*a):
        folded_steps.append(a[-1] is not None if len(a) > 11 else False)
        return real(*a)
    monkeypatch.setattr(conv_cell, "step_backward", counted)
    x, w, b, _ = _inputs(B, T, 32, 32, n, 2, seed=500 + B + T + n)
    dout = torch.randn(B, 32, n, n, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to(DEVICE)
    oracle = _reference(x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    ours = _fold_fwd_bwd(*low, 2, True)
    assert folded_steps == [True] * (T - 1)

    xs = _time_major(low[0], "nhwc").detach().requires_grad_()
    w_, b_ = low[1].detach().clone().requires_grad_(), low[2].detach().clone().requires_grad_()
    y = attention.temporal_attention(fused.train(fused.pad_steps(xs, fused._padding(2), torch.channels_last), w_, b_,
                                                 FB, padded=True))
    unfolded = [y.detach()] + [g.detach() for g in torch.autograd.grad(y, (xs, w_, b_), low[3])]
    assert folded_steps == [True] * (T - 1) + [False] * (T - 1)
    for name, o, u, e in zip(("attention", "dx", "dweight", "dbias"), ours, unfolded, oracle):
        assert torch.isfinite(o).all(), name
        assert _rel(o, e) <= 2 * _rel(u, e) + 1e-3, f"{name}: {_rel(o, e):.3g} vs unfolded {_rel(u, e):.3g}"
