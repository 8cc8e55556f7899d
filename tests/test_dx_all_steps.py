"""The concatenated ConvLSTM's backward with every step's dx_t in one call after the loop
(``convlstm_concat.dx_all_steps``, MSCRED_LSTM_DX_ALL_STEPS=1; the split path's levels, level 2 of the product).

Per step only dh_{t-1} is convolved (with the recurrent half of the weight), and one transposed convolution over all
steps' gate gradients with the input half is the bordered input gradient itself: no copy of dx_t out of a per-step
[dx_t, dh_{t-1}]. The same mathematics as the per-step path, so: against the float64 reference at awkward sizes, and
in bf16 within the per-step path's error."""
from __future__ import annotations

import pytest
import torch
from model_runs import fused_training_step
from test_ops_triton_convlstm import (  # noqa: F401 (concat_everywhere: a fixture)
    DEVICE, FB, _fwd_bwd, _inputs, _rel, _time_major, _time_major_fwd_bwd, concat_everywhere)

from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_concat


@pytest.mark.parametrize("setting, on", [(None, False), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_LSTM_DX_ALL_STEPS", setting)
    assert convlstm_concat.dx_all_steps() is on


def _counted(monkeypatch):
    """Counts of the backward's transposed convolutions (by the weight's input channels) and of its pixel copies."""
    calls = {"conv_transpose": [], "copies": 0}
    real_ct, real_copy = convlstm_concat.conv_transpose, convlstm_concat.copy_pixels
    monkeypatch.setattr(convlstm_concat, "conv_transpose",
                        lambda g, w: calls["conv_transpose"].append((g.shape[0], w.shape[1])) or real_ct(g, w))

    def copy(*a, **k):
        calls["copies"] += 1
        return real_copy(*a, **k)
    monkeypatch.setattr(convlstm_concat, "copy_pixels", copy)
    return calls


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("B, T, C, Ch", [(3, 5, 3, 4), (1, 4, 4, 4), (4, 1, 2, 5), (2, 2, 5, 3)])
def test_equals_the_reference(k, B, T, C, Ch, concat_everywhere, monkeypatch):
    """float64: h and every gradient equal the reference's, at one step, two and more, a batch of one, input and
    hidden channel counts equal and different; the backward makes T - 1 dh_{t-1} (the recurrent half, B images) and
    one dx over all T * B images, and copies no dx_t."""
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "1")
    x, w, b, dout = _inputs(B, T, C, Ch, 7, k, seed=90 + k + B + T)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    calls = _counted(monkeypatch)
    got = _time_major_fwd_bwd(x, w, b, dout, k)
    assert concat_everywhere == {"forward": 1, "backward": 1}
    assert calls["conv_transpose"] == [(B, Ch)] * (T - 1) + [(T * B, C)]
    assert calls["copies"] == 1  # the forward's x into xh; none in the backward
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


def test_per_step_path_when_off(concat_everywhere, monkeypatch):
    """Without the switch, the per-step [dx_t, dh_{t-1}] and its copies (what the counts above would catch)."""
    monkeypatch.delenv("MSCRED_LSTM_DX_ALL_STEPS", raising=False)
    x, w, b, dout = _inputs(2, 3, 3, 4, 6, 2, seed=95)
    calls = _counted(monkeypatch)
    _time_major_fwd_bwd(x, w, b, dout, 2)
    assert calls["conv_transpose"] == [(2, 7), (2, 7), (2, 3)] and calls["copies"] == 4


@pytest.mark.parametrize("n", [9, 15])
def test_bf16_tracks_the_per_step_path(n, concat_everywhere, monkeypatch):
    """bf16 (cuDNN on CUDA; level 2's 15 x 15 among the sizes): against the float64 oracle within twice the
    per-step path's error, for h and every gradient."""
    _bf16_within_twice_the_per_step_error(_inputs(3, 5, 8, 8, n, 2, seed=97 + n), monkeypatch)


def _bf16_within_twice_the_per_step_error(inputs, monkeypatch) -> None:
    """bf16 with the switch on, against the float64 oracle, within twice the per-step path's error + 1e-3, for h
    and every gradient."""
    oracle = _fwd_bwd(ref.convlstm, *(t.cpu() for t in inputs))
    low = [t.to(torch.bfloat16) for t in inputs]
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "0")
    per_step = _time_major_fwd_bwd(*low, 2)
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "1")
    after = _time_major_fwd_bwd(*low, 2)
    for name, a, p, o in zip(("h", "dx", "dweight", "dbias"), after, per_step, oracle):
        assert torch.isfinite(a).all(), name
        assert _rel(a, o) <= 2 * _rel(p, o) + 1e-3, f"{name}: {_rel(a, o):.3g} vs per step {_rel(p, o):.3g}"


@pytest.mark.skipif(DEVICE != "cuda", reason="level 2's full size (batch 128, 64 channels, 15 x 15) in bf16: CUDA")
def test_level_2_full_size_on_gpu(concat_everywhere, monkeypatch):
    """Level 2 as the training step runs it: within twice the per-step path's error against the float64 oracle."""
    _bf16_within_twice_the_per_step_error(_inputs(128, 5, 64, 64, 15, 2, seed=99), monkeypatch)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_fused_model_trains_the_same_with_it(monkeypatch, strict_float32):
    """The fused float32 model at n = 12 with every level on the concatenated path: the loss and every gradient of
    the per-step path, to float32 rounding (the dx sums are the same products, summed by other calls)."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    run = fused_training_step(12, 2, torch.enable_grad, DEVICE, channels=(4, 8, 8, 16))
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "0")
    ref_loss, ref_grads = run()
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "1")
    calls = _counted(monkeypatch)
    loss, grads = run()
    images = [n for n, _ in calls["conv_transpose"]]
    assert images.count(2) == 4 * 4 and images.count(5 * 2) == 4  # per level T - 1 dh's of B, one dx of T * B
    torch.testing.assert_close(loss, ref_loss, rtol=1e-6, atol=0)
    for k in ref_grads:
        torch.testing.assert_close(grads[k], ref_grads[k], rtol=1e-4, atol=1e-7, msg=lambda m, k=k: f"{k}: {m}")


def test_backward_opcheck(concat_everywhere, monkeypatch):
    """torch.library.opcheck of the backward op with the switch on: the input gradient made by the all-steps call
    has the shape and strides its fake gives."""
    monkeypatch.setenv("MSCRED_LSTM_DX_ALL_STEPS", "1")
    x, w, b, dout = _inputs(2, 3, 2, 3, 4, 2, seed=19)
    xp, w_x, w_h = fused.train_inputs(_time_major(x, "nhwc"), w, "nhwc")
    state = fused.convlstm_train(xp, w_x, w_h, b, FB, "nhwc")[1:]
    torch.library.opcheck(fused.convlstm_train_backward, (dout, xp, w_x, w_h, b, *state, FB, "nhwc"),
                          test_utils=("test_schema", "test_faketensor"))
