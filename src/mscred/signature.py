"""Multi-scale signature matrices of MSCRED, by prefix sums of outer products.

For a segment ending at ``t`` (exclusive) and a window length ``w``::

    M_w[t][i, j] = sum_{k=t-w}^{t-1} x_i[k] * x_j[k] / w

Segment ``s`` ends at ``t = max(windows) + s * gap``, for every end ``<= T``. Every window boundary ``t - w`` then lies
on a grid of step ``g = gcd(gap, *windows)`` (10 for the paper's windows 10/30/60 and gap 10), so one prefix sum of
the per-block outer-product sums ``B[b] = sum_{k in block b} x[k] x[k]^T`` gives every matrix as a difference of two
prefix entries: ``M = (P[t / g] - P[(t - w) / g]) / w``. The sums run in float64; the result is float32.

Memory stays bounded at any series length: the work is done ``chunk_segments`` segments at a time, each chunk with its
own prefix sum over only the rows it needs (restarting the sum also keeps the float64 differences small, so the
cancellation error does not grow with T). A full (T, n, n) prefix array is never built.
"""
from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np

__all__ = [
    "segment_ends",
    "signature_matrices",
    "iter_signature_matrices",
    "signature_matrices_direct",
]


def _check_params(windows: Sequence[int], gap: int) -> tuple[int, ...]:
    windows = tuple(int(w) for w in windows)
    if not windows or any(w < 1 for w in windows):
        raise ValueError(f"windows must be positive integers, got {windows}")
    if int(gap) < 1:
        raise ValueError(f"gap must be a positive integer, got {gap}")
    return windows


def _as_2d(values) -> np.ndarray:
    values = np.asarray(values)
    if values.ndim != 2:
        raise ValueError(f"values must have shape (T, n), got {values.shape}")
    return values


def segment_ends(T: int, windows: Sequence[int] = (10, 30, 60), gap: int = 10) -> np.ndarray:
    """Exclusive end step of every segment of a series of length ``T``.

    Parameters
    ----------
    T : int
        Series length (number of time steps).
    windows : sequence of int
        Window lengths; the first segment ends at ``max(windows)`` so that every window fits.
    gap : int
        Steps between consecutive segment ends.

    Returns
    -------
    ends : np.ndarray, int64, shape (S,)
        ``max(windows) + s * gap`` for ``s = 0 .. S-1``, all ``<= T``; empty when ``T < max(windows)``.
        E.g. 36,000 steps with windows (10, 30, 60) and gap 10 give 3,595 segments.
    """
    windows = _check_params(windows, gap)
    first = max(windows)
    if T < first:
        return np.zeros(0, dtype=np.int64)
    count = (int(T) - first) // int(gap) + 1
    return first + np.arange(count, dtype=np.int64) * int(gap)


def iter_signature_matrices(
    values,
    windows: Sequence[int] = (10, 30, 60),
    gap: int = 10,
    chunk_segments: int = 4096,
) -> Iterator[tuple[int, np.ndarray]]:
    """Yield the signature matrices chunk by chunk, with memory bounded by the chunk size.

    Parameters
    ----------
    values : array-like, shape (T, n)
        The (normalised) series; any float dtype, a ``np.memmap`` works too (only the rows of one chunk are read).
    windows, gap : see :func:`segment_ends`.
    chunk_segments : int
        Segments per yielded chunk. Extra memory is about ``chunk_segments * (gap / g + 1 + len(windows) / 2) * n * n
        * 8`` bytes (the float64 prefix of the chunk's blocks, one float64 work array and the float32 output), about
        100 MB for 4,096 segments of n = 30, plus the chunk the caller still holds.

    Yields
    ------
    start : int
        Index of the chunk's first segment.
    chunk : np.ndarray, float32, shape (c, len(windows), n, n)
        ``chunk[s - start, i]`` is ``M_{windows[i]}`` of segment ``s``.
    """
    windows = _check_params(windows, gap)
    values = _as_2d(values)
    if chunk_segments < 1:
        raise ValueError(f"chunk_segments must be positive, got {chunk_segments}")
    T, n = values.shape
    ends = segment_ends(T, windows, gap)
    if len(ends) == 0:
        return
    grid = math.gcd(int(gap), *windows)
    stride = int(gap) // grid  # prefix entries between consecutive segment ends
    longest = max(windows)
    # Work buffers, reused by every chunk (fresh ones would page-fault ~100 MB per chunk): the float64 prefix of the
    # chunk's blocks and one float64 difference per segment.
    per_chunk = min(chunk_segments, len(ends))
    prefix = np.zeros(((per_chunk - 1) * stride + longest // grid + 1, n, n), dtype=np.float64)
    diff = np.empty((per_chunk, n, n), dtype=np.float64)
    for start in range(0, len(ends), chunk_segments):
        c = min(chunk_segments, len(ends) - start)
        # Rows [lo, hi) cover every window of the chunk; lo = start * gap is on the grid because every end is.
        lo = start * int(gap)
        hi = lo + (c - 1) * int(gap) + longest
        x = np.asarray(values[lo:hi], dtype=np.float64).reshape((hi - lo) // grid, grid, n)  # (blocks, g, n)
        blocks = x.shape[0]
        # prefix[b] = sum of the outer products of rows [lo, lo + b * g); prefix[0] stays 0.
        np.matmul(x.transpose(0, 2, 1), x, out=prefix[1 : blocks + 1])  # per-block sums (blocks, n, n)
        for b in range(2, blocks + 1):  # a row-by-row running sum: twice as fast as np.cumsum over axis 0 here
            np.add(prefix[b], prefix[b - 1], out=prefix[b])
        out = np.empty((c, len(windows), n, n), dtype=np.float32)
        first = longest // grid  # prefix index of the chunk's first segment end
        at_end = prefix[first : first + (c - 1) * stride + 1 : stride]  # (c, n, n), a strided view
        for i, w in enumerate(windows):
            k = first - w // grid
            at_start = prefix[k : k + (c - 1) * stride + 1 : stride]
            np.subtract(at_end, at_start, out=diff[:c])  # float64 difference first ...
            np.multiply(diff[:c], 1.0 / w, out=out[:, i], casting="same_kind")  # ... then one rounding to float32
        yield start, out


def signature_matrices(
    values,
    windows: Sequence[int] = (10, 30, 60),
    gap: int = 10,
    chunk_segments: int = 4096,
) -> np.ndarray:
    """All signature matrices of a series at once.

    Parameters
    ----------
    values : array-like, shape (T, n)
    windows, gap, chunk_segments : see :func:`iter_signature_matrices`.

    Returns
    -------
    np.ndarray, float32, shape (S, len(windows), n, n)
        ``S = len(segment_ends(T, windows, gap))``; S = 0 when ``T < max(windows)``. For series too long to hold
        the result (4 * S * len(windows) * n^2 bytes), use :func:`iter_signature_matrices`.
    """
    windows = _check_params(windows, gap)
    values = _as_2d(values)
    T, n = values.shape
    S = len(segment_ends(T, windows, gap))
    out = np.empty((S, len(windows), n, n), dtype=np.float32)
    for start, chunk in iter_signature_matrices(values, windows, gap, chunk_segments):
        out[start : start + len(chunk)] = chunk
    return out


def signature_matrices_direct(values, windows: Sequence[int] = (10, 30, 60), gap: int = 10) -> np.ndarray:
    """The same matrices by a plain loop over segments and windows (float64): the test oracle and benchmark baseline.

    Returns
    -------
    np.ndarray, float32, shape (S, len(windows), n, n)
    """
    windows = _check_params(windows, gap)
    values = np.asarray(_as_2d(values), dtype=np.float64)
    T, n = values.shape
    ends = segment_ends(T, windows, gap)
    out = np.empty((len(ends), len(windows), n, n), dtype=np.float32)
    for s, t in enumerate(ends):
        for i, w in enumerate(windows):
            x = values[t - w : t]  # (w, n)
            out[s, i] = x.T @ x / w
    return out
