"""ops/padding.py: the once-written zero padding equals F.pad, keeps the memory format, and passes gradients."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.ops.padding import _words_fit, copy_pixels, pad_copy, zero_border, zero_pixels


@pytest.mark.parametrize("pads", [(0, 1, 0, 1), (1, 1, 1, 1), (2, 0, 1, 3), (0, 0, 0, 0)])
@pytest.mark.parametrize("channels_last", [True, False])
def test_pad_copy_equals_f_pad_with_gradient(pads, channels_last):
    g = torch.Generator().manual_seed(sum(pads))
    x = torch.randn(3, 5, 4, 6, generator=g, dtype=torch.float64)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    top, bottom, left, right = pads
    ours_in, ref_in = x.clone().requires_grad_(), x.clone().requires_grad_()
    ours, ref = pad_copy(ours_in, pads), F.pad(ref_in, (left, right, top, bottom))
    torch.testing.assert_close(ours, ref, rtol=0, atol=0)
    assert ours.is_contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    dout = torch.randn(ref.shape, generator=g, dtype=torch.float64)
    ours.backward(dout)
    ref.backward(dout)
    torch.testing.assert_close(ours_in.grad, ref_in.grad, rtol=0, atol=0)


def test_pad_copy_gradient_is_the_interior_view():
    """The input's gradient is a view into the padded gradient (no copy), in its channels-last order."""
    x = torch.randn(2, 3, 4, 5).contiguous(memory_format=torch.channels_last).requires_grad_()
    z = x * 2  # a non-leaf: autograd.grad hands back exactly what the backward returned
    dout = torch.randn(2, 3, 5, 7).contiguous(memory_format=torch.channels_last)
    (grad,) = torch.autograd.grad(pad_copy(z, (1, 0, 2, 0)), z, dout)
    assert grad.data_ptr() == dout[:, :, 1:, 2:].data_ptr() and grad.stride() == dout.stride()
    torch.testing.assert_close(grad, dout[:, :, 1:, 2:], rtol=0, atol=0)


@pytest.mark.parametrize("dtype, channels, words", [
    (torch.bfloat16, 32, True), (torch.float16, 12, True), (torch.float32, 6, True), (torch.bfloat16, 6, False),
    (torch.float32, 3, False), (torch.float64, 4, False)])
def test_copy_pixels_into_a_padded_interior(dtype, channels, words):
    """copy_pixels equals copy_ into the interior of a channels-last padded buffer and from a crop of one, in 8-byte
    words where each pixel's channels fill whole words (``words``), else by copy_; the border is left alone."""
    g = torch.Generator().manual_seed(channels)
    x = torch.randn(3, channels, 5, 7, generator=g).to(dtype).contiguous(memory_format=torch.channels_last)
    buf = torch.full((3, channels, 7, 8), 9.0, dtype=dtype).contiguous(memory_format=torch.channels_last)
    interior = buf[:, :, 1:6, 1:8]
    assert (_words_fit(interior) and _words_fit(x)) == words or dtype == torch.float64
    copy_pixels(interior, x)
    assert torch.equal(interior, x) and (buf[:, :, 0] == 9).all() and (buf[:, :, 6:] == 9).all()
    assert (buf[:, :, :, 0] == 9).all()
    crop = torch.empty_like(x)
    copy_pixels(crop, buf[:, :, 1:6, 1:8])
    assert torch.equal(crop, x)


@pytest.mark.parametrize("channels, offset, words", [(32, 0, True), (32, 4, True), (4, 0, True), (6, 0, False)])
def test_copy_pixels_moves_every_bit(channels, offset, words):
    """Any bf16 bit pattern (NaN payloads, infinities, subnormals) arrives unchanged, in 8-byte words where both
    sides allow them (a channel slice ``offset`` channels in), else element by element, and nothing outside the
    destination view is written. (16-byte words measured no faster, results/copy_words/.)"""
    g = torch.Generator().manual_seed(channels + offset)
    bits = torch.randint(-2 ** 15, 2 ** 15, (3, 5, 7, channels), generator=g, dtype=torch.int16)
    x = bits.view(torch.bfloat16).permute(0, 3, 1, 2)  # channels-last (N, C, H, W)
    buf = torch.zeros(3, offset + channels + 8, 7, 9, dtype=torch.bfloat16).contiguous(
        memory_format=torch.channels_last)
    dst = buf[:, offset:offset + channels, 1:6, 1:8]
    assert (_words_fit(dst) and _words_fit(x)) == words
    copy_pixels(dst, x)
    assert torch.equal(dst.permute(0, 2, 3, 1).contiguous().view(torch.int16), bits)
    untouched = buf.clone()
    untouched[:, offset:offset + channels, 1:6, 1:8] = 0
    assert not untouched.view(torch.int16).any()
    back = torch.empty_like(x)
    copy_pixels(back, dst)
    assert torch.equal(back.permute(0, 2, 3, 1).contiguous().view(torch.int16), bits)


def test_zero_border_leaves_the_interior():
    buf = torch.full((2, 3, 5, 6), 7.0)
    zero_border(buf, (1, 2, 0, 1))
    assert (buf[:, :, 1:3, 0:5] == 7).all()
    assert buf.sum() == 7 * buf[:, :, 1:3, 0:5].numel()


@pytest.mark.parametrize("dtype, channels, words", [
    (torch.bfloat16, 8, True), (torch.float32, 4, True), (torch.bfloat16, 3, False), (torch.float64, 4, False)])
def test_zero_pixels_fills_a_channel_slice_only(dtype, channels, words):
    """zero_pixels zeroes one channel slice of a channels-last buffer (in 8-byte words where each pixel's slice fills
    whole words) and leaves the other channels alone."""
    buf = torch.full((2, channels + 4, 3, 5), 7.0, dtype=dtype).contiguous(memory_format=torch.channels_last)
    part = buf[:, 4:]
    assert _words_fit(part) == words or dtype == torch.float64
    zero_pixels(part)
    assert (part == 0).all() and (buf[:, :4] == 7).all()
