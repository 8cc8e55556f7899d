"""Multi-scale signature matrices of MSCRED, by prefix sums of outer products.

For a segment ending at ``t`` (exclusive) and a window length ``w``::

    M_w[t][i, j] = sum_{k=t-w}^{t-1} x_i[k] * x_j[k] / w

Segment ``s`` ends at ``t = max(windows) + s * gap``, for every end ``<= T``. Every window boundary ``t - w`` then lies
on a grid of step ``g = gcd(gap, *windows)`` (10 for the paper's windows 10/30/60 and gap 10), so one prefix sum of
the per-block outer-product sums ``B[b] = sum_{k in block b} x[k] x[k]^T`` gives every matrix as a difference of two
prefix entries: ``M = (P[t / g] - P[(t - w) / g]) / w``. The sums run in float64; the result is float32.

Memory stays bounded at any series length: the work is done ``chunk_segments`` segments at a time, each chunk with its
own prefix sum over only the rows it needs (restarting the sum also keeps the float64 differences small, so the
cancellation error does not grow with T). A full (T, n, n) prefix array is never built; within a chunk the prefix is
kept only for a cache-sized group of segments at a time (``_Workspace``: the same sums, bit for bit).
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
        Segments per yielded chunk. Extra memory is the float32 chunk, ``chunk_segments * len(windows) * n * n * 4``
        bytes (44 MB for 4,096 segments of n = 30), plus about 1 MB of float64 work memory (``_Workspace``), plus the
        chunk the caller still holds. The float64 prefix sum restarts at each chunk's first row.

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
    work = _Workspace(n, windows, gap)
    for start in range(0, len(ends), chunk_segments):
        c = min(chunk_segments, len(ends) - start)
        out = np.empty((c, len(windows), n, n), dtype=np.float32)
        work.fill(values, start, out)
        yield start, out


# Bytes of float64 work memory per pass of _Workspace.fill: the rolling prefix and the difference of one group of
# segments, small enough to stay in the CPU's cache (a chunk-sized prefix and difference, 2 x 100 MB at 4,096 segments
# of 80 sensors, were written and read back from memory, and page-faulted in by every fresh process).
_WORK_BYTES = 1 << 20


class _Workspace:
    """The prefix-sum pass of one chunk, a cache-sized group of segments at a time, with the same arithmetic as one
    pass over the chunk: the chunk's prefix sum starts at its first row and runs block by block; a group keeps only
    the prefix entries its windows reach back to (``longest / g`` blocks before its first segment end), carried
    over from the group before, so every prefix entry, difference and float32 result is the one the whole-chunk
    prefix gives, bit for bit."""

    def __init__(self, n: int, windows: tuple[int, ...], gap: int):
        self.windows, self.gap, self.n = windows, int(gap), n
        self.grid = math.gcd(int(gap), *windows)
        self.stride = self.gap // self.grid  # prefix entries between consecutive segment ends
        self.reach = max(windows) // self.grid  # prefix entries from a segment's start (longest window) to its end
        self.group = max(1, _WORK_BYTES // (2 * n * n * 8))
        # entries read by a group (c - 1) * stride + reach + 1; with a gap longer than the longest window the last
        # entry of the group before is kept instead, for the running sum: c * stride + 1
        self.prefix = np.empty(((self.group - 1) * self.stride + max(self.reach, self.stride) + 1, n, n),
                               dtype=np.float64)
        self.diff = np.empty((self.group, n, n), dtype=np.float64)

    def fill(self, values, start: int, out: np.ndarray) -> None:
        """Write the matrices of segments ``start .. start + len(out) - 1`` into ``out`` (c, n_windows, n, n)."""
        g, stride, reach, n, prefix = self.grid, self.stride, self.reach, self.n, self.prefix
        lo = start * self.gap  # the chunk's first row, on the grid because every segment end is
        # prefix[j] holds the chunk's prefix entry base + j (the outer products of rows [lo, lo + (base + j) g));
        # entries base .. base + have - 1 are computed.
        base, have = 0, 1
        prefix[0] = 0.0
        for a in range(0, len(out), self.group):
            c = min(self.group, len(out) - a)
            first, last = a * stride, reach + (a + c - 1) * stride  # prefix entries this group reads
            drop = min(first - base, have - 1)  # entries before ``first`` are read no more (the last one computed
            if drop:                             # is kept: the running sum goes on from it)
                have -= drop
                prefix[:have] = prefix[drop : drop + have].copy()  # at most max(reach, 1) entries: cheap
                base += drop
            todo = last + 1 - (base + have)  # new entries base + have .. last, each one block more
            rows = lo + (base + have - 1) * g
            x = np.asarray(values[rows : rows + todo * g], dtype=np.float64).reshape(todo, g, n)
            np.matmul(x.transpose(0, 2, 1), x, out=prefix[have : have + todo])  # per-block sums
            for j in range(have, have + todo):  # a running sum (entry 1 is block 0's sum itself)
                if base + j >= 2:
                    np.add(prefix[j], prefix[j - 1], out=prefix[j])
            have += todo
            end = reach + first - base  # the group's first segment end, as an index of ``prefix``
            at_end = prefix[end : end + (c - 1) * stride + 1 : stride]  # (c, n, n), a strided view
            for i, w in enumerate(self.windows):
                k = end - w // g
                np.subtract(at_end, prefix[k : k + (c - 1) * stride + 1 : stride], out=self.diff[:c])  # float64 ...
                np.multiply(self.diff[:c], 1.0 / w, out=out[a : a + c, i], casting="same_kind")  # ... then float32


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
    if chunk_segments < 1:
        raise ValueError(f"chunk_segments must be positive, got {chunk_segments}")
    if S:
        # Each chunk written in place: the same values as iter_signature_matrices' chunks, without a second copy.
        work = _Workspace(n, windows, gap)
        for start in range(0, S, chunk_segments):
            work.fill(values, start, out[start : start + chunk_segments])
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
