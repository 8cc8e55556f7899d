"""conv3's kernel (``conv_patch_pad``, ops/im2col/patch_pad.cuh), its addressing replayed on the CPU.

Written before the kernel first ran on a GPU (where it then matched float64 at every size the harness and the GPU
tests try); what can be wrong in its index arithmetic is checked here, on every change: the stage holds each image's 8-channel run of x as it is (dense 15 x 15
planes), the A fragments are W's natural k order (slot s of k8-block kb = weight 8 kb + s: channel 2 kb + s / 4, tap
s % 4), each lane's B values are tap t of channels 2 kb and 2 kb + 1 at ``b_off + (2 kb (+1)) * HW`` with the taps
on the missing bottom row / right column masked to zero and their addresses clamped to the last row / column. Replayed in numpy with the
kernel's formulas, the products must equal a float64 convolution (2 x 2, stride 2, TF "same": padding bottom/right
only), no read may leave its image's block, and each B load instruction must touch every bank at most once (lanes
reading one word share it).
"""
from __future__ import annotations

import numpy as np
import pytest

CK = 8


def replay(batch: int, ho: int, channels: int = 16, filters: int = 32, seed: int = 0, mask: bool = True):
    """(max |y - float64 conv|, B loads with a bank conflict, reads outside the image block) for n x n inputs with
    n = 2 ho - 1; mask False: the taps on the missing row and column read whatever the dense block holds there."""
    rng = np.random.default_rng(seed)
    h = w_ = 2 * ho - 1
    hw, p_img = h * w_, ho * ho
    x = rng.standard_normal((batch, channels, h, w_))
    wt = rng.standard_normal((filters, channels, 2, 2))
    bias = rng.standard_normal(filters)

    padded = np.zeros((batch, channels, 2 * ho, 2 * ho))
    padded[:, :, :h, :w_] = x  # TF "same" for an odd size with k = s = 2: one zero row and column at the end
    ref = np.einsum("ncij,ocij->no", padded.reshape(batch, channels, ho, 2, ho, 2).transpose(0, 1, 3, 5, 2, 4)
                    .reshape(batch, channels, 2, 2, p_img).transpose(0, 4, 1, 2, 3).reshape(batch * p_img, channels, 2, 2),
                    wt).reshape(batch, p_img, filters).transpose(0, 2, 1) + bias[None, :, None]

    k_total = 4 * channels
    wmat = wt.reshape(filters, k_total)  # W's natural (c, i, j) order: k = 4c + 2i + j
    img_words = CK * hw
    y = np.zeros((batch, filters, p_img))
    conflicts = outside = 0
    for n in range(batch):
        acc = np.zeros((filters, p_img))
        for ks in range(channels // CK):
            block = x[n, ks * CK:(ks + 1) * CK].reshape(-1)  # the stage: the image's 8-channel run as it is
            assert block.size == img_words
            b = np.zeros((4 * CK, p_img))  # k (within the K-step) x pixel, as the MMAs see it
            for nb in range(p_img // 8):
                for kb in range(CK // 2):
                    for half in (0, 1):  # b0: channel 2kb, b1: channel 2kb + 1 (one load instruction each)
                        words = {}
                        for g in range(8):
                            pix = nb * 8 + g
                            oh, ow = divmod(pix, ho)
                            for t in range(4):
                                row, col = 2 * oh + t // 2, 2 * ow + t % 2
                                inside = row < h and col < w_
                                b_off = min(row, h - 1) * w_ + min(col, w_ - 1)  # the kernel's clamp
                                if not mask:
                                    b_off = row * w_ + col
                                addr = b_off + (2 * kb + half) * hw
                                outside += not 0 <= addr < img_words
                                value = block[addr] if inside or (not mask and addr < img_words) else 0.0
                                b[8 * kb + t + 4 * half, pix] = value
                                words[(g, t)] = addr
                        banks = {}
                        for addr in words.values():
                            banks.setdefault(addr % 32, set()).add(addr)
                        conflicts += any(len(a) > 1 for a in banks.values())
            acc += wmat[:, ks * 4 * CK:(ks + 1) * 4 * CK] @ b
        y[n] = acc + bias[:, None]
    return float(np.abs(y - ref).max()), conflicts, outside


@pytest.mark.parametrize("batch,ho", [(2, 8), (1, 4), (3, 4)])
def test_replayed_kernel_equals_float64_convolution(batch, ho):
    # ho = 8: conv3 at n = 30 (15 x 15 -> 8 x 8); ho = 4: the same kernel for 7 x 7 inputs (ho x ho must be a
    # multiple of 8: n8-blocks within one image)
    err, conflicts, outside = replay(batch, ho)
    assert err < 1e-9
    assert outside == 0


def test_b_loads_are_conflict_free():
    assert replay(1, 8)[1] == 0


def test_the_replay_can_fail():
    # without the mask the taps on the missing row and column read the next row or plane of the dense block: the
    # outputs of the last output row and column come out wrong, and the comparison sees it
    assert replay(1, 8, mask=False)[0] > 1e-3
