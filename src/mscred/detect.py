"""From reconstructions to anomalies: residuals, window scores, thresholds, root causes, durations, timestamps.

Everything here works on NumPy arrays, after the network has run:

* ``target``  float32 (W, n_scales, n, n): the signature matrices of each window's last segment;
* ``recon``   float32 (W, n_scales, n, n): the network's reconstruction of them;
* the residual ``R = (target - recon) ** 2`` (the paper's residual signature matrices).

Scores (``ScoreConfig.method``):

* ``"count"`` (the paper): the number of entries of R above ``theta`` on the chosen scales (default w = 10 only,
  as the original code). ``theta`` is ``ScoreConfig.theta`` (the paper's 0.005) or, when that is None, chosen per
  scale from the validation residuals as their ``ScoreConfig.theta_quantile`` quantile (see :func:`choose_theta`).
* ``"mse"``: the mean of R over the chosen scales.
* ``"z_sensor"``: per sensor, the row sum of R over the chosen scales, standardised by the mean and standard
  deviation of that sensor's row sum on the validation windows; the window score is the largest of them. A sensor
  whose residuals are always large (hard to reconstruct) no longer hides a small sensor that breaks, and the score
  looks at rows, where a root cause's disturbance lies (its whole row and column of M change).

The anomaly threshold on window scores comes from :mod:`mscred.thresholds` (beta x max of the validation scores by
default). Root causes are the sensors with the largest row sums of R on the chosen scales (for ``z_sensor``: the
largest standardised row sums). Durations: each scale has
its own score (the same method, on that scale alone) and its own threshold fitted on the validation windows in the
same way; a window "lights" scale w when its scale-w score is above the scale-w threshold. A short anomaly disturbs
only the 10-step matrices, a long one all three.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Optional, Sequence

import numpy as np

from mscred.config import ScoreConfig
from mscred import thresholds as _thresholds

SCORE_METHODS = ("count", "mse", "z_sensor")
# Windows scored per chunk: bounds the memory of the residual to chunk x n_scales x n x n floats.
_CHUNK = 2048
# Bytes of one group of residuals (float32), worked on in one buffer that stays in the CPU's cache: a chunk of 2,048
# windows of 80 sensors was 157 MB of residual and 157 MB of difference, written and read back from memory (and
# page-faulted in by every fresh process). Reductions run per window, so the grouping changes no result.
_GROUP_BYTES = 1 << 20


def scale_index(windows: Sequence[int], scales: Sequence[int]) -> list[int]:
    """Positions in ``windows`` of the window lengths ``scales``; an unknown scale is a ValueError."""
    windows = [int(w) for w in windows]
    missing = [int(s) for s in scales if int(s) not in windows]
    if missing or not scales:
        raise ValueError(f"score scales {list(scales)} must be a non-empty subset of the windows {windows}")
    return [windows.index(int(s)) for s in scales]


def residuals(target: np.ndarray, recon: np.ndarray) -> np.ndarray:
    """R = (target - recon)^2, float32 (W, n_scales, n, n)."""
    if target.shape != recon.shape:
        raise ValueError(f"target {target.shape} and reconstruction {recon.shape} differ in shape")
    diff = np.asarray(target, dtype=np.float32) - np.asarray(recon, dtype=np.float32)
    return diff * diff


def _chunks(target: np.ndarray, recon: np.ndarray) -> Iterator[tuple[slice, np.ndarray]]:
    """(windows, R of those windows) a group at a time: R is :func:`residuals`' values, computed in place in one
    reused float32 buffer of at most ``_CHUNK`` windows and ``_GROUP_BYTES`` (the caller must be done with a group
    before it asks for the next)."""
    if target.shape != recon.shape:
        raise ValueError(f"target {target.shape} and reconstruction {recon.shape} differ in shape")
    per_window = 4 * int(np.prod(target.shape[1:], dtype=np.int64))
    group = max(1, min(_CHUNK, _GROUP_BYTES // max(per_window, 1)))
    buf = np.empty((min(group, len(target)), *target.shape[1:]), dtype=np.float32)
    for start in range(0, len(target), group):
        part = slice(start, min(start + group, len(target)))
        res = buf[: part.stop - start]
        np.subtract(np.asarray(target[part], dtype=np.float32), np.asarray(recon[part], dtype=np.float32), out=res)
        np.multiply(res, res, out=res)
        yield part, res


def choose_theta(target: np.ndarray, recon: np.ndarray, quantile: float) -> np.ndarray:
    """Per-scale residual threshold theta from validation windows: the ``quantile`` of their residual entries.

    With theta at, e.g., the 0.99 quantile, about 1% of the entries of a normal window lie above it, so the count
    score of normal windows stays small and stable whatever the absolute size of the reconstruction error (which
    depends on how long the network trained); the paper's fixed 0.005 assumes a well-trained network.

    Parameters
    ----------
    target, recon : float32 (W_val, n_scales, n, n)
    quantile : float in (0, 1)

    Returns
    -------
    theta : float64 (n_scales,)
    """
    if not 0.0 < quantile < 1.0:
        raise ValueError(f"theta_quantile must be in (0, 1), got {quantile}")
    res = residuals(target, recon)
    flat = res.transpose(1, 0, 2, 3).reshape(res.shape[1], -1)  # (n_scales, W_val * n * n)
    return np.quantile(flat.astype(np.float64), quantile, axis=1)


def scale_scores(target: np.ndarray, recon: np.ndarray, method: str, theta: np.ndarray | None,
                 root_scales: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """Per-scale window scores and per-sensor residual row sums, computed in chunks.

    Parameters
    ----------
    target, recon : float32 (W, n_scales, n, n)
    method : "count" or "mse" ("z_sensor" scores need validation statistics: see :func:`sensor_rows`)
    theta : float (n_scales,) residual thresholds of the count score (ignored for "mse")
    root_scales : indices of the scales whose residual rows rank the root causes

    Returns
    -------
    per_scale : float64 (W, n_scales)
        Count of entries above theta[s] (count) or the mean residual (mse), each scale alone.
    row_sums : float64 (W, n)
        sum over the root scales s and columns j of R[w, s, i, j], per sensor i.
    """
    if method not in ("count", "mse"):
        raise ValueError(f"unknown score method {method!r} here; choose count or mse")
    n_win, n_scales, n = target.shape[0], target.shape[1], target.shape[2]
    per_scale = np.zeros((n_win, n_scales), dtype=np.float64)
    row_sums = np.zeros((n_win, n), dtype=np.float64)
    if method == "count":
        theta = np.asarray(theta, dtype=np.float64).reshape(-1)
        if theta.shape != (n_scales,):
            raise ValueError(f"theta needs one value per scale ({n_scales}), got {theta.shape}")
    for part, res in _chunks(target, recon):
        if method == "count":
            per_scale[part] = (res > theta[None, :, None, None].astype(np.float32)).sum(axis=(2, 3))
        else:
            per_scale[part] = res.mean(axis=(2, 3), dtype=np.float64)
        row_sums[part] = res[:, list(root_scales)].sum(axis=(1, 3), dtype=np.float64)
    return per_scale, row_sums


def sensor_rows(target: np.ndarray, recon: np.ndarray) -> np.ndarray:
    """Row sums of the residual per scale and sensor, float64 (W, n_scales, n): sum_j R[w, s, i, j]."""
    rows = np.zeros(target.shape[:3], dtype=np.float64)
    for part, res in _chunks(target, recon):
        rows[part] = res.sum(axis=3, dtype=np.float64)
    return rows


@dataclass
class SensorStats:
    """Validation mean and standard deviation of the per-sensor residual row sums (the z_sensor score).

    mean, std : float64 (n_scales + 1, n): one row per scale, then one for the sum over the score scales.
    """

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, rows: np.ndarray, scales: Sequence[int]) -> "SensorStats":
        """rows: (W_val, n_scales, n) from :func:`sensor_rows` on the validation windows."""
        stacked = np.concatenate([rows, rows[:, list(scales)].sum(axis=1, keepdims=True)], axis=1)
        mean, std = stacked.mean(axis=0), stacked.std(axis=0)
        # A floor keeps a sensor that the network reconstructs perfectly (e.g. constant) from dividing by ~0.
        floor = 1e-3 * np.median(std, axis=1, keepdims=True) + 1e-12
        return cls(mean=mean, std=np.maximum(std, floor))

    def z(self, rows: np.ndarray, scales: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """Standardised row sums: per scale (W, n_scales, n) and over the score scales combined (W, n)."""
        n_scales = rows.shape[1]
        per = (rows - self.mean[None, :n_scales]) / self.std[None, :n_scales]
        combined = (rows[:, list(scales)].sum(axis=1) - self.mean[n_scales]) / self.std[n_scales]
        return per, combined


def combine(per_scale: np.ndarray, scales: Sequence[int], method: str) -> np.ndarray:
    """Window score (W,) from the per-scale scores: summed counts, or the mean of the per-scale MSEs."""
    chosen = per_scale[:, list(scales)]
    return chosen.sum(axis=1) if method == "count" else chosen.mean(axis=1)


def top_sensors(row_sums: np.ndarray, k: int) -> np.ndarray:
    """Indices (W, k) of the k sensors with the largest row sums, largest first (ties: lower index first)."""
    k = min(int(k), row_sums.shape[1])
    order = np.argsort(-row_sums, axis=1, kind="stable")
    return order[:, :k]


@dataclass
class Calibration:
    """What scoring learns from the validation windows; stored in a model's config.json.

    theta            (n_scales,) residual threshold of each scale (count score only; empty otherwise)
    threshold        anomaly threshold on the window score
    scale_thresholds (n_scales,) threshold on each scale's own score, for durations
    sensor_stats     validation statistics of the per-sensor row sums (z_sensor score only; None otherwise)
    """

    theta: list[float]
    threshold: float
    scale_thresholds: list[float]
    sensor_stats: Optional[SensorStats] = None

    @classmethod
    def fit(cls, target: np.ndarray, recon: np.ndarray, cfg: ScoreConfig, windows: Sequence[int]) -> "Calibration":
        """Fit theta (fixed or from the residual quantile) or the sensor statistics, then the thresholds on the
        validation scores.

        target, recon : float32 (W_val, n_scales, n, n) of the validation windows.
        """
        if cfg.method not in SCORE_METHODS:
            raise ValueError(f"unknown score method {cfg.method!r}; choose one of {', '.join(SCORE_METHODS)}")
        n_scales = target.shape[1]
        idx = scale_index(windows, cfg.scales)
        theta, stats = np.zeros(0), None
        if cfg.method == "count":
            if cfg.theta is None:
                theta = choose_theta(target, recon, cfg.theta_quantile)
            else:
                theta = np.full(n_scales, float(cfg.theta))
        elif cfg.method == "z_sensor":
            stats = SensorStats.fit(sensor_rows(target, recon), idx)
        calib = cls(theta=[float(t) for t in theta], threshold=0.0, scale_thresholds=[0.0] * n_scales,
                    sensor_stats=stats)
        per_scale, score, _ = _scores(target, recon, cfg.method, calib, idx)
        calib.threshold = float(_thresholds.choose_threshold(cfg.threshold, score, cfg))
        calib.scale_thresholds = [float(_thresholds.choose_threshold(cfg.threshold, per_scale[:, s], cfg))
                                  for s in range(n_scales)]
        return calib

    def to_dict(self) -> dict:
        out = {"theta": self.theta, "threshold": self.threshold, "scale_thresholds": self.scale_thresholds}
        if self.sensor_stats is not None:
            out["sensor_stats"] = {"mean": self.sensor_stats.mean.tolist(), "std": self.sensor_stats.std.tolist()}
        return out

    @classmethod
    def from_dict(cls, data: dict) -> "Calibration":
        if not isinstance(data, dict):
            raise ValueError(f"calibration: expected an object, got {type(data).__name__}")
        stats = data.get("sensor_stats")
        if stats is not None:
            if not isinstance(stats, dict):
                raise ValueError(f"sensor_stats: expected an object, got {type(stats).__name__}")
            mean = np.asarray(stats["mean"], dtype=np.float64)
            std = np.asarray(stats["std"], dtype=np.float64)
            # A NaN mean or an infinite std would score every window NaN or 0: never "normal" silently.
            if (mean.ndim != 2 or mean.shape != std.shape or not np.isfinite(mean).all()
                    or not np.isfinite(std).all() or not (std > 0).all()):
                raise ValueError("sensor_stats: mean/std must be equal 2-D shapes of finite numbers with std > 0")
            stats = SensorStats(mean=mean, std=std)
        return cls(theta=[_real(t, "theta") for t in data["theta"]], threshold=_real(data["threshold"], "threshold"),
                   scale_thresholds=[_real(t, "scale_thresholds") for t in data["scale_thresholds"]],
                   sensor_stats=stats)

    def __eq__(self, other) -> bool:
        return isinstance(other, Calibration) and self.to_dict() == other.to_dict()


def _real(value, name: str) -> float:
    """A number of a stored calibration as float. float() alone took a hand-edited ``true`` as a threshold of 1.0
    and ``"1.5"`` as 1.5: JSON numbers only."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"calibration {name}: {value!r} is not a number")
    return float(value)


def _scores(target: np.ndarray, recon: np.ndarray, method: str, calib: Calibration,
            idx: Sequence[int]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(per-scale scores (W, n_scales), window scores (W,), root-cause ranking values (W, n))."""
    if method == "z_sensor":
        if calib.sensor_stats is None:
            raise ValueError("the z_sensor score needs sensor statistics in the calibration")
        per, combined = calib.sensor_stats.z(sensor_rows(target, recon), idx)
        return per.max(axis=2), combined.max(axis=1), combined
    theta = np.asarray(calib.theta) if method == "count" else None
    per_scale, row_sums = scale_scores(target, recon, method, theta, idx)
    return per_scale, combine(per_scale, idx, method), row_sums


# detect(sensor_scores=True)'s column of each sensor: "score_" + its name (no fixed column starts so)
SENSOR_SCORE_PREFIX = "score_"


def sensor_score_columns(frame) -> list:
    """The score_<sensor> columns of a SCORES frame, in their order."""
    return [c for c in frame.columns if str(c).startswith(SENSOR_SCORE_PREFIX)]


def without_sensor_scores(frame):
    """A SCORES frame without its score_<sensor> columns (computed for a report page, not asked for in the file)."""
    return frame.drop(columns=sensor_score_columns(frame))


@dataclass
class WindowResult:
    """Everything scored per window (W windows, n sensors, n_scales scales)."""

    score: np.ndarray        # float64 (W,)
    is_anomaly: np.ndarray   # bool (W,)
    root_causes: np.ndarray  # int64 (W, k) sensor indices, most anomalous first
    scales_lit: np.ndarray   # bool (W, n_scales) scale w flags the window (durations)
    # float64 (W, n) what root_causes ranks, per sensor on the score's scales: under z_sensor its standardised
    # residual row sum (the window's score is the largest of them), under count and mse its residual row sum
    sensor_scores: np.ndarray


def score_windows(target: np.ndarray, recon: np.ndarray, cfg: ScoreConfig, windows: Sequence[int],
                  calib: Calibration) -> WindowResult:
    """Score every window with a fitted calibration.

    target, recon : float32 (W, n_scales, n, n)
    """
    idx = scale_index(windows, cfg.scales)
    per_scale, score, rank_by = _scores(target, recon, cfg.method, calib, idx)
    lit = per_scale > np.asarray(calib.scale_thresholds)[None, :]
    return WindowResult(score=score, is_anomaly=score > calib.threshold,
                        root_causes=top_sensors(rank_by, cfg.top_k), scales_lit=lit, sensor_scores=rank_by)


def timestamp_windows(length: int, windows: Sequence[int], gap: int, steps: int) -> np.ndarray:
    """For each timestamp, the window whose score it takes, or -1.

    Segment j ends (exclusive) at ``ends[j] = max(windows) + j * gap``; window k's last segment is j = k + steps - 1.
    Timestamp tau with ``ends[j] - gap <= tau < ends[j]`` takes window j - steps + 1. Timestamps before the first
    window's last segment, and the fewer than ``gap`` trailing ones after the last segment end, belong to no
    window (-1): no window has seen them yet.

    Returns
    -------
    int64 (length,)
    """
    max_w = max(int(w) for w in windows)
    n_seg = 0 if length < max_w else (length - max_w) // gap + 1
    tau = np.arange(length, dtype=np.int64)
    seg = np.floor_divide(tau - max_w, gap) + 1  # the j with ends[j] - gap <= tau < ends[j]
    win = seg - (steps - 1)
    valid = (seg >= steps - 1) & (seg < n_seg)
    return np.where(valid, win, -1)


def timestamp_scores(window_scores: np.ndarray, length: int, windows: Sequence[int], gap: int,
                     steps: int) -> np.ndarray:
    """Per-timestamp scores (length,): the score of the window that ends after the timestamp, within the gap;
    0 for timestamps that no window covers (see :func:`timestamp_windows`)."""
    win = timestamp_windows(length, windows, gap, steps)
    if len(window_scores) and win.max(initial=-1) >= len(window_scores):
        raise ValueError(f"{len(window_scores)} window scores for a series of {length} rows needs "
                         f"{win.max() + 1}")
    out = np.zeros(length, dtype=np.float64)
    covered = win >= 0
    out[covered] = np.asarray(window_scores, dtype=np.float64)[win[covered]]
    return out
