"""The shared-memory layout of the conv2 halo kernel (``conv_halo3x3s2``, ops/im2col/halo_s2.cuh), replayed on the CPU.

The kernel runs only on a GPU; what can go wrong in its index arithmetic (the pair-plane layout of the staged input,
the permuted K order of the weights, the B-fragment addresses, the two consumer groups on alternate tiles, the
per-warp output slices and runs) and in its bank-conflict design can be checked here. This replays the kernel's
addressing in numpy with the layout constants read from the header itself (plane stride, shift, output slice stride
and channels), so that changing them there is checked: the staged input is written where the producer warps write
it, every consumer lane's 8-byte B loads and the weights are read where the kernel reads them, the m16n8k8 products
are summed as the MMAs sum them, and the outputs go through the per-warp slices; the result must equal a float64
convolution (TF "same", stride 2), every output written, and at full tiles no half-warp's 8-byte B load or slice
store may touch a bank twice, nor any warp's slice read. The same for the WGMMA consumers (their weights staged in
the 128-byte swizzle and read as the PTX ISA says wgmma reads them, their accumulators in wgmma's layout). (The kernel
itself is checked against float64 on the GPU: tests/test_im2col_fast_paths.py.)
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
from wgmma_model import k8_block_start, sw128_offset, wgmma_b_address

HEADER = Path(__file__).resolve().parents[1] / "src" / "mscred" / "ops" / "im2col" / "halo_s2.cuh"


def _constant(name: str) -> int:
    found = re.search(rf"constexpr int {name} = (\d+);", HEADER.read_text())
    assert found, f"{name} not found in {HEADER.name}"
    return int(found.group(1))


CS2, SHIFT, LDO = _constant("kH2CS2"), _constant("kH2Shift"), _constant("kH2Ldo")
LDO_WGMMA = _constant("kH2LdoWgmma")
SLICE_C = _constant("kH2SliceC")
PIXELS, MAX_R, C, O = _constant("kH2Pixels"), _constant("kH2MaxR"), 32, 64
K, LDW = 9 * C, 9 * C + 4
BUF = 8 * CS2 + SHIFT


def pair_plane(pp: int) -> int:
    return pp * CS2 + (SHIFT if pp >= 4 else 0)


def pair(c: int) -> int:
    return (c & 1) + 2 * (c >> 2)


def slot_channel(t: int, h: int, s: int) -> int:
    return (t & 1) + 8 * (t >> 1) + 2 * h + 4 * s


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


def replay(batch: int, n: int, seed: int = 0, blocks: int = 3, wgmma: bool = False) -> tuple[float, int, int]:
    """(max |y - float64 conv|, outputs never written, accesses with a bank conflict) for a batch of n x n inputs,
    the tiles dealt to `blocks` persistent blocks as the kernel deals them. wgmma: the WGMMA consumers (the weights
    staged in the 128-byte swizzle and read as wgmma reads them at the descriptor's offsets, the group's pixels as
    two m64 blocks of A rows, the accumulators in wgmma's layout, 4-byte slice stores)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((batch, C, n, n))
    w = rng.standard_normal((O, C, 3, 3))
    bias = rng.standard_normal(O)
    ho, pad = same(n, 3, 2)
    wp = (ho + 7) // 8 * 8
    rows_per_tile = min(PIXELS // wp, MAX_R, ho)
    sw, nr = 2 * ho + 1, 2 * rows_per_tile + 1
    tiles_per_image = -(-ho // rows_per_tile)
    assert sw <= 31

    # weights in the kernel's K order: k = tap * 32 + stage * 16 + s * 8 + t + 4h
    ws = np.zeros((O, LDW))
    for k in range(K):
        tap, q = divmod(k, 32)
        ws[:, k] = w.reshape(O, C, 9)[:, (q // 16) * 16 + slot_channel(q % 4, (q // 4) % 2, (q // 8) % 2), tap]

    if wgmma:  # staged by h2_stage_weights<.., true>; each k8-block read at tap * 8 KB + 64 half + 32 ks bytes
        staged = np.full(O * K, np.nan)
        for o in range(O):
            for k in range(K):
                staged[sw128_offset(O, o, k) // 4] = ws[o, k]
        ws = np.zeros((O, LDW))
        for k0 in range(0, K, 8):
            start = k8_block_start(O, k0)
            for o in range(O):
                for e in range(8):
                    ws[o, k0 + e] = staged[wgmma_b_address(start, o, e) // 4]

    padded = np.zeros((batch, C, n + 4, n + 4))
    padded[:, :, pad:pad + n, pad:pad + n] = x
    ref = np.zeros((batch, O, ho, ho)) + bias[None, :, None, None]
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,oc->nohw", padded[:, :, i:i + 2 * ho:2, j:j + 2 * ho:2], w[:, :, i, j])

    y = np.full((batch, O, ho, ho), np.nan)
    conflicts = 0
    for tile in range(batch * tiles_per_image):
        img, rb = divmod(tile, tiles_per_image)
        r0 = rb * rows_per_tile
        rows = min(ho - r0, rows_per_tile)
        group = (tile // blocks) % 2  # the block's k-th tile goes to consumer group k % 2
        acc = {}
        for half in (0, 1):
            buf = np.full(BUF, np.nan)  # unstaged words poison the outputs that read them
            top = 2 * r0 - pad
            for pw in range(4):  # producer warp pw: pair planes 2 pw, 2 pw + 1 (channels c0, c0 + 2), lane = column
                for pp in (2 * pw, 2 * pw + 1):
                    c0 = (pp & 1) + 4 * (pp >> 1)
                    for pc in range(2):
                        for sr in range(2 * MAX_R + 1):
                            for lane in range(sw):
                                inside = 0 <= lane - pad < n and 0 <= top + sr < n and sr < nr
                                value = x[img, half * 16 + c0 + 2 * pc, top + sr, lane - pad] if inside else 0.0
                                buf[pair_plane(pp) + 2 * lane + 2 * sr * sw + pc] = value
            for wn in range(4):  # the group's consumer warps: all 64 channels x 32 pixels (wn)
                for j in range(4):
                    b_frag = np.zeros((9, 2, 8, 8))  # tap, K-step, k, pixel
                    addresses = {}
                    for g in range(8):
                        row, col = divmod(wn * 32 + j * 8 + g, wp)
                        if row >= rows_per_tile:
                            row = col = 0
                        for t in range(4):
                            for ti in range(3):
                                base = pair_plane(pair(slot_channel(t, 0, 0))) + 2 * ((2 * row + ti) * sw + 2 * col)
                                for tj in range(3):
                                    for ks in range(2):
                                        a = base + 2 * ks * CS2 + 2 * tj
                                        assert a % 2 == 0  # 8-byte aligned
                                        b_frag[ti * 3 + tj, ks, t, g] = buf[a]
                                        b_frag[ti * 3 + tj, ks, t + 4, g] = buf[a + 1]
                                        addresses.setdefault((ti, tj, ks), {})[(g, t)] = a
                    conflicts += sum(_half_warp_conflicts(load) for load in addresses.values())
                    if wgmma:  # A rows g (+ 8) of M block mb are pixel blocks 2 mb (+ 1): this block's 8 rows
                        a = acc.setdefault((wn, j), np.tile(bias[None, :], (8, 1)))  # [pixel g, channel]
                        for tap in range(9):
                            for ks in range(2):
                                k0 = tap * 32 + half * 16 + ks * 8
                                a = a + b_frag[tap, ks].T @ ws[:, k0:k0 + 8].T
                        acc[(wn, j)] = a
                        continue
                    for i in range(4):
                        m0 = i * 16
                        a = acc.setdefault((wn, i, j), np.tile(bias[m0:m0 + 16, None], (1, 8)))
                        for tap in range(9):
                            for ks in range(2):
                                k0 = tap * 32 + half * 16 + ks * 8
                                a = a + ws[m0:m0 + 16, k0:k0 + 8] @ b_frag[tap, ks]
                        acc[(wn, i, j)] = a
        for wn in range(4):  # per-warp epilogue: 16 channels a pass through the warp's slice, then one run a channel
            warp = group * 4 + wn
            assert warp < 8
            wrow0 = wn * 32 // wp
            wrows = min(rows - wrow0, 32 // wp)
            run = max(wrows, 0) * ho
            reads = [(lane // ho) * wp + lane % ho for lane in range(run)]  # h2_slice_word
            conflicts += len({r % 32 for r in reads}) != len(reads)
            ldo = LDO_WGMMA if wgmma else LDO
            for i in range(4):
                wout = np.full(SLICE_C * ldo, np.nan)
                stores = {}
                if wgmma:  # thread (g, t): channels 16 i + 8 jj + 2 t + h at pixels 16 mb + 8 v + g, one word each
                    for jj in range(2):
                        for h in range(2):
                            for mb in range(2):
                                for v in range(2):
                                    words = []
                                    for g in range(8):
                                        for t in range(4):
                                            at = (8 * jj + 2 * t + h) * ldo + 16 * mb + 8 * v + g
                                            wout[at] = acc[(wn, 2 * mb + v)][g, 16 * i + 8 * jj + 2 * t + h]
                                            words.append(at)
                                    conflicts += len({a % 32 for a in words}) != len(words)
                else:
                    for hi in range(2):
                        for j in range(4):
                            for g in range(8):
                                for t in range(4):
                                    at = (g + 8 * hi) * ldo + j * 8 + 2 * t  # h2_write_slice: pixels 2t, 2t + 1
                                    assert at % 2 == 0
                                    stores.setdefault((hi, j), {})[(g, t)] = at
                                    for u in range(2):
                                        wout[at + u] = acc[(wn, i, j)][g + 8 * hi, 2 * t + u]
                    conflicts += sum(_half_warp_conflicts(store) for store in stores.values())
                for c in range(SLICE_C):
                    flat = y[img, i * 16 + c].reshape(-1)
                    flat[(r0 + wrow0) * ho:(r0 + wrow0) * ho + run] = wout[c * ldo + np.array(reads, dtype=int)]
    return float(np.nanmax(np.abs(y - ref))), int(np.isnan(y).sum()), conflicts


@pytest.mark.parametrize("wgmma", [False, True])
@pytest.mark.parametrize("batch,n", [(2, 30), (1, 29), (1, 17), (1, 16), (2, 9), (2, 5)])
def test_replayed_kernel_equals_float64_convolution(batch, n, wgmma):
    # n = 30: conv2 of the thesis workload (two tiles of 8 rows per image); 29, 17, 9, 5: odd inputs (TF "same" pads
    # the top and left too) and a last tile of fewer rows; 16: 8-pixel rows (half the tile's pixels unused)
    err, missing, _ = replay(batch, n, wgmma=wgmma)
    assert missing == 0
    assert err < 1e-9


@pytest.mark.parametrize("wgmma", [False, True])
@pytest.mark.parametrize("n", [30, 29, 17])
def test_shared_memory_accesses_are_conflict_free_at_full_tiles(n, wgmma):
    # rows of 15 / 15 / 9 pixels padded to 16: every 8-byte B load and slice store of every consumer lane, half-warp by
    # half-warp (WGMMA: its 4-byte slice stores warp by warp), and every warp's read of its slice
    assert replay(1, n, wgmma=wgmma)[2] == 0


def test_the_wgmma_weight_replay_can_fail():
    """Staged without the swizzle, the weights as wgmma reads them are wrong: the replay above is not vacuous."""
    row, k = 3, 8  # row 3's chunk 2: swizzled to chunk 1, where an unswizzled staging would not put it
    start = k8_block_start(O, k)
    assert wgmma_b_address(start, row, 0) == sw128_offset(O, row, k)
    assert wgmma_b_address(start, row, 0) != row * 128 + 4 * k
