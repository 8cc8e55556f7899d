"""MSCREDNet: the table's shapes for any n >= 4, TF transposed-convolution semantics, gradients everywhere."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.config import ModelConfig
from mscred.model import MSCREDNet, SameConv, SameDeconv
from mscred.ops.reference import same_padding
from mscred.ops.triton.runtime import runs_fused




@pytest.mark.parametrize("n", [4, 5, 16, 30, 55])
def test_output_shape_equals_input_and_loss_finite(n):
    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=n))
    x = torch.rand(2, 5, 3, n, n)
    out = net(x)
    assert out.shape == (2, 3, n, n)
    loss = F.mse_loss(out, x[:, -1])
    assert torch.isfinite(loss)
    loss.backward()
    for name, p in net.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name


def test_encoder_shapes_of_the_table_at_n30():
    net = MSCREDNet(ModelConfig())
    levels = net.encoder(torch.rand(1, 5, 3, 30, 30))
    assert [tuple(f.shape[2:]) for f in levels] == [(32, 30, 30), (64, 15, 15), (128, 8, 8), (256, 4, 4)]


def test_lstm_kernel_3_and_small_channels():
    net = MSCREDNet(ModelConfig(lstm_kernel=3, channels=(4, 6, 8, 10), n_scales=2))
    assert net.lstms[0].weight.shape == (16, 8, 3, 3)
    out = net(torch.rand(3, 5, 2, 7, 7))
    assert out.shape == (3, 2, 7, 7)


def test_parameter_names_are_stable():
    names = [name for name, _ in MSCREDNet(ModelConfig(channels=(2, 2, 2, 2))).named_parameters()]
    expected = ([f"encoder.conv{i}.{p}" for i in range(1, 5) for p in ("weight", "bias")]
                + [f"lstms.{i}.{p}" for i in range(4) for p in ("weight", "bias")]
                + [f"decoder.deconv{i}.{p}" for i in (4, 3, 2, 1) for p in ("weight", "bias")])
    assert names == expected


@pytest.mark.parametrize("size, kernel, stride", [(15, 2, 2), (30, 3, 2), (5, 3, 2), (3, 2, 2), (1, 2, 2), (7, 3, 1)])
def test_deconv_is_adjoint_of_same_conv(size, kernel, stride):
    # TF's conv2d_transpose(padding="SAME", output_shape=size) is the gradient of a same-padded conv2d with respect
    # to its input; SameDeconv (bias 0, no SELU) must equal it exactly.
    torch.manual_seed(1)
    deconv = SameDeconv(3, 2, kernel, stride, selu=False).double()
    w = deconv.weight.detach()  # (in = conv's out, out = conv's in, k, k)
    top, bottom, left, right = same_padding(size, kernel, stride)
    m = -(-size // stride)
    u = torch.zeros(1, 2, size, size, dtype=torch.float64, requires_grad=True)
    y = F.conv2d(F.pad(u, (left, right, top, bottom)), w, stride=stride)  # (1, 3, m, m)
    assert y.shape[-1] == m
    g = torch.randn(1, 3, m, m, dtype=torch.float64)
    (want,) = torch.autograd.grad(y, u, g)
    with torch.no_grad():
        got = deconv(g, size)
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_rejects_bad_input_shape():
    net = MSCREDNet(ModelConfig(channels=(2, 2, 2, 2)))
    with pytest.raises(ValueError, match="n >= 4"):
        net(torch.rand(1, 5, 3, 3, 3))
    with pytest.raises(ValueError):
        net(torch.rand(1, 5, 2, 6, 6))  # 2 scales, config says 3


@pytest.mark.parametrize("n, lstm_kernel, layout", [(7, 2, "1"), (10, 2, "1"), (7, 3, "1"), (10, 3, "1"),
                                                    (10, 2, "0")])
def test_fused_backend_is_channels_last_with_the_reference_arithmetic(n, lstm_kernel, layout, monkeypatch):
    # The fused backend converts the input to channels-last once and keeps that order (no per-op conversions); the
    # reference backend stays NCHW. Same weights, float64: the same outputs and gradients to rounding (whether the
    # fused ConvLSTM runs here on Triton's interpreter or falls back to the reference). Training on the fused
    # ConvLSTM takes the encoder's training layout (time-major, zero-bordered level inputs): at n = 10 conv2, conv3
    # and conv4 each read the padded copy of their input that the ConvLSTM reads; at n = 7 conv3 and conv4 do
    # (without padding of their own they never read its extra row), conv2 not (TF pads its 7 x 7 on every side).
    # A 3 x 3 ConvLSTM pads every side by one: then only conv2 of 7 x 7 (padded so too) reads the copy. With the
    # layout off (MSCRED_TRAIN_LAYOUT=0) the training op pads each level itself, batch-major, and nothing is shared.
    monkeypatch.setenv("MSCRED_TRAIN_LAYOUT", layout)
    cfg = dict(n_sensors=n, channels=(4, 8, 8, 16), lstm_kernel=lstm_kernel)
    x = torch.rand(3, 5, 3, n, n, dtype=torch.float64)
    shared, real = [], SameConv.forward_padded
    monkeypatch.setattr(SameConv, "forward_padded", lambda self, xp, **kw: shared.append(1) or real(self, xp, **kw))
    results = []
    for backend in ("reference", "fused"):
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(backend=backend, **cfg)).double()
        levels = net.encoder(x)
        stored_cl = [f.permute(0, 1, 3, 4, 2).is_contiguous() for f in levels[:3]]  # level 4 is 1 x 1 here
        assert all(stored_cl) == (backend == "fused") and any(stored_cl) == (backend == "fused")
        pads = net.encoder.training_layout(x)
        assert (pads is not None) == (backend == "fused" and runs_fused(x) and layout == "1")
        out = net(x)
        F.mse_loss(out, x[:, -1]).backward()
        results.append((out.detach(), {k: p.grad for k, p in net.named_parameters()}))
    expect = {(10, 2): 3, (7, 2): 2, (10, 3): 0, (7, 3): 1}[n, lstm_kernel] if runs_fused(x) and layout == "1" else 0
    assert len(shared) == expect
    (out_r, g_r), (out_f, g_f) = results
    torch.testing.assert_close(out_f, out_r, rtol=1e-12, atol=1e-12)
    for k in g_r:
        torch.testing.assert_close(g_f[k], g_r[k], rtol=1e-10, atol=1e-12, msg=k)


@pytest.mark.parametrize("kernel, stride", [(3, 2), (2, 2), (3, 1), (2, 1)])
@pytest.mark.parametrize("lstm_kernel", [2, 3])
def test_reads_padded_only_where_the_padded_copy_gives_the_tf_output(kernel, stride, lstm_kernel):
    # Encoder.forward_training lets a convolution read the ConvLSTM's zero-bordered copy of its input only where
    # that gives the TF "same" output exactly (_reads_padded); checked against the explicitly padded convolution
    # for every size from 4 to 40.
    from mscred.model import _reads_padded
    conv = SameConv(2, 3, kernel, stride, "torch", True)
    w = torch.randn(3, 2, kernel, kernel, dtype=torch.float64)
    for n in range(4, 41):
        pads = same_padding(n, lstm_kernel, 1)
        x = torch.randn(1, 2, n, n, dtype=torch.float64)
        want = F.conv2d(F.pad(x, _lrtb(same_padding(n, kernel, stride))), w, stride=stride)
        got = F.conv2d(F.pad(x, _lrtb(pads)), w, stride=stride)
        assert _reads_padded(conv, n, pads) == (got.shape == want.shape and torch.equal(got, want)), n


def _lrtb(pads):
    top, bottom, left, right = pads
    return left, right, top, bottom


@pytest.mark.parametrize("n", [10, 7])
def test_shared_buffers_as_two_outputs_give_the_same_step(n, monkeypatch):
    """MSCRED_SHARED_GRADS (default on, ops/shared_output.py): each bordered buffer read by the ConvLSTM and the next
    convolution goes out as two outputs, and the epilogue's backward kernel sums their gradients instead of
    autograd. The fused float32 training step's output and every gradient equal those with it off (n = 10: conv2-4
    share their inputs; n = 7: conv3 and conv4 do, conv2 reads a plain activation)."""
    if not runs_fused(torch.zeros(1)):
        pytest.skip("CPU tensors on the fused training layout need Triton's interpreter (TRITON_INTERPRET=1, as CI)")
    from mscred.ops.shared_output import SharedOutput

    cfg = dict(n_sensors=n, channels=(4, 8, 8, 16))
    x = torch.rand(3, 5, 3, n, n)
    calls, real = [], SharedOutput.apply
    monkeypatch.setattr(SharedOutput, "apply", lambda *a: calls.append(1) or real(*a))
    results = []
    for flag in ("0", "1"):
        monkeypatch.setenv("MSCRED_SHARED_GRADS", flag)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(backend="fused", **cfg))
        out = net(x)
        F.mse_loss(out, x[:, -1]).backward()
        results.append((out.detach(), {k: p.grad for k, p in net.named_parameters()}))
    assert len(calls) == {10: 3, 7: 2}[n]  # the buffers with two readers, only when switched on
    (out0, g0), (out1, g1) = results
    torch.testing.assert_close(out1, out0, rtol=0, atol=0)
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], rtol=1e-5, atol=1e-6, msg=k)



def test_concatenated_lstm_gates_give_the_same_step(monkeypatch):
    """The training ConvLSTM on [x_t, h_{t-1}] concatenated (ops/triton/convlstm_concat.py; by default level 1 of a
    30-sensor model), here at every level of a small float64 model: the fused training step's output and every
    gradient equal those of the default path (one convolution of the concatenated inputs instead of two summed)."""
    if not runs_fused(torch.zeros(1)):
        pytest.skip("CPU tensors on the fused training layout need Triton's interpreter (TRITON_INTERPRET=1, as CI)")
    from mscred.ops.triton import convlstm_concat

    calls, real = [], convlstm_concat.forward
    monkeypatch.setattr(convlstm_concat, "forward", lambda *a: calls.append(1) or real(*a))
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    x = torch.rand(3, 5, 3, 10, 10, dtype=torch.float64)
    results = []
    for flag in ("0", "1"):
        monkeypatch.setenv("MSCRED_LSTM_CONCAT", flag)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(backend="fused", n_sensors=10, channels=(4, 8, 8, 16))).double()
        out = net(x)
        F.mse_loss(out, x[:, -1]).backward()
        results.append((out.detach(), {k: p.grad for k, p in net.named_parameters()}))
    assert len(calls) == 4  # every level, only when switched on
    (out0, g0), (out1, g1) = results
    torch.testing.assert_close(out1, out0, rtol=1e-12, atol=1e-12)
    for k in g0:
        torch.testing.assert_close(g1[k], g0[k], rtol=1e-10, atol=1e-12, msg=k)
