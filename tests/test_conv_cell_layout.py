"""The conv + cell step kernel's addressing (ops/conv_cell/conv_cell.cu, level 1's build), replayed on the CPU.

The GPU tests check the kernel's outputs on the H200; what can be wrong in its index arithmetic is checked here on
every change, with the kernel's formulas written out in numpy and the tensor core's reading of its descriptors
modelled independently (the PTX ISA's layouts; the 128-byte swizzle by the absolute shared address, which the H200
confirmed: base offset 0 right, (addr >> 7) % 8 wrong, results/conv_cell_smem/):

* the row tile's staging by cp.async (chunk c of row r at chunk c ^ (r % 8)) read back through 128-byte-swizzle
  descriptors that start at each tap's row (any row of the tile) and 32 bytes per k16 step;
* the weight's staging as wgmma's no-swizzle K-major B (k halves 2,048 bytes apart, 8-column groups 128) with the
  interleaved gate columns;
* the accumulator fragments' (row, column) -> the epilogue's (pixel, gate, channel);
so that the replayed GEMM of a tile must equal a float64 convolution of the bordered rows, at every output row.
"""
from __future__ import annotations

import numpy as np
import pytest

CH = 32          # level 1's hidden channels (one 32-channel group: 128 gate columns)
C = 32
K0 = C + CH      # channels of a row: 128 bytes of bf16, one swizzle atom row
TAP_STEPS = K0 // 16
KSTEPS = 4 * TAP_STEPS
TILE = 64


def real_channel(n: int, group: int = 0) -> int:
    """The gate channel (gate * CH + channel) of wgmma column n of a group: n = 32 j + 8 q + c holds gate j's channel
    group * 32 + 8 (c / 2) + 2 q + c % 2 (the kernel's weight staging)."""
    j, q, c = n >> 5, (n >> 3) & 3, n & 7
    return j * CH + group * 32 + (c >> 1) * 8 + q * 2 + (c & 1)


def stage_weight(packed: np.ndarray) -> np.ndarray:
    """The kernel's weight staging: packed (4Ch, 4 K0) -> shared memory as bf16 elements, [k16 step][k half][column
    n][8 k]."""
    w_s = np.zeros(KSTEPS * 2048)
    for i in range(KSTEPS * 256):
        ks, n, half = i >> 8, (i >> 1) & 127, i & 1
        base = ((ks * 2 + half) * 128 + n) * 8
        w_s[base:base + 8] = packed[real_channel(n), ks * 16 + half * 8: ks * 16 + half * 8 + 8]
    return w_s


def read_b(w_s: np.ndarray, ks: int) -> np.ndarray:
    """What wgmma reads as B (16 k x 128 columns) for k16 step ks from wgmma_desc(w_base + ks * 4096, 2048, 128):
    no swizzle, K-major core matrices of 8 columns x 8 k (16 bytes a column), the k halves 2,048 bytes apart (leading
    byte offset), the 8-column groups 128 bytes apart (stride byte offset)."""
    b = np.zeros((16, 128))
    for k in range(16):
        for n in range(128):
            byte = ks * 4096 + (k // 8) * 2048 + (n // 8) * 128 + (n % 8) * 16 + (k % 8) * 2
            b[k, n] = w_s[byte // 2]
    return b


def stage_rows(xh: np.ndarray, q0: int, tile_rows: int) -> np.ndarray:
    """The kernel's load_tile: rows q0 .. q0 + tile_rows - 1 (the last row repeated past the end), chunk c of row r at
    byte r * 128 + ((c ^ (r % 8)) << 4), as bf16 elements."""
    a_s = np.full(tile_rows * K0, np.nan)
    for r in range(tile_rows):
        src = min(q0 + r, xh.shape[0] - 1)
        for c in range(K0 // 8):
            byte = r * (K0 * 2) + ((c ^ (r & 7)) << 4)
            a_s[byte // 2: byte // 2 + 8] = xh[src, c * 8: c * 8 + 8]
    return a_s


def read_a(a_s: np.ndarray, start: int) -> np.ndarray:
    """What wgmma reads as A (64 rows x 16 k) from wgmma_desc_sw128(start) with base offset 0: row m at start +
    (m / 8) * 1024 + (m % 8) * 128, element k at + 2 k, then bits [4, 7) of the byte address XORed with bits [7, 10)
    (the row buffer 1,024-byte aligned, so the absolute address's bits are the buffer offset's)."""
    a = np.zeros((TILE, 16))
    for m in range(TILE):
        for k in range(16):
            addr = start + (m // 8) * 1024 + (m % 8) * 128 + 2 * k
            a[m, k] = a_s[(addr ^ (((addr >> 7) & 7) << 4)) // 2]
    return a


def fragment_position(warp: int, lane: int, nt: int, i: int) -> tuple[int, int]:
    """(row, column) of accumulator d[nt][i] of a thread in an m64n128 wgmma (warp of the warpgroup, lane)."""
    return 16 * warp + lane // 4 + 8 * (i // 2), 8 * nt + 2 * (lane % 4) + i % 2


@pytest.mark.parametrize("B, H, W", [(2, 5, 5), (1, 7, 3), (3, 4, 9)])
def test_replayed_tile_gemm_equals_the_convolution(B, H, W):
    rng = np.random.default_rng(B * 100 + H * 10 + W)
    Hp, Wp = H + 1, W + 1
    rows = B * Hp * Wp
    xh = rng.standard_normal((rows, K0))
    w = rng.standard_normal((4 * CH, K0, 2, 2))
    packed = w.transpose(0, 2, 3, 1).reshape(4 * CH, 4 * K0)  # conv_cell.packed_weight: k = (ky * 2 + kx) K0 + ci
    w_s = stage_weight(packed)
    tile_rows = (TILE + Wp + 1 + 7) // 8 * 8  # tile_rows_of with the A operand in shared memory: whole atoms
    for tile in range((rows + TILE - 1) // TILE):
        q0 = tile * TILE
        a_s = stage_rows(xh, q0, tile_rows)
        acc = np.zeros((TILE, 128))
        for ks in range(KSTEPS):
            tap, ts = ks // TAP_STEPS, ks % TAP_STEPS
            start = ((tap >> 1) * Wp + (tap & 1)) * (K0 * 2) + ts * 32
            assert start // (K0 * 2) + TILE <= tile_rows  # a tap's rows stay inside the buffer
            acc += read_a(a_s, start) @ read_b(w_s, ks)
        assert not np.isnan(acc).any()
        for m in range(TILE):
            q = q0 + m
            b, rem = divmod(q, Hp * Wp)
            y, x = divmod(rem, Wp)
            if q >= rows or y >= H or x >= W:
                continue  # a border row of the next step's map (h = 0 written there) or past the end
            want = sum(w[:, :, ky, kx] @ xh[q + ky * Wp + kx] for ky in range(2) for kx in range(2))
            got = np.array([acc[m, n] for n in range(128)])
            np.testing.assert_allclose(got, want[[real_channel(n) for n in range(128)]], rtol=1e-12, atol=1e-12)


def test_epilogue_reads_the_gates_of_its_lane_channels():
    """The epilogue takes acc[4 j + qq][2 hh + e] as gate j of channel lane_ch + 2 qq + e (lane_ch = 8 (lane % 4)) of
    row quad + 8 hh: the fragment's column must hold exactly that gate channel, and each thread's 8 channels of a
    gate are consecutive (its 16-byte loads and stores)."""
    for warp in range(4):
        for lane in range(32):
            for j in range(4):
                for qq in range(4):
                    for hh in range(2):
                        for e in range(2):
                            row, col = fragment_position(warp, lane, 4 * j + qq, 2 * hh + e)
                            assert row == 16 * warp + lane // 4 + 8 * hh
                            assert real_channel(col) == j * CH + 8 * (lane % 4) + 2 * qq + e
    columns = sorted(real_channel(n) for n in range(128))
    assert columns == list(range(128))  # the interleaving is a permutation of the group's gate channels


def test_swizzled_staging_is_a_bijection_onto_the_buffer():
    tile_rows = 72
    offsets = sorted(r * 128 + ((c ^ (r & 7)) << 4) for r in range(tile_rows) for c in range(K0 // 8))
    assert offsets == list(range(0, tile_rows * 128, 16))


# ----------------------------------------------------------------------------------------------------------------
# The backward step kernel (conv_cell_bwd.cu): step t + 1's transposed convolution, N = C + Ch = 64 columns
# ----------------------------------------------------------------------------------------------------------------
G4 = 4 * CH


def bwd_column_channel(n: int) -> int:
    """conv_cell_bwd.cu's bwd_column_channel<C>: column n = 8 nt + c holds [dx, dh] channel part * C + 8 (c / 2) +
    2 (nt % 4) + c % 2, part = nt / 4."""
    return (n >> 5) * C + ((n & 7) >> 1) * 8 + ((n >> 3) & 3) * 2 + (n & 1)


def bordered_pixel(q: int, B: int, H: int, W: int) -> int:
    """The backward kernel's pixel_of: row q of the (B, H + 1, W + 1) bordered maps as its output pixel
    b * H * W + y * W + x, or -1 (a border row, before the first row or past the last)."""
    Hp, Wp = H + 1, W + 1
    if q < 0 or q >= B * Hp * Wp:
        return -1
    b, rem = divmod(q, Hp * Wp)
    y, x = divmod(rem, Wp)
    return b * H * W + y * W + x if y < H and x < W else -1


def stage_backward_rows_stepped(dpre: np.ndarray, tile: int, B: int, H: int, W: int, tile_rows: int,
                                half_bytes: int) -> np.ndarray:
    """The backward kernel's load_tile, thread by thread: each of the warpgroup's 128 threads keeps one 16-byte chunk
    at one swizzled offset and copies every 8th row from its first; the rows' pixels as the division finds them (the
    walk that finds them without one, row_walk.h, is checked against it below). The per-chunk loop the test compares
    it with is the kernel's first build, a division per chunk."""
    Wp = W + 1
    step = 128 // (G4 // 8)
    a_s = np.full(2 * half_bytes // 2, np.nan)
    for tid in range(128):
        c, r0 = tid % (G4 // 8), tid // (G4 // 8)
        at = (c >> 3) * half_bytes + r0 * 128 + (((c & 7) ^ (r0 & 7)) << 4)
        for k in range(tile_rows // step):
            pix = bordered_pixel(tile * TILE - (Wp + 1) + r0 + k * step, B, H, W)
            byte = at + k * step * 128
            a_s[byte // 2: byte // 2 + 8] = dpre[pix, c * 8: c * 8 + 8] if pix >= 0 else 0.0
    return a_s


@pytest.mark.parametrize("B, H, W", [(2, 5, 5), (1, 7, 3), (3, 4, 9), (2, 9, 12)])
def test_backward_replayed_gemm_equals_the_transposed_convolution(B, H, W):
    """The backward kernel's GEMM replayed: each tile's staging as load_tile writes it, read through the
    descriptors the MMAs are given, against the transposed convolution."""
    rng = np.random.default_rng(7 + B * 100 + H * 10 + W)
    Hp, Wp = H + 1, W + 1
    rows = B * Hp * Wp
    dpre = rng.standard_normal((B * H * W, G4))  # step t + 1's gate gradients, one row per output pixel
    w = rng.standard_normal((G4, K0, 2, 2))
    w_t = w.transpose(2, 3, 1, 0).reshape(4, K0, G4)  # conv_cell.transposed_weight: [tap][ci][gate]
    kc_steps = G4 // 16
    # B staging: k16 step ks = tap * 8 + kc, byte ks * 2048 + half * 1024 + n * 16 + kk * 2
    w_s = np.zeros(4 * kc_steps * 1024)
    for i in range(4 * kc_steps * K0 * 2):
        ks, n, half = i // (K0 * 2), (i >> 1) % K0, i & 1
        tap, kc = ks // kc_steps, ks % kc_steps
        base = (ks * 2048 + half * 1024 + n * 16) // 2
        w_s[base:base + 8] = w_t[tap, bwd_column_channel(n), kc * 16 + half * 8: kc * 16 + half * 8 + 8]

    def read_b(ks: int) -> np.ndarray:  # wgmma_desc(w_base + ks * 2048, 1024, 128): no swizzle, K-major
        return np.array([[w_s[(ks * 2048 + (k // 8) * 1024 + (n // 8) * 128 + (n % 8) * 16 + (k % 8) * 2) // 2]
                          for n in range(K0)] for k in range(16)])

    def pixel_of(q: int) -> int:
        return bordered_pixel(q, B, H, W)

    tile_rows = (TILE + Wp + 1 + 7) // 8 * 8  # bwd_tile_rows
    half_bytes = tile_rows * 128
    bordered = np.zeros((rows, G4))  # dpre in the bordered index, zeros where no output pixel
    for q in range(rows):
        if pixel_of(q) >= 0:
            bordered[q] = dpre[pixel_of(q)]
    for tile in range((rows + TILE - 1) // TILE):
        q_first = tile * TILE - (Wp + 1)
        a_s = np.full(2 * half_bytes // 2, np.nan)  # staging, two 128-byte halves, zero-filled rows
        for r in range(tile_rows):  # what load_tile must write: row by row, chunk by chunk (its first build)
            pix = pixel_of(q_first + r)
            for c in range(G4 // 8):
                byte = (c >> 3) * half_bytes + r * 128 + (((c & 7) ^ (r & 7)) << 4)
                a_s[byte // 2: byte // 2 + 8] = dpre[pix, c * 8: c * 8 + 8] if pix >= 0 else 0.0
        stepped = stage_backward_rows_stepped(dpre, tile, B, H, W, tile_rows, half_bytes)
        assert not np.isnan(stepped).any()  # every byte of the buffer written
        np.testing.assert_array_equal(stepped, a_s)
        acc = np.zeros((TILE, K0))
        for ks in range(4 * kc_steps):
            tap, kc = ks // kc_steps, ks % kc_steps
            row0 = (Wp + 1) - ((tap >> 1) * Wp + (tap & 1))
            start = (kc >> 2) * half_bytes + row0 * 128 + (kc & 3) * 32
            a = np.zeros((TILE, 16))
            for m in range(TILE):
                for k in range(16):
                    addr = start + (m // 8) * 1024 + (m % 8) * 128 + 2 * k
                    a[m, k] = a_s[(addr ^ (((addr >> 7) & 7) << 4)) // 2]
            acc += a @ read_b(ks)
        assert not np.isnan(acc).any()
        for m in range(TILE):
            q = tile * TILE + m
            if q >= rows:
                continue
            want = sum(bordered[q - ky * Wp - kx] @ w[:, :, ky, kx] for ky in range(2) for kx in range(2)
                       if q - ky * Wp - kx >= 0)
            want = np.zeros(K0) if isinstance(want, int) else want
            np.testing.assert_allclose(acc[m], want[[bwd_column_channel(n) for n in range(K0)]], rtol=1e-12,
                                       atol=1e-12)


def test_backward_epilogue_reads_its_lane_channels():
    """acc[nt][2 hh + e] is dx channel 8 (lane % 4) + 2 nt + e for nt < 4 and dh channel 8 (lane % 4) + 2 (nt - 4) +
    e for nt >= 4, as the epilogue takes them; the column order is a permutation of [dx, dh]."""
    for lane in range(32):
        for nt in range(8):
            for i in range(4):
                _, col = fragment_position(0, lane, nt, i)
                part, e = nt // 4, i % 2
                assert bwd_column_channel(col) == part * C + 8 * (lane % 4) + 2 * (nt % 4) + e
    assert sorted(bwd_column_channel(n) for n in range(K0)) == list(range(K0))


HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include "row_walk.h"
// argv: B H W step first count [mixed] -- prints each walked row's output pixel, -1 where it is none; with mixed = 1
// the walk steps by bordered_step(step) (the tile loops' stride) and prints each row's image after its pixel
int main(int argc, char** argv) {
  const int B = atoi(argv[1]), H = atoi(argv[2]), W = atoi(argv[3]), step = atoi(argv[4]);
  const int first = atoi(argv[5]), count = atoi(argv[6]), mixed = argc > 7 ? atoi(argv[7]) : 0;
  mscred_conv_cell::BorderedRowWalk row(first, B, H, W);
  const mscred_conv_cell::BorderedStep by = mscred_conv_cell::bordered_step(step, H, W);
  for (int k = 0; k < count; ++k) {
    if (mixed) {
      printf("%d %d\n", row.inside() ? row.pixel() : -1, row.b);
      row.advance(by);
    } else {
      printf("%d\n", row.inside() ? row.pixel() : -1);
      row.advance(step);
    }
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def row_walk_program(tmp_path_factory):
    """row_walk.h (the kernels' row walks) compiled as host code."""
    import shutil
    import subprocess

    from mscred.ops import conv_cell
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler (g++ / c++) to build the row-walk harness")
    folder = tmp_path_factory.mktemp("row_walk")
    (folder / "harness.cpp").write_text(HARNESS)
    exe = folder / "harness"
    subprocess.run([compiler, "-std=c++17", "-O2", f"-I{conv_cell._SRC}", str(folder / "harness.cpp"), "-o", str(exe)],
                   check=True, capture_output=True, timeout=120)
    return exe


@pytest.mark.parametrize("B, H, W", [(128, 30, 30), (3, 4, 9), (2, 5, 5), (1, 7, 3), (2, 2, 1)])
@pytest.mark.parametrize("step", [8, 32])
def test_row_walk_header_finds_the_pixels_division_finds(B, H, W, step, row_walk_program):
    """The CUDA header's walk (host-compiled, the same source the kernel includes) against divmod's decoding, from
    every first row a staging thread can hold: before the first image (down to -(W + 2)), inside, across image
    boundaries and past the last; steps longer than a map row (small maps) included."""
    import subprocess
    Hp, Wp = H + 1, W + 1
    rows = B * Hp * Wp

    def pixel_of(q: int) -> int:
        return bordered_pixel(q, B, H, W)

    firsts = sorted(q for q in {-(Wp + 1), -1, 0, 1, Wp - 1, Hp * Wp - 3, rows - 64, rows - 1, rows // 2}
                    if -(Wp + 1) <= q < rows)
    count = (rows + 64) // step + 2
    for first in firsts:
        out = subprocess.run([str(row_walk_program), str(B), str(H), str(W), str(step), str(first), str(count)],
                             check=True, capture_output=True, text=True, timeout=60).stdout.split()
        assert [int(v) for v in out] == [pixel_of(first + k * step) for k in range(count)], (first, step)


@pytest.mark.parametrize("B, H, W", [(128, 30, 30), (128, 15, 15), (3, 4, 9), (2, 5, 5), (1, 7, 3), (2, 2, 1)])
@pytest.mark.parametrize("step", [8, 64, 31 * 31 - 1, 31 * 31 + 5, 132 * 64, 66 * 3 * 64 + 64])
def test_row_walk_mixed_radix_steps_find_the_pixels_and_images_division_finds(B, H, W, step, row_walk_program):
    """Both kernels' tile-to-tile walks (bordered_step: a
    stride in the bordered index's radix, added digit by digit with one carry each) against divmod's decoding, the
    pixel and its image (load_row's b), for strides shorter than a map row, near and past an image, and the grids'
    (132 blocks of one tile, 66 blocks of three); first rows before the first image (the staging's) and inside."""
    import subprocess
    Hp, Wp = H + 1, W + 1
    rows = B * Hp * Wp
    firsts = sorted(q for q in {-(Wp + 1), -3, 0, 5, Wp + 2, Hp * Wp - 1, rows // 3, rows - 1} if -(Wp + 1) <= q < rows)
    count = min(rows // step + 3, 4000)
    for first in firsts:
        out = subprocess.run([str(row_walk_program), str(B), str(H), str(W), str(step), str(first), str(count), "1"],
                             check=True, capture_output=True, text=True, timeout=60).stdout.split()
        pairs = [(int(out[2 * k]), int(out[2 * k + 1])) for k in range(count)]
        for k, (pix, image) in enumerate(pairs):
            q = first + k * step
            assert pix == bordered_pixel(q, B, H, W), (first, step, k)
            assert image == (q + Hp * Wp) // (Hp * Wp) - 1, (first, step, k)  # floor(q / Hp Wp), rows before -> -1
