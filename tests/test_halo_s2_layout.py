"""The shared-memory layout of the conv2 halo kernel (``conv_halo3x3s2``, ops/im2col/halo_s2.cuh), replayed on the CPU.

The kernel runs only on a GPU; what can go wrong in its index arithmetic (the pair-plane layout of the staged input,
the permuted K order of the weights, the B-fragment addresses, the two consumer groups on alternate tiles, the
per-warp output slices and runs) and in its bank-conflict design can be checked here. This replays the kernel's
addressing in numpy with the layout constants read from the header itself (plane stride, shift, output slice stride
and channels), so that changing them there is checked: the staged input is written where the producer warps write
it, every consumer lane's 8-byte B loads and the weights are read where the kernel reads them, the m16n8k8 products
are summed as the MMAs sum them, and the outputs go through the per-warp slices; the result must equal a float64
convolution (TF "same", stride 2), every output written, and no half-warp's 8-byte B load or slice store may touch a
bank twice, nor any warp's slice read. (The kernel itself is checked against float64 on the GPU:
tests/test_im2col_fast_paths.py.)
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

HEADER = Path(__file__).resolve().parents[1] / "src" / "mscred" / "ops" / "im2col" / "halo_s2.cuh"


def _constant(name: str) -> int:
    found = re.search(rf"constexpr int {name} = (\d+);", HEADER.read_text())
    assert found, f"{name} not found in {HEADER.name}"
    return int(found.group(1))


CS2, SHIFT, LDO = _constant("kH2CS2"), _constant("kH2Shift"), _constant("kH2Ldo")
SLICE_C, STAGE_C, WP = _constant("kH2SliceC"), _constant("kH2StageC"), _constant("kH2Wp")
WARP_PIXELS, MAX_R = _constant("kH2WarpPixels"), _constant("kH2MaxR")
assert "kH2Pixels = kH2WarpPixels * kH2GroupWarps" in HEADER.read_text() and "kH2GroupWarps = 4" in HEADER.read_text()
PIXELS = 4 * WARP_PIXELS
C, O = 32, 64
K, LDW = 9 * C, 9 * C + 4
PAIRS = STAGE_C // 2
BUF = PAIRS * CS2 + SHIFT
WARP_ROWS = WARP_PIXELS // WP


def pair_plane(pp: int) -> int:
    return pp * CS2 + (SHIFT if pp >= 2 else 0)


def pair(c: int) -> int:
    return (c & 1) + 2 * (c >> 2)


def slot_channel(t: int, h: int) -> int:
    return (t & 1) + 4 * (t >> 1) + 2 * h


def plane_channel(pp: int) -> int:
    return (pp & 1) + 4 * (pp >> 1)


def same(n: int, k: int, stride: int) -> tuple[int, int]:
    out = (n + stride - 1) // stride
    return out, max((out - 1) * stride + k - n, 0) // 2


def _half_warp_conflicts(words: dict[tuple[int, int], int]) -> int:
    """Half-warps (lanes 4g + t < 16 or >= 16) whose 8-byte accesses at these word addresses touch a bank twice."""
    bad = 0
    for half_warp in (0, 1):
        banks = [b % 32 for (g, t), a in words.items() if (4 * g + t) // 16 == half_warp for b in (a, a + 1)]
        bad += len(set(banks)) != len(banks)
    return bad


def replay(batch: int, h: int, w: int | None = None, seed: int = 0, blocks: int = 3) -> tuple[float, int, int]:
    """(max |y - float64 conv|, outputs never written, accesses with a bank conflict) for a batch of h x w inputs,
    the tiles dealt to `blocks` persistent blocks as the kernel deals them."""
    w = h if w is None else w
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, C, h, w))
    wt = rng.standard_normal((O, C, 3, 3))
    bias = rng.standard_normal(O)
    ho, pad_t = same(h, 3, 2)
    wo, pad_l = same(w, 3, 2)
    assert 9 <= wo <= 15  # the kernel's shapes (halo2_shape)
    rows_per_tile = min(PIXELS // WP, MAX_R, ho)
    sw, nr = 2 * wo + 1, 2 * rows_per_tile + 1
    tiles_per_image = -(-ho // rows_per_tile)
    stages = C // STAGE_C

    # weights in the kernel's K order: k = tap * 32 + stage * 8 + t + 4h
    ws = np.zeros((O, LDW))
    for k in range(K):
        tap, q = divmod(k, 32)
        ws[:, k] = wt.reshape(O, C, 9)[:, (q // STAGE_C) * STAGE_C + slot_channel(q % 4, (q // 4) % 2), tap]

    padded = np.zeros((batch, C, h + 4, w + 4))
    padded[:, :, pad_t:pad_t + h, pad_l:pad_l + w] = x
    ref = np.zeros((batch, O, ho, wo)) + bias[None, :, None, None]
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 2 * ho:2, j:j + 2 * wo:2], wt[:, :, i, j])

    y = np.full((batch, O, ho, wo), np.nan)
    conflicts = 0
    for tile in range(batch * tiles_per_image):
        img, rb = divmod(tile, tiles_per_image)
        r0 = rb * rows_per_tile
        rows = min(ho - r0, rows_per_tile)
        group = (tile // blocks) % 2  # the block's k-th tile goes to consumer group k % 2
        acc = {}
        for st in range(stages):
            # unstaged words poison the outputs that read them; reads past the buffer (pixels past R rows) land in
            # the next buffer or the weights in the kernel: NaN here, and never stored
            buf = np.full(3 * BUF, np.nan)
            top = 2 * r0 - pad_t
            for pw in range(PAIRS):  # producer warp pw: pair plane pw (channels c0, c0 + 2), lane = staged column
                c0 = plane_channel(pw)
                for pc in range(2):
                    for sr in range(2 * MAX_R + 1):
                        for lane in range(sw):
                            inside = 0 <= lane - pad_l < w and 0 <= top + sr < h and sr < nr
                            value = x[img, st * STAGE_C + c0 + 2 * pc, top + sr, lane - pad_l] if inside else 0.0
                            buf[pair_plane(pw) + 2 * lane + 2 * sr * sw + pc] = value
            for wn in range(4):  # the group's consumer warps: all 64 channels x 64 pixels (wn)
                if wn * WARP_ROWS >= rows_per_tile:
                    continue  # no pixel of this warp in the tile: it skips its MMAs
                for j in range(WARP_PIXELS // 8):
                    b_frag = np.zeros((9, 8, 8))  # tap, k, pixel
                    addresses = {}
                    for g in range(8):
                        row, col = WARP_ROWS * wn + j // 2, 8 * (j % 2) + g
                        for t in range(4):
                            base = pair_plane(pair(slot_channel(t, 0))) + 2 * (2 * row * sw + 2 * col)
                            for ti in range(3):
                                for tj in range(3):
                                    a = base + 2 * ti * sw + 2 * tj
                                    assert a % 2 == 0 and a + 1 < 3 * BUF  # 8-byte aligned, inside shared memory
                                    b_frag[ti * 3 + tj, t, g] = buf[a]
                                    b_frag[ti * 3 + tj, t + 4, g] = buf[a + 1]
                                    addresses.setdefault((ti, tj), {})[(g, t)] = a
                    conflicts += sum(_half_warp_conflicts(load) for load in addresses.values())
                    for i in range(4):
                        m0 = i * 16
                        a = acc.setdefault((wn, i, j), np.tile(bias[m0:m0 + 16, None], (1, 8)))
                        for tap in range(9):
                            k0 = tap * 32 + st * STAGE_C
                            a = a + ws[m0:m0 + 16, k0:k0 + 8] @ b_frag[tap]
                        acc[(wn, i, j)] = a
        for wn in range(4):  # per-warp epilogue: 8 channels a pass through the warp's slice, two stores a channel
            if wn * WARP_ROWS >= rows_per_tile:
                continue
            warp = group * 4 + wn
            assert warp < 8
            wrow0 = wn * WARP_ROWS
            wrows = min(rows - wrow0, WARP_ROWS)
            run = max(wrows, 0) * wo
            part = (32 // WP) * wo
            reads = {half: [32 * half + (lane // wo) * WP + lane % wo for lane in range(part)
                            if half * part + lane < run] for half in (0, 1)}  # h2_slice_word
            conflicts += sum(len({r % 32 for r in rd}) != len(rd) for rd in reads.values())
            for pas in range(64 // SLICE_C):  # pass: rows g + 8 (pass % 2) of m16 tile pass // 2
                i, hi = divmod(pas, 2)
                wout = np.full(SLICE_C * LDO, np.nan)
                stores = {}
                for j in range(WARP_PIXELS // 8):
                    for g in range(8):
                        for t in range(4):
                            at = g * LDO + j * 8 + 2 * t  # h2_write_slice: pixels 2t, 2t + 1
                            assert at % 2 == 0
                            stores.setdefault(j, {})[(g, t)] = at
                            for u in range(2):
                                wout[at + u] = acc[(wn, i, j)][g + 8 * hi, 2 * t + u]
                conflicts += sum(_half_warp_conflicts(store) for store in stores.values())
                for c in range(SLICE_C):
                    flat = y[img, pas * SLICE_C + c].reshape(-1)
                    for half in (0, 1):
                        rd = reads[half]
                        start = (r0 + wrow0) * wo + half * part
                        flat[start:start + len(rd)] = wout[c * LDO + np.array(rd, dtype=int)]
    return float(np.nanmax(np.abs(y - ref))), int(np.isnan(y).sum()), conflicts


@pytest.mark.parametrize("batch,h,w", [(2, 30, 30), (1, 29, 29), (1, 17, 17), (1, 24, 24), (1, 60, 30), (1, 41, 19)])
def test_replayed_kernel_equals_float64_convolution(batch, h, w):
    # 30: conv2 of the thesis workload (a whole image of 15 x 15 outputs a tile); 29, 17, 41 x 19: odd inputs (TF
    # "same" pads the top and left too); 17, 24: fewer rows than a tile holds (a warp without pixels); 60 x 30 and
    # 41 x 19: two tiles per image, the second shorter
    err, missing, _ = replay(batch, h, w)
    assert missing == 0
    assert err < 1e-9


@pytest.mark.parametrize("n", [30, 29, 17])
def test_shared_memory_accesses_are_conflict_free(n):
    # rows of 15 / 15 / 9 pixels padded to 16: every 8-byte B load and slice store of every consumer lane, half-warp by
    # half-warp, and every warp's reads of its slice
    assert replay(1, n)[2] == 0
