"""The sub-pixel form of a strided transposed convolution (``mscred.ops.subpixel``) and its use in the decoder.

The phase algebra is checked in float64 PyTorch against ``conv_transpose2d`` (no Triton needed); the shuffled bias +
SELU read (``bias_act_subpixel_into``) and ``SameDeconv``'s inference path run on the Triton kernels (the CPU
interpreter here, the GPU where there is one).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.model import SameDeconv
from mscred.ops import subpixel
from mscred.ops.reference import same_padding
from mscred.ops.triton import bias_act as ba

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
needs_triton = pytest.mark.skipif(not ba.is_available()[0], reason=f"Triton kernels unavailable: "
                                                                   f"{ba.is_available()[1]}")


@pytest.mark.parametrize("k, s", [(3, 2), (2, 2), (4, 2), (5, 2), (7, 2), (3, 3), (5, 3)])
@pytest.mark.parametrize("m", [1, 4, 7, 15])
def test_phases_are_the_transposed_convolution(k, s, m):
    """unshuffle(convolve(x, w)) holds conv_transpose2d's full output in its top-left corner and zeros past it."""
    g = torch.Generator().manual_seed(k * 10 + s + m)
    x = torch.randn(2, 5, m, m, generator=g, dtype=torch.float64)
    w = torch.randn(5, 3, k, k, generator=g, dtype=torch.float64)
    full = F.conv_transpose2d(x, w, stride=s)
    phases = subpixel.convolve(x, w, s)
    T = subpixel.taps(k, s)
    assert phases.shape == (2, s * s * 3, m + T - 1, m + T - 1)
    got = subpixel.unshuffle(phases, s)
    L = full.shape[-1]
    torch.testing.assert_close(got[..., :L, :L], full, rtol=1e-12, atol=1e-12)
    assert (got[..., L:, :] == 0).all() and (got[..., :, L:] == 0).all()


def test_weight_shape_and_where_the_form_pays():
    w = torch.randn(8, 4, 3, 3).contiguous(memory_format=torch.channels_last)
    assert subpixel.weight(w, 2).shape == (16, 8, 2, 2)
    assert subpixel.pays(3, 2) and not subpixel.pays(2, 2) and not subpixel.pays(3, 1)


@needs_triton
@pytest.mark.parametrize("selu", [True, False])
@pytest.mark.parametrize("top, size", [(0, 8), (1, 7), (0, 6)])
def test_shuffled_bias_act_into_a_channel_slice(selu, top, size):
    """The kernel's phase read + crop + bias (+ SELU) into the lower half of a wider channels-last buffer equals the
    PyTorch ops on the unshuffled output; the other half untouched."""
    g = torch.Generator().manual_seed(top + size)
    x = torch.randn(3, 6, 4, 4, generator=g).to(DEVICE).contiguous(memory_format=torch.channels_last)
    w = torch.randn(6, 5, 3, 3, generator=g).to(DEVICE)
    bias = torch.randn(5, generator=g).to(DEVICE)
    phases = subpixel.convolve(x, w, 2)
    buf = torch.full((3, 10, size, size), 5.0, device=DEVICE).contiguous(memory_format=torch.channels_last)
    got = ba.bias_act_subpixel_into(phases, bias, selu, 2, top, top, buf[:, :5])
    assert got.data_ptr() == buf.data_ptr()
    expect = ba.reference(subpixel.unshuffle(phases, 2), bias, selu, top, top, size, size)
    torch.testing.assert_close(buf[:, :5], expect, rtol=1e-6, atol=1e-6)
    assert (buf[:, 5:] == 5.0).all()
    with pytest.raises(ValueError, match="crop"):
        ba.bias_act_subpixel_into(phases, bias, selu, 2, size, size, buf[:, :5])


def _deconv(dtype):
    torch.manual_seed(0)
    deconv = SameDeconv(8, 4, 3, 2, selu=True, fused_act=True).to(DEVICE)
    deconv.bias.data.normal_()
    return deconv.to(dtype)


@needs_triton
@pytest.mark.parametrize("m, size", [(15, 30), (8, 15), (3, 5)])
def test_deconv_inference_takes_the_subpixel_form(m, size, monkeypatch):
    """bf16 inference of a 3 x 3 stride-2 SameDeconv (deconv2's shape) goes through the sub-pixel convolution and
    stays within twice the transposed convolution's bf16 error of the float64 oracle; with autograd, or
    MSCRED_SUBPIXEL_DECONV=0, the transposed convolution runs."""
    calls, real = [], subpixel.convolve
    monkeypatch.setattr(subpixel, "convolve", lambda *a: calls.append(1) or real(*a))
    deconv = _deconv(torch.bfloat16)
    x = torch.randn(5, 8, m, m, device=DEVICE).contiguous(memory_format=torch.channels_last)
    top = same_padding(size, 3, 2)[0]
    oracle = F.selu(F.conv_transpose2d(x.double(), deconv.weight.double(), deconv.bias.double(), stride=2)
                    [:, :, top:top + size, top:top + size])
    with torch.no_grad():
        ours = deconv(x.bfloat16(), size)
    assert calls == [1] and ours.shape == (5, 4, size, size) and ours.dtype == torch.bfloat16
    monkeypatch.setenv("MSCRED_SUBPIXEL_DECONV", "0")
    with torch.no_grad():
        theirs = deconv(x.bfloat16(), size)
    assert calls == [1]
    rel = lambda a: ((a.double() - oracle).norm() / oracle.norm()).item()  # noqa: E731
    assert rel(ours) <= 2 * rel(theirs) + 1e-3
    monkeypatch.delenv("MSCRED_SUBPIXEL_DECONV")
    deconv(x.bfloat16(), size)  # autograd on (the weight requires grad): the transposed convolution
    assert calls == [1]
