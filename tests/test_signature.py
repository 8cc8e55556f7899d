"""Signature matrices: prefix sums against the per-window loop, segment counts, hand-computed values, streaming."""
import numpy as np
import pytest

from mscred.signature import (
    iter_signature_matrices,
    segment_ends,
    signature_matrices,
    signature_matrices_direct,
)


def test_segment_ends_thesis_count():
    ends = segment_ends(36_000, (10, 30, 60), 10)
    assert len(ends) == 3_595
    assert ends[0] == 60 and ends[-1] == 36_000 and ends.dtype == np.int64
    assert np.all(np.diff(ends) == 10)


@pytest.mark.parametrize("T, expected", [(59, 0), (60, 1), (69, 1), (70, 2), (75, 2)])
def test_segment_ends_edges(T, expected):
    assert len(segment_ends(T, (10, 30, 60), 10)) == expected


def test_hand_computed_values():
    # x0 = 1, 2, 3, 4; x1 = 1, -1, 1, -1; windows 2 and 4, gap 2 -> one segment, ending at t = 4.
    x = np.array([[1.0, 1.0], [2.0, -1.0], [3.0, 1.0], [4.0, -1.0]])
    m = signature_matrices(x, windows=(2, 4), gap=2)
    assert m.shape == (1, 2, 2, 2)
    # w = 2 over rows 2, 3: x0.x0 = (9 + 16)/2, x0.x1 = (3 - 4)/2, x1.x1 = (1 + 1)/2
    np.testing.assert_allclose(m[0, 0], [[12.5, -0.5], [-0.5, 1.0]])
    # w = 4 over all rows: x0.x0 = 30/4, x0.x1 = (1 - 2 + 3 - 4)/4, x1.x1 = 1
    np.testing.assert_allclose(m[0, 1], [[7.5, -0.5], [-0.5, 1.0]])


@pytest.mark.parametrize(
    "T, n, windows, gap, chunk",
    [
        (400, 5, (10, 30, 60), 10, 4096),
        (401, 17, (10, 30, 60), 10, 7),  # T not on the grid, chunks that do not divide S
        (333, 5, (3, 7, 12), 5, 11),  # gcd 1: block size 1
        (250, 17, (4, 6), 2, 1),  # one segment per chunk
        (120, 1, (5,), 3, 4),  # one sensor, one window
        (97, 4, (8, 16, 24), 4, 3),
    ],
)
def test_prefix_sums_match_direct_loop(T, n, windows, gap, chunk):
    rng = np.random.default_rng(T * 31 + n)
    # Offset and scale so that cancellation in the prefix differences would show if it were not controlled.
    x = rng.normal(size=(T, n)) * 3.0 + 5.0
    fast = signature_matrices(x, windows, gap, chunk_segments=chunk)
    ref = signature_matrices_direct(x, windows, gap)
    assert fast.dtype == np.float32 and fast.shape == (len(segment_ends(T, windows, gap)), len(windows), n, n)
    assert np.allclose(fast, ref, rtol=1e-6, atol=0)
    # Symmetric, as inner products are.
    assert np.array_equal(fast, fast.transpose(0, 1, 3, 2))


def test_float64_reference_at_large_offset():
    # Compare against float64 matrices (not the float32 oracle) on a series with a large common offset.
    rng = np.random.default_rng(1)
    x = rng.normal(size=(5_000, 5)) + 1e3
    fast = signature_matrices(x, (10, 30, 60), 10, chunk_segments=64).astype(np.float64)
    ends = segment_ends(len(x), (10, 30, 60), 10)
    for s in (0, 1, 63, 64, 65, len(ends) - 1):
        for i, w in enumerate((10, 30, 60)):
            win = x[ends[s] - w : ends[s]]
            exact = win.T @ win / w
            np.testing.assert_allclose(fast[s, i], exact, rtol=1e-6)


def test_iterator_chunks_cover_every_segment():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(1_000, 6))
    whole = signature_matrices(x)
    starts, pieces = zip(*iter_signature_matrices(x, chunk_segments=13))
    assert list(starts) == list(range(0, len(whole), 13))
    assert all(len(p) <= 13 for p in pieces)
    np.testing.assert_array_equal(np.concatenate(pieces), whole)


def test_memmap_input(tmp_path):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(700, 5)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    mm = np.load(tmp_path / "x.npy", mmap_mode="r")
    np.testing.assert_allclose(signature_matrices(mm, chunk_segments=9), signature_matrices_direct(x), rtol=1e-6)


def test_too_short_gives_no_segments():
    out = signature_matrices(np.ones((30, 4)))
    assert out.shape == (0, 3, 4, 4)
    assert list(iter_signature_matrices(np.ones((30, 4)))) == []


@pytest.mark.parametrize("kwargs", [{"windows": ()}, {"windows": (0, 10)}, {"gap": 0}])
def test_bad_parameters(kwargs):
    with pytest.raises(ValueError):
        signature_matrices(np.ones((100, 3)), **kwargs)


def test_bad_shape():
    with pytest.raises(ValueError):
        signature_matrices(np.ones(100))
