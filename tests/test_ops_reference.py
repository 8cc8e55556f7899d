"""The reference ops against hand-written NumPy float64 loops, and their gradients by finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from mscred import ops
from mscred.ops import reference as ref




def _np_conv_same(x, w, b, stride, pad):
    """Naive cross-correlation with explicit zero padding: x (C, H, W), w (O, C, k, k) -> (O, Ho, Wo)."""
    top, bottom, left, right = pad
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right)))
    k = w.shape[-1]
    ho = (xp.shape[1] - k) // stride + 1
    wo = (xp.shape[2] - k) // stride + 1
    out = np.zeros((w.shape[0], ho, wo))
    for o in range(w.shape[0]):
        for r in range(ho):
            for s in range(wo):
                patch = xp[:, r * stride:r * stride + k, s * stride:s * stride + k]
                out[o, r, s] = (patch * w[o]).sum() + (b[o] if b is not None else 0.0)
    return out


def _sigmoid(z):
    return 1.0 / (1.0 + np.exp(-z))


@pytest.mark.parametrize("n, k, stride, expected", [
    (5, 3, 1, (1, 1, 1, 1)),
    (5, 2, 2, (0, 1, 0, 1)),    # out 3: needs 1 extra row, TF puts it at the bottom
    (16, 3, 2, (0, 1, 0, 1)),   # out 8: (8-1)*2 + 3 - 16 = 1
    (16, 2, 2, (0, 0, 0, 0)),
    (30, 3, 2, (0, 1, 0, 1)),
    (15, 2, 2, (0, 1, 0, 1)),   # SPEC conv3: 15 -> 8
    (55, 3, 2, (1, 1, 1, 1)),   # out 28: 27*2 + 3 - 55 = 2
    (55, 2, 2, (0, 1, 0, 1)),
    (1, 2, 2, (0, 1, 0, 1)),
    (30, 2, 1, (0, 1, 0, 1)),   # ConvLSTM kernel 2
])
def test_same_padding_tf_semantics(n, k, stride, expected):
    pad = ref.same_padding(n, k, stride)
    assert pad == expected
    # The padded size gives exactly ceil(n / stride) outputs, as TF "same".
    assert (n + pad[0] + pad[1] - k) // stride + 1 == math.ceil(n / stride)


@pytest.mark.parametrize("n, k, stride, selu", [(5, 3, 1, True), (5, 2, 2, False), (7, 3, 2, True)])
def test_conv2d_matches_numpy(n, k, stride, selu):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4, 3, k, k, generator=g, dtype=torch.float64)
    b = torch.randn(4, generator=g, dtype=torch.float64)
    pad = ref.same_padding(n, k, stride)
    got = ref.conv2d(x, w, b, stride, pad, selu).numpy()
    for i in range(2):
        want = _np_conv_same(x[i].numpy(), w.numpy(), b.numpy(), stride, pad)
        if selu:
            alpha, scale = 1.6732632423543772, 1.0507009873554805
            want = scale * np.where(want > 0, want, alpha * (np.exp(want) - 1))
        np.testing.assert_allclose(got[i], want, rtol=1e-12, atol=1e-12)
    # The dispatcher's "torch" backend is this function.
    assert torch.equal(ops.conv2d(x, w, b, stride, pad, selu, backend="torch"), ref.conv2d(x, w, b, stride, pad, selu))


@pytest.mark.parametrize("k", [2, 3])
def test_convlstm_matches_numpy_loop(k):
    B, T, C, n = 2, 3, 2, 4
    g = torch.Generator().manual_seed(2)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = 0.5 * torch.randn(4 * C, 2 * C, k, k, generator=g, dtype=torch.float64)
    b = 0.5 * torch.randn(4 * C, generator=g, dtype=torch.float64)
    got = ref.convlstm(x, w, b, 1.0).numpy()
    pad = (0, 1, 0, 1) if k == 2 else (1, 1, 1, 1)  # the contract's TF "same" at stride 1
    for s in range(B):
        h = np.zeros((C, n, n))
        c = np.zeros((C, n, n))
        for t in range(T):
            z = _np_conv_same(np.concatenate([x[s, t].numpy(), h]), w.numpy(), b.numpy(), 1, pad)
            i, gg, f, o = z[:C], z[C:2 * C], z[2 * C:3 * C], z[3 * C:]
            c = _sigmoid(f + 1.0) * c + _sigmoid(i) * np.tanh(gg)
            h = _sigmoid(o) * np.tanh(c)
            np.testing.assert_allclose(got[s, t], h, rtol=1e-12, atol=1e-12)


def test_temporal_attention_matches_numpy_softmax():
    B, T, C, n = 3, 5, 2, 3
    g = torch.Generator().manual_seed(3)
    h = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    got = ref.temporal_attention(h).numpy()
    hn = h.numpy()
    for s in range(B):
        scores = np.array([(hn[s, k] * hn[s, -1]).sum() / T for k in range(T)])
        a = np.exp(scores - scores.max())
        a /= a.sum()
        want = sum(a[k] * hn[s, k] for k in range(T))
        np.testing.assert_allclose(got[s], want, rtol=1e-12, atol=1e-12)


def test_temporal_attention_one_hot_when_last_dominates():
    # When <H_T, H_T> / T dwarfs every other score, the output is H_T itself.
    h = torch.zeros(1, 5, 1, 2, 2, dtype=torch.float64)
    h[0, -1] = 10.0
    h[0, 0] = -1.0
    out = ref.temporal_attention(h)
    torch.testing.assert_close(out, h[:, -1], rtol=0, atol=1e-12)


def test_gradcheck_conv2d():
    g = torch.Generator().manual_seed(4)
    x = torch.randn(1, 2, 5, 5, generator=g, dtype=torch.float64, requires_grad=True)
    w = torch.randn(3, 2, 2, 2, generator=g, dtype=torch.float64, requires_grad=True)
    b = torch.randn(3, generator=g, dtype=torch.float64, requires_grad=True)
    pad = ref.same_padding(5, 2, 2)
    assert torch.autograd.gradcheck(lambda x, w, b: ref.conv2d(x, w, b, 2, pad, True), (x, w, b))


@pytest.mark.parametrize("k", [2, 3])
def test_gradcheck_convlstm(k):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(1, 3, 2, 3, 3, generator=g, dtype=torch.float64, requires_grad=True)
    w = (0.5 * torch.randn(8, 4, k, k, generator=g, dtype=torch.float64)).requires_grad_()
    b = (0.5 * torch.randn(8, generator=g, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(lambda x, w, b: ref.convlstm(x, w, b, 1.0), (x, w, b))


def test_gradcheck_temporal_attention():
    g = torch.Generator().manual_seed(6)
    h = (0.5 * torch.randn(2, 5, 2, 2, 2, generator=g, dtype=torch.float64)).requires_grad_()
    assert torch.autograd.gradcheck(ref.temporal_attention, (h,))


def test_first_step_on_the_input_half_of_the_weight_equals_the_concatenation():
    """On a CPU step 0 convolves x_0 with the input half of the weight (h_0 = 0 adds nothing): the same hidden
    states and gradients as the concatenation with a zero h, in float64, for both kernel sizes."""
    import torch.nn.functional as F

    from mscred.ops.reference import cell_update, convlstm, same_padding

    def concatenated(x, weight, bias):
        B, T, C, H, W = x.shape
        top, bottom, left, right = same_padding(H, weight.shape[-1], 1)
        h = c = x.new_zeros(B, weight.shape[0] // 4, H, W)
        out = []
        for t in range(T):
            z = F.conv2d(F.pad(torch.cat([x[:, t], h], 1), (left, right, top, bottom)), weight, bias)
            h, c = cell_update(z, c, 1.0)
            out.append(h)
        return torch.stack(out, 1)

    for k in (2, 3):
        g = torch.Generator().manual_seed(k)
        x = torch.randn(3, 5, 4, 7, 7, generator=g, dtype=torch.float64, requires_grad=True)
        w = torch.randn(4 * 6, 4 + 6, k, k, generator=g, dtype=torch.float64, requires_grad=True)
        b = torch.randn(4 * 6, generator=g, dtype=torch.float64, requires_grad=True)
        got, want = convlstm(x, w, b, 1.0), concatenated(x, w, b)
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        grads = torch.autograd.grad(got.square().sum(), (x, w, b))
        for a, e in zip(grads, torch.autograd.grad(want.square().sum(), (x, w, b))):
            torch.testing.assert_close(a, e, rtol=1e-12, atol=1e-12)
