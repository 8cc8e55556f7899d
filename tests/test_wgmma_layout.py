"""The wgmma kernels' addressing (ops/im2col/patch_wgmma.cuh, halo_s2.cuh's WGMMA consumers), replayed on the CPU.

The GPU tests check these kernels' outputs on the H200; what can be wrong in their index arithmetic is also checked
here, on every change, with the kernels' formulas written out in numpy:

* the 128-byte swizzle (``sw128_offset`` in wgmma.cuh, which conv2's weight staging uses, and what the tensor map's
  SWIZZLE_128B lands for conv3/conv4's weights): a bijection onto the operand's bytes, row r's 16-byte chunk c at
  chunk c ^ (r % 8) of its 128 bytes, and what the tensor core reads from the descriptors our kernels build (start
  advanced 32 bytes per k8-block inside the atom) is what the staging put there (tests/wgmma_model.py);
* conv_patch_wgmma's A registers: for conv4 (8 x 8 inputs) and conv3 (15 x 15, the padding taps zeroed), the
  products the replayed fragments and the weights' natural k order make must equal a float64 convolution, every
  load stays inside its image's planes, and each load instruction touches every bank at most once (lanes reading one
  word share it).
"""
from __future__ import annotations

import numpy as np
import pytest
from wgmma_model import k8_block_start, sw128_offset, wgmma_b_address

CK = 8  # channels per K-step: 32 K-slots, one 128-byte weight row


@pytest.mark.parametrize("rows, k_total", [(64, 288), (128, 32), (128, 512)])
def test_sw128_is_a_bijection_with_the_swizzle_wgmma_reads(rows, k_total):
    offsets = np.array([[sw128_offset(rows, r, k) for k in range(k_total)] for r in range(rows)])
    assert sorted(offsets.ravel().tolist()) == list(range(0, rows * k_total * 4, 4))
    for r in range(rows):
        for k in range(0, k_total, 4):
            off = offsets[r, k]
            block, within = divmod(off, rows * 128)
            row, byte = divmod(within, 128)
            assert block == k // 32 and row == r
            assert byte // 16 == ((k % 32) // 4) ^ (r % 8)  # chunk c of row r at c ^ (r % 8)
    # what the tensor core reads for each k8-block at the descriptor's start address is what the staging put there
    for k0 in range(0, k_total, 8):
        for r in range(rows):
            for e in range(8):
                assert wgmma_b_address(k8_block_start(rows, k0), r, e) == offsets[r, k0 + e]


def _a_fragment_offsets(ho: int, pad: bool, warp: int, lane: int):
    """conv_patch_wgmma's per-thread A offsets (words, channel 0 of the stage's planes) and validity for rows g, g + 8."""
    h = w = 2 * ho - (1 if pad else 0)
    hw, p = h * w, ho * ho
    g, t = lane // 4, lane % 4
    img = (warp // 4) * (64 // p) + (16 * (warp % 4)) // p
    pb = (16 * (warp % 4)) % p
    out = []
    for v in range(2):
        px = pb + g + 8 * v
        row, col = 2 * (px // ho) + t // 2, 2 * (px % ho) + t % 2
        inside = row < h and col < w
        off = img * CK * hw + min(row, h - 1) * w + min(col, w - 1)
        out.append((off, inside, img, px))
    return out


def replay(ho: int, pad: bool, wgs: int = 1, channels: int = 16, filters: int = 8, seed: int = 0, mask: bool = True):
    """(max |y - float64 conv|, load instructions with a bank conflict, loads outside their image's planes); mask
    False: the padding taps read whatever their clamped address holds."""
    rng = np.random.default_rng(seed)
    h = w_ = 2 * ho - (1 if pad else 0)
    hw, p = h * w_, ho * ho
    imgs = wgs * 64 // p
    x = rng.standard_normal((imgs, channels, h, w_))
    wt = rng.standard_normal((filters, channels, 2, 2))
    padded = np.zeros((imgs, channels, 2 * ho, 2 * ho))
    padded[:, :, :h, :w_] = x
    ref = np.einsum("ncyixj,ocij->noyx", padded.reshape(imgs, channels, ho, 2, ho, 2), wt).reshape(imgs, filters, p)
    wmat = wt.reshape(filters, 4 * channels)  # W's natural k order: k = 4c + 2i + j
    y = np.zeros((imgs, filters, p))
    conflicts = outside = 0
    for ks in range(channels // CK):
        stage = x[:, ks * CK:(ks + 1) * CK].reshape(-1)  # the stage: each image's 8 dense planes, images in a row
        for warp in range(4 * wgs):
            frags = [_a_fragment_offsets(ho, pad, warp, lane) for lane in range(32)]
            for kb in range(CK // 2):
                for r in range(4):  # a0, a1: channel 2 kb at rows g, g + 8; a2, a3: channel 2 kb + 1
                    words = [frags[lane][r % 2][0] + (2 * kb + r // 2) * hw for lane in range(32)]
                    banks: dict[int, set[int]] = {}
                    for word in words:
                        banks.setdefault(word % 32, set()).add(word)
                    conflicts += any(len(ws) > 1 for ws in banks.values())
                    for lane in range(32):
                        off, inside, img, px = frags[lane][r % 2]
                        lo = img * CK * hw
                        outside += not (lo <= words[lane] < lo + CK * hw)
                        a = stage[words[lane]] if inside or not mask else 0.0
                        slot = lane % 4 + 4 * (r // 2)  # k-slot t (a0, a1) or t + 4 (a2, a3)
                        k = ks * 4 * CK + 8 * kb + slot
                        y[img, :, px] += a * wmat[:, k]
    return float(np.abs(y - ref).max()), conflicts, outside


@pytest.mark.parametrize("ho, pad, wgs", [(4, False, 1), (4, False, 2), (8, True, 1), (8, True, 2)])
def test_replayed_fragments_equal_float64_convolution(ho, pad, wgs):
    err, conflicts, outside = replay(ho, pad, wgs)
    assert err < 1e-9
    assert outside == 0
    assert conflicts == 0


def test_the_replay_can_fail():
    """Without the padding mask conv3's replay must be wrong: the test above is not vacuous."""
    err, _, _ = replay(8, True, mask=False)
    assert err > 1e-3
