"""Range-based VUS-ROC and VUS-PR (Paparrizos et al., "Volume Under the Surface", VLDB 2022).

A port of the reference implementation, ``RangeAUC_volume_opt`` in TheDatumOrg/TSB-AD
(``TSB_AD/evaluation/basic_metrics.py``), called there as ``generate_curve(labels, score, 2 * slidingWindow)``.
For every buffer length w = 0 .. 2L (L: the sliding window, fixed and reported), each true event [s, e] is widened
by w//2 points on both sides with soft labels sqrt(1 - d/w) at distance d; at 250 thresholds taken at evenly spaced
ranks of the sorted scores (predict ``score >= t``):

    TP   = sum(label * pred) on the widened labels, where the buffer counts only where predicted
    P'   = (#true points + sum of the buffer labels that count) / 2
    TPR  = min(TP / P', 1) * (widened events with any prediction) / (widened events)
    FPR  = (#predicted - TP) / (T - P'),   precision = TP / #predicted

Range-AUC-ROC is the trapezoid area of (FPR, TPR) from (0, 0) to (1, 1); Range-AUC-PR the sum of TPR steps times
precision (starting at TPR 0); VUS is their mean over the buffer lengths.

The reference loops over buffers x thresholds x events with a full copy of the labels each time; here the
predicted sets, nested as the threshold falls, are prefixes of one descending sort, so every sum is a cumulative
sum read at the prefix length — the same numbers (to rounding) in O(T) per buffer. ``tests/test_vus.py`` checks
this against a loop-for-loop transcription of the reference.
"""
from __future__ import annotations

import numpy as np

# TSB-AD's get_metrics default (slidingWindow=100); buffers then run 0..200.
DEFAULT_SLIDING_WINDOW = 100
DEFAULT_THRESHOLDS = 250


def label_ranges(labels: np.ndarray) -> list[tuple[int, int]]:
    """Runs of 1s as inclusive (start, end) pairs, as the reference's ``range_convers_new``."""
    y = np.asarray(labels).astype(np.int8)
    edges = np.diff(np.concatenate([[0], y, [0]]))
    return list(zip(np.flatnonzero(edges == 1).tolist(), (np.flatnonzero(edges == -1) - 1).tolist()))


def widened_ranges(ranges: list[tuple[int, int]], window: int, length: int) -> list[tuple[int, int]]:
    """Events widened by window//2 on both sides, merged when they overlap (reference ``new_sequence``).

    As in the reference, only the first start is clipped at 0 and only the last end at length - 1.
    """
    half = window // 2
    merged = []
    start = max(ranges[0][0] - half, 0)
    for (_, end), (next_start, _) in zip(ranges[:-1], ranges[1:]):
        if end + half < next_start - half:
            merged.append((start, end + half))
            start = next_start - half
    merged.append((start, min(ranges[-1][1] + half, length - 1)))
    return merged


def soft_labels(labels: np.ndarray, ranges: list[tuple[int, int]], window: int) -> np.ndarray:
    """Labels plus the buffer ramps sqrt(1 - d/window) around each event, capped at 1 (reference ``sequencing``)."""
    out = np.asarray(labels, dtype=np.float64).copy()
    n = out.size
    half = window // 2
    for s, e in ranges:
        after = np.arange(e + 1, min(e + half + 1, n))
        out[after] += np.sqrt(1 - (after - e) / window)
        before = np.arange(max(s - half, 0), s)
        out[before] += np.sqrt(1 - (s - before) / window)
    return np.minimum(out, 1.0)


def range_curves(labels, scores, max_buffer: int, n_thresholds: int = DEFAULT_THRESHOLDS):
    """Range-AUC-ROC and Range-AUC-PR for every buffer length 0..max_buffer.

    Parameters
    ----------
    labels : array-like of 0/1, shape (T,), with at least one 1
    scores : array-like of float, shape (T,), higher = more anomalous
    max_buffer : int, the reference's ``windowSize`` (2 x the sliding window in TSB-AD)

    Returns
    -------
    auc_roc, auc_pr : float64 arrays, shape (max_buffer + 1,)
    """
    y = np.asarray(labels).reshape(-1).astype(np.float64)
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"labels ({y.size}) and scores ({s.size}) differ in length")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or inf")
    if not np.all((y == 0) | (y == 1)) or y.sum() == 0:
        raise ValueError("VUS needs 0/1 labels with at least one anomalous point")
    if max_buffer < 0 or n_thresholds < 1:
        raise ValueError("VUS: max_buffer must be >= 0 and n_thresholds >= 1")
    n, positives = s.size, y.sum()
    ranges = label_ranges(y)

    order = np.argsort(-s, kind="mergesort")
    ranked = s[order]
    thresholds = ranked[np.linspace(0, n - 1, n_thresholds).astype(int)]
    # predicted set at threshold t = {score >= t} = the first n_pred points of the descending order
    n_pred = n - np.searchsorted(np.sort(s), thresholds, side="left")
    true_hits = np.concatenate([[0.0], np.cumsum(y[order])])[n_pred]

    aucs = np.empty(max_buffer + 1)
    aps = np.empty(max_buffer + 1)
    for window in range(max_buffer + 1):
        soft = soft_labels(y, ranges, window)
        buffer = np.where(y == 1, 0.0, soft)  # the ramp outside the true points
        buffer_hits = np.concatenate([[0.0], np.cumsum(buffer[order])])[n_pred]
        tp = true_hits + buffer_hits
        p_new = (positives + (positives + buffer_hits)) / 2  # (P + N_labels) / 2, N_labels = P + buffer hits
        widened = widened_ranges(ranges, window, n)
        seg_max = np.sort([s[a:b + 1].max() for a, b in widened])
        existence = len(widened) - np.searchsorted(seg_max, thresholds, side="left")
        tpr = np.minimum(tp / p_new, 1.0) * existence / len(widened)
        fpr = (n_pred - tp) / (n - p_new)
        precision = tp / n_pred
        tpr_c = np.concatenate([[0.0], tpr, [1.0]])
        fpr_c = np.concatenate([[0.0], fpr, [1.0]])
        aucs[window] = np.dot(fpr_c[1:] - fpr_c[:-1], (tpr_c[1:] + tpr_c[:-1]) / 2)
        aps[window] = np.dot(tpr_c[1:-1] - tpr_c[:-2], precision)
    return aucs, aps


def vus(labels, scores, sliding_window: int = DEFAULT_SLIDING_WINDOW,
        n_thresholds: int = DEFAULT_THRESHOLDS) -> tuple[float, float]:
    """(VUS-ROC, VUS-PR): the mean Range-AUCs over buffers 0..2 x ``sliding_window``, as TSB-AD's get_metrics."""
    aucs, aps = range_curves(labels, scores, 2 * sliding_window, n_thresholds)
    return float(aucs.mean()), float(aps.mean())
