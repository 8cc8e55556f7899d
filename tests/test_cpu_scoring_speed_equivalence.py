"""The CPU scoring speed-ups compute exactly what the straightforward code computes.

* ``signature``: a chunk's prefix sum is kept for a cache-sized group of segments at a time (``_Workspace``) and
  ``signature_matrices`` writes every chunk in place. The reference below is the whole-chunk prefix-sum pass as it
  was before (one float64 prefix of all the chunk's blocks, one difference per window, then float32): the results
  must be equal bit for bit, at any group size, chunk size, gap and input dtype, and close to the float64 direct sums.
* ``detect``: residuals are computed in place in one reused, cache-sized buffer (``_chunks``). The references below
  compute R = (target - recon)^2 for all windows at once and reduce it as before: equal bit for bit.
* end to end: ``MSCRED.detect`` of a tiny trained model with both optimized paths replaced by the references gives
  the same frame.
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

import mscred.detect as detect
import mscred.signature as signature
from mscred.config import ScoreConfig


# ------------------------------------------------------------------------------------------------ references
def _reference_iter(values, windows=(10, 30, 60), gap=10, chunk_segments=4096):
    """The straightforward prefix-sum pass: one float64 prefix of every block of the chunk."""
    windows = tuple(int(w) for w in windows)
    values = np.asarray(values)
    T, n = values.shape
    ends = signature.segment_ends(T, windows, gap)
    grid = math.gcd(int(gap), *windows)
    stride, longest = gap // grid, max(windows)
    for start in range(0, len(ends), chunk_segments):
        c = min(chunk_segments, len(ends) - start)
        lo = start * gap
        hi = lo + (c - 1) * gap + longest
        x = np.asarray(values[lo:hi], dtype=np.float64).reshape((hi - lo) // grid, grid, n)
        prefix = np.zeros((x.shape[0] + 1, n, n), dtype=np.float64)
        prefix[1:] = np.matmul(x.transpose(0, 2, 1), x)
        for b in range(2, len(prefix)):
            prefix[b] = prefix[b] + prefix[b - 1]
        first = longest // grid
        at_end = prefix[first : first + (c - 1) * stride + 1 : stride]
        out = np.empty((c, len(windows), n, n), dtype=np.float32)
        for i, w in enumerate(windows):
            k = first - w // grid
            out[:, i] = ((at_end - prefix[k : k + (c - 1) * stride + 1 : stride]) * (1.0 / w)).astype(np.float32)
        yield start, out


def _reference_matrices(values, windows=(10, 30, 60), gap=10, chunk_segments=4096):
    n = np.asarray(values).shape[1]
    parts = [chunk for _, chunk in _reference_iter(values, windows, gap, chunk_segments)]
    return np.concatenate(parts) if parts else np.empty((0, len(windows), n, n), dtype=np.float32)


def _bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a.view(np.uint8), b.view(np.uint8))


def _reference_residual(target, recon):
    diff = np.asarray(target, dtype=np.float32) - np.asarray(recon, dtype=np.float32)
    return diff * diff


def _reference_sensor_rows(target, recon):
    return _reference_residual(target, recon).sum(axis=3, dtype=np.float64)


def _reference_scale_scores(target, recon, method, theta, root_scales):
    res = _reference_residual(target, recon)
    if method == "count":
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        per_scale = (res > theta[None, :, None, None].astype(np.float32)).sum(axis=(2, 3)).astype(np.float64)
    else:
        per_scale = res.mean(axis=(2, 3), dtype=np.float64)
    return per_scale, res[:, list(root_scales)].sum(axis=(1, 3), dtype=np.float64)


# ------------------------------------------------------------------------------------------------ signature
CASES = [  # (T, n), windows, gap, chunk_segments
    ((2_000, 7), (10, 30, 60), 10, 4096),
    ((2_000, 7), (10, 30, 60), 10, 13),
    ((1_500, 4), (4, 6, 15), 3, 50),       # grid 1
    ((900, 9), (7, 21), 14, 5),            # grid 7, stride 2
    ((3_000, 5), (10,), 100, 7),           # a gap longer than the longest window
    ((1_000, 4), (1, 2), 1, 100),
    ((200, 6), (60,), 10, 1),
    ((700, 40), (10, 30, 60), 10, 4096),
]


@pytest.mark.parametrize("work_bytes", [None, 1, 3 * 2 * 7 * 7 * 8, 50_000])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_signature_bit_equal_to_whole_chunk_prefix(monkeypatch, work_bytes, dtype):
    if work_bytes is not None:  # tiny groups: the carried prefix entries are exercised at every group boundary
        monkeypatch.setattr(signature, "_WORK_BYTES", work_bytes)
    rng = np.random.default_rng(0)
    for shape, windows, gap, chunk in CASES:
        x = (rng.random(shape) * 2 - 1).astype(dtype)
        ref = _reference_matrices(x, windows, gap, chunk)
        got = signature.signature_matrices(x, windows, gap, chunk)
        assert _bits_equal(got, ref), (shape, windows, gap, chunk, work_bytes)
        pieces = list(signature.iter_signature_matrices(x, windows, gap, chunk))
        expected = list(_reference_iter(x, windows, gap, chunk))
        assert [s for s, _ in pieces] == [s for s, _ in expected]
        assert all(_bits_equal(a, b) for (_, a), (_, b) in zip(pieces, expected)), (shape, windows, gap, chunk)


def test_signature_groups_are_used_and_match_float64_direct(monkeypatch):
    """Several groups per chunk at the default work size (the path a long series takes), against float64 sums."""
    rng = np.random.default_rng(1)
    x = rng.random((12_000, 30))
    work = signature._Workspace(30, (10, 30, 60), 10)
    assert work.group < len(signature.segment_ends(len(x))) // 2  # the grouped path is the one tested here
    got = signature.signature_matrices(x)
    assert _bits_equal(got, _reference_matrices(x))
    direct = signature.signature_matrices_direct(x)
    np.testing.assert_allclose(got, direct, rtol=2e-6, atol=1e-6 * np.abs(direct).max())


def test_signature_memmap_and_empty(tmp_path):
    x = np.random.default_rng(2).random((1_000, 5))
    path = tmp_path / "x.npy"
    np.save(path, x)
    mm = np.load(path, mmap_mode="r")
    assert _bits_equal(signature.signature_matrices(mm, chunk_segments=9), _reference_matrices(x, chunk_segments=9))
    assert signature.signature_matrices(np.ones((30, 4))).shape == (0, 3, 4, 4)
    assert list(signature.iter_signature_matrices(np.ones((30, 4)))) == []
    with pytest.raises(ValueError):
        signature.signature_matrices(x, chunk_segments=0)


# ------------------------------------------------------------------------------------------------ detect
def _pair(W, K, n, seed):
    rng = np.random.default_rng(seed)
    target = rng.random((W, K, n, n), dtype=np.float32)
    recon = (target + 0.05 * rng.standard_normal(target.shape, dtype=np.float32)).astype(np.float32)
    return target, recon


@pytest.mark.parametrize("group_bytes,chunk", [(None, None), (1, None), (10_000, None), (1 << 30, 7)])
def test_scoring_bit_equal_to_whole_residual(monkeypatch, group_bytes, chunk):
    if group_bytes is not None:
        monkeypatch.setattr(detect, "_GROUP_BYTES", group_bytes)
    if chunk is not None:
        monkeypatch.setattr(detect, "_CHUNK", chunk)
    for W, K, n, seed in ((3_000, 3, 30, 0), (300, 3, 80, 1), (37, 3, 5, 2), (1, 1, 4, 3), (500, 2, 13, 4)):
        target, recon = _pair(W, K, n, seed)
        assert _bits_equal(detect.sensor_rows(target, recon), _reference_sensor_rows(target, recon))
        theta = np.linspace(0.001, 0.003, K)
        for method in ("count", "mse"):
            got = detect.scale_scores(target, recon, method, theta, [0, K - 1])
            ref = _reference_scale_scores(target, recon, method, theta, [0, K - 1])
            assert all(_bits_equal(a, b) for a, b in zip(got, ref)), (method, W, K, n)


@pytest.mark.parametrize("method", ["z_sensor", "count", "mse"])
def test_score_windows_equal_to_reference(monkeypatch, method):
    target, recon = _pair(2_500, 3, 30, 5)
    cfg = ScoreConfig(method=method, theta=0.002 if method == "count" else None)
    calib = detect.Calibration.fit(target[:400], recon[:400], cfg, (10, 30, 60))
    got = detect.score_windows(target, recon, cfg, (10, 30, 60), calib)
    monkeypatch.setattr(detect, "sensor_rows", _reference_sensor_rows)
    monkeypatch.setattr(detect, "scale_scores", _reference_scale_scores)
    assert detect.Calibration.fit(target[:400], recon[:400], cfg, (10, 30, 60)) == calib
    ref = detect.score_windows(target, recon, cfg, (10, 30, 60), calib)
    for name in ("score", "is_anomaly", "root_causes", "scales_lit"):
        assert _bits_equal(np.asarray(getattr(got, name)), np.asarray(getattr(ref, name))), name


def test_shape_mismatch_still_refused():
    target, recon = _pair(4, 3, 5, 6)
    with pytest.raises(ValueError):
        detect.sensor_rows(target, recon[:, :2])


# ------------------------------------------------------------------------------------------------ end to end
def test_detect_frame_equal_with_reference_paths(monkeypatch):
    from mscred import MSCRED

    rng = np.random.default_rng(7)
    t = np.arange(1_400)[:, None]
    x = np.sin(t / rng.uniform(20, 30, 5)) + 0.1 * rng.standard_normal((1_400, 5))
    frame = pd.DataFrame(x, columns=[f"s{i}" for i in range(5)])
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", seed=0).fit(frame.iloc[:500])
    test = frame.iloc[500:].copy()
    test.iloc[400:430, 1] += 3.0
    got = model.detect(test)
    used = []

    def counted(function):
        def wrapper(*args, **kwargs):
            used.append(function.__name__)
            return function(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(signature, "signature_matrices", counted(_reference_matrices))
    monkeypatch.setattr(detect, "sensor_rows", counted(_reference_sensor_rows))
    monkeypatch.setattr(detect, "scale_scores", counted(_reference_scale_scores))
    ref = model.detect(test)
    assert "_reference_matrices" in used and ("_reference_sensor_rows" in used or "_reference_scale_scores" in used)
    pd.testing.assert_frame_equal(got, ref, check_exact=True)
