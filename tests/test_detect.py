"""detect.py: scores, thresholds, root causes, durations and the per-timestamp mapping on hand-built residuals."""
from __future__ import annotations

import numpy as np
import pytest

from mscred.config import ScoreConfig
from mscred.detect import (Calibration, choose_theta, combine, residuals, scale_index, scale_scores,
                           score_windows, timestamp_scores, timestamp_windows, top_sensors)

WINDOWS = (10, 30, 60)


def _pair(res: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A (target, recon) pair whose residual is exactly ``res`` (res must be a square of a float32)."""
    target = np.sqrt(res).astype(np.float32)
    return target, np.zeros_like(target)


def test_residuals_square_of_difference():
    t = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], dtype=np.float32)
    r = np.array([[[[0.5, 2.0], [1.0, 1.0]]]], dtype=np.float32)
    np.testing.assert_array_equal(residuals(t, r), [[[[0.25, 0.0], [4.0, 9.0]]]])


def test_scale_index_and_unknown_scale():
    assert scale_index(WINDOWS, (10,)) == [0]
    assert scale_index(WINDOWS, (60, 10)) == [2, 0]
    with pytest.raises(ValueError, match="subset"):
        scale_index(WINDOWS, (20,))


def test_count_score_counts_entries_above_theta_on_chosen_scales():
    res = np.zeros((2, 3, 4, 4), dtype=np.float32)
    res[0, 0, 0, :3] = 0.01     # 3 entries above 0.005 on w=10
    res[0, 0, 1, 1] = 0.004     # below theta: not counted
    res[0, 2, :, :] = 1.0       # 16 entries on w=60: ignored by a w=10 score
    res[1, 1, 2, 2] = 0.02      # 1 entry on w=30
    target, recon = _pair(res)
    per_scale, rows = scale_scores(target, recon, "count", np.full(3, 0.005), [0])
    np.testing.assert_array_equal(per_scale, [[3, 0, 16], [0, 1, 0]])
    np.testing.assert_array_equal(combine(per_scale, [0], "count"), [3, 0])
    np.testing.assert_array_equal(combine(per_scale, [0, 1, 2], "count"), [19, 1])
    # Row sums on w=10 only: sensor 0 has 0.03, sensor 1 has 0.004.
    np.testing.assert_allclose(rows[0], [0.03, 0.004, 0, 0], rtol=1e-6)


def test_mse_score_is_mean_residual():
    rng = np.random.default_rng(0)
    target = rng.random((5, 3, 6, 6)).astype(np.float32)
    recon = rng.random((5, 3, 6, 6)).astype(np.float32)
    per_scale, _ = scale_scores(target, recon, "mse", None, [0])
    expect = ((target.astype(np.float64) - recon) ** 2).mean(axis=(2, 3))
    np.testing.assert_allclose(per_scale, expect, rtol=1e-5)
    np.testing.assert_allclose(combine(per_scale, [0, 2], "mse"), expect[:, [0, 2]].mean(axis=1), rtol=1e-5)


def test_chunked_scores_equal_unchunked(monkeypatch):
    import mscred.detect as detect

    rng = np.random.default_rng(1)
    target = rng.random((37, 3, 5, 5)).astype(np.float32)
    recon = rng.random((37, 3, 5, 5)).astype(np.float32)
    whole = scale_scores(target, recon, "count", np.full(3, 0.1), [0, 1])
    monkeypatch.setattr(detect, "_CHUNK", 8)
    parts = scale_scores(target, recon, "count", np.full(3, 0.1), [0, 1])
    for a, b in zip(whole, parts):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_choose_theta_is_per_scale_quantile():
    res = np.zeros((1, 2, 10, 10), dtype=np.float32)
    res[0, 0] = (np.arange(100).reshape(10, 10) / 100.0) ** 2       # 0.00 .. 0.99 before squaring
    res[0, 1] = 4.0
    theta = choose_theta(*_pair(res), 0.5)
    np.testing.assert_allclose(theta, [np.quantile((np.arange(100) / 100.0) ** 2, 0.5), 4.0], rtol=1e-5)
    with pytest.raises(ValueError):
        choose_theta(*_pair(res), 1.0)


def test_top_sensors_ranks_row_sums():
    rows = np.array([[0.1, 0.5, 0.3, 0.5], [4.0, 1.0, 2.0, 3.0]])
    np.testing.assert_array_equal(top_sensors(rows, 3), [[1, 3, 2], [0, 3, 2]])
    assert top_sensors(rows, 10).shape == (2, 4)


def test_calibration_beta_max_fixed_theta_and_durations():
    cfg = ScoreConfig(method="count", theta=0.005, scales=(10,), threshold="beta_max", beta=1.5)
    val = np.zeros((3, 3, 4, 4), dtype=np.float32)
    val[0, 0, 0, 0] = 0.01           # validation w=10 counts: 1, 2, 0 -> threshold 1.5 * 2 = 3
    val[1, 0, 0, :2] = 0.01
    val[2, 1, :2, :2] = 0.01         # w=30 counts: 0, 0, 4 -> scale threshold 6; w=60: all 0 -> 0
    calib = Calibration.fit(*_pair(val), cfg, WINDOWS)
    assert calib.theta == [0.005] * 3
    assert calib.threshold == pytest.approx(3.0)
    assert calib.scale_thresholds == pytest.approx([3.0, 6.0, 0.0])

    test = np.zeros((3, 3, 4, 4), dtype=np.float32)
    test[0, 0, 0, :3] = 0.01         # 3 entries: not above 3 -> normal
    test[1, 0, 2, :] = 0.02          # short anomaly: 4 entries on w=10 only; sensor 2 dominates
    test[1, 0, 3, 0] = 0.01
    test[2, :, 1, :] = 0.05          # long anomaly: 4 entries on every scale -> lights 10 and 60, not 30 (4 < 6)
    test[2, :, 0, 0] = 0.04
    cfg_k2 = ScoreConfig(**{**cfg.__dict__, "top_k": 2})
    out = score_windows(*_pair(test), cfg_k2, WINDOWS, calib)
    np.testing.assert_array_equal(out.score, [3, 5, 5])
    np.testing.assert_array_equal(out.is_anomaly, [False, True, True])
    np.testing.assert_array_equal(out.root_causes[1], [2, 3])
    np.testing.assert_array_equal(out.root_causes[2], [1, 0])
    np.testing.assert_array_equal(out.scales_lit, [[False, False, False], [True, False, False],
                                                   [True, False, True]])
    again = Calibration.from_dict(calib.to_dict())
    assert again == calib


def test_calibration_theta_from_validation_quantile():
    rng = np.random.default_rng(2)
    target = rng.random((20, 3, 6, 6)).astype(np.float32)
    recon = target + rng.normal(0, 0.01, target.shape).astype(np.float32)
    cfg = ScoreConfig(method="count", theta=None, theta_quantile=0.9, threshold="percentile", percentile=50.0)
    calib = Calibration.fit(target, recon, cfg, WINDOWS)
    res = (target.astype(np.float64) - recon) ** 2
    np.testing.assert_allclose(calib.theta, np.quantile(res.transpose(1, 0, 2, 3).reshape(3, -1), 0.9, axis=1),
                               rtol=1e-5)
    counts = (res[:, 0] > calib.theta[0]).sum(axis=(1, 2))
    assert calib.threshold == pytest.approx(np.percentile(counts, 50.0))


def test_mse_calibration_has_no_theta():
    rng = np.random.default_rng(3)
    target = rng.random((8, 3, 4, 4)).astype(np.float32)
    recon = rng.random((8, 3, 4, 4)).astype(np.float32)
    cfg = ScoreConfig(method="mse", beta=2.0)
    calib = Calibration.fit(target, recon, cfg, WINDOWS)
    assert calib.theta == []
    mse10 = ((target.astype(np.float64) - recon) ** 2)[:, 0].mean(axis=(1, 2))
    assert calib.threshold == pytest.approx(2.0 * mse10.max(), rel=1e-5)
    out = score_windows(target, recon, cfg, WINDOWS, calib)
    np.testing.assert_allclose(out.score, mse10, rtol=1e-5)
    assert not out.is_anomaly.any()


def test_timestamp_mapping_by_hand():
    # windows (4, 6), gap 2, steps 2, T = 13: segments end at 6, 8, 10, 12 (4 segments, 3 windows).
    win = timestamp_windows(13, (4, 6), gap=2, steps=2)
    # window 0 ends with segment 1 (end 8): taus 6, 7; window 1 -> taus 8, 9; window 2 -> taus 10, 11.
    np.testing.assert_array_equal(win, [-1] * 6 + [0, 0, 1, 1, 2, 2, -1])
    scores = timestamp_scores(np.array([5.0, 7.0, 9.0]), 13, (4, 6), gap=2, steps=2)
    np.testing.assert_array_equal(scores, [0] * 6 + [5, 5, 7, 7, 9, 9, 0])


def test_timestamp_mapping_paper_defaults():
    # 2,000 rows, windows up to 60, gap 10, steps 5: segments end at 60..2000 (195), 191 windows.
    win = timestamp_windows(2000, WINDOWS, gap=10, steps=5)
    assert win.max() == 190
    assert (win[:90] == -1).all() and (win[90:100] == 0).all() and (win[1990:] == 190).all()
    with pytest.raises(ValueError):
        timestamp_scores(np.zeros(5), 2000, WINDOWS, gap=10, steps=5)


def test_z_sensor_score_standardises_row_sums_by_validation():
    from mscred.detect import SensorStats, sensor_rows

    rng = np.random.default_rng(4)
    val = rng.random((40, 3, 5, 5)).astype(np.float32) * 0.1
    val[:, :, 0, :] *= 10.0                      # sensor 0 is always badly reconstructed: large, noisy rows
    cfg = ScoreConfig(method="z_sensor", threshold="beta_max", beta=1.5, top_k=2)
    calib = Calibration.fit(*_pair(val), cfg, WINDOWS)
    rows = sensor_rows(*_pair(val))              # (40, 3, 5): row sums per scale
    np.testing.assert_allclose(rows, val.astype(np.float64).sum(axis=3), rtol=1e-5)
    mean10, std10 = rows[:, 0].mean(0), rows[:, 0].std(0)
    z_val = ((rows[:, 0] - mean10) / std10).max(axis=1)
    assert calib.threshold == pytest.approx(1.5 * z_val.max(), rel=1e-6)
    assert calib.theta == [] and isinstance(calib.sensor_stats, SensorStats)

    test = np.repeat(val[:1], 2, axis=0).copy()
    test[1, 0, 3, :] += 0.3                     # sensor 3 breaks a little: small in absolute terms
    out = score_windows(*_pair(test), cfg, WINDOWS, calib)
    z_test = (sensor_rows(*_pair(test))[:, 0] - mean10) / std10
    np.testing.assert_allclose(out.score, z_test.max(axis=1), rtol=1e-6)
    assert out.is_anomaly[1] and out.root_causes[1, 0] == 3
    # Raw row sums would blame sensor 0, whose residual is always large.
    assert rows[0, 0].argmax() == 0
    again = Calibration.from_dict(calib.to_dict())
    assert again == calib
    np.testing.assert_allclose(score_windows(*_pair(test), cfg, WINDOWS, again).score, out.score)


def test_sensor_stats_floor_for_perfect_sensors():
    from mscred.detect import SensorStats

    rows = np.zeros((10, 1, 3))
    rows[:, 0, 1] = np.linspace(0, 1, 10)
    stats = SensorStats.fit(rows, [0])
    assert (stats.std > 0).all() and np.isfinite(stats.z(rows, [0])[1]).all()
