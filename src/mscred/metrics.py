"""Evaluation metrics for anomaly detection on time series: small functions, each validated on hand-computed arrays.

Two families, kept apart (TimeEval, TSB-AD):
- thresholded (labels and 0/1 predictions, shape (T,)): point precision / recall / F1, event recall, point-adjusted
  F1 and PA%K (Kim et al., AAAI 2022) — the adjusted ones inflate results and are only reported beside the
  unadjusted figures;
- threshold-free (labels and real scores, shape (T,), higher = more anomalous): AUC-ROC, AUC-PR (average
  precision), VUS-ROC / VUS-PR (Paparrizos et al., VLDB 2022; in :mod:`mscred.vus`), and best F1 over all
  thresholds, which picks its threshold with the labels and is labelled so wherever it is shown.
Plus root-cause recall@k per ground-truth event.

Conventions: a ratio with a zero denominator is 0 (as scikit-learn's ``zero_division=0``); events are half-open
intervals [start, end) of consecutive label-1 points.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

from mscred.vus import vus  # noqa: F401  (re-exported: every metric is reachable from mscred.metrics)


@dataclass(frozen=True)
class PRF:
    precision: float
    recall: float
    f1: float


def _binary(x, name: str) -> np.ndarray:
    arr = np.asarray(x).reshape(-1)
    if arr.dtype == bool:
        return arr.astype(np.int8)
    if arr.size and not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name}: values must be 0 or 1")
    return arr.astype(np.int8)


def _pair(labels, pred) -> tuple[np.ndarray, np.ndarray]:
    y, p = _binary(labels, "labels"), _binary(pred, "predictions")
    if y.shape != p.shape:
        raise ValueError(f"labels ({y.size}) and predictions ({p.size}) differ in length")
    return y, p


def _scored(labels, scores) -> tuple[np.ndarray, np.ndarray]:
    y = _binary(labels, "labels")
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if y.shape != s.shape:
        raise ValueError(f"labels ({y.size}) and scores ({s.size}) differ in length")
    if not np.all(np.isfinite(s)):
        raise ValueError("scores contain NaN or inf")
    return y, s


def _div(a: float, b: float) -> float:
    return float(a / b) if b else 0.0


def _f1(p: float, r: float) -> float:
    return _div(2 * p * r, p + r)


def events(labels) -> np.ndarray:
    """Runs of consecutive 1s in ``labels`` (shape (T,)) as int64 (E, 2) rows [start, end), end exclusive."""
    y = _binary(labels, "labels")
    edges = np.diff(np.concatenate([[0], y, [0]]).astype(np.int8))
    return np.stack([np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)], axis=1).astype(np.int64)


def point_prf(labels, pred) -> PRF:
    """Point-wise precision, recall and F1 of 0/1 ``pred`` against 0/1 ``labels`` (both (T,)), no adjustment."""
    y, p = _pair(labels, pred)
    tp = int(np.sum(y & p))
    precision, recall = _div(tp, int(p.sum())), _div(tp, int(y.sum()))
    return PRF(precision, recall, _f1(precision, recall))


def event_recall(labels, pred) -> tuple[int, int]:
    """(events found, events in total): an event is found when at least one of its points is predicted."""
    y, p = _pair(labels, pred)
    ev = events(y)
    found = sum(int(p[s:e].any()) for s, e in ev)
    return found, len(ev)


def point_adjust(labels, pred, k: float = 0.0) -> np.ndarray:
    """PA%K (Kim et al., AAAI 2022): mark a whole true event detected when more than ``k`` % of its points are.

    ``k = 0`` is the classic point adjustment (one hit marks the whole event), ``k = 100`` leaves ``pred``
    unchanged. Returns int8 (T,).
    """
    if not 0.0 <= k <= 100.0:
        raise ValueError(f"PA%K: k must be in [0, 100], got {k}")
    y, p = _pair(labels, pred)
    out = p.copy()
    for s, e in events(y):
        if p[s:e].sum() > k / 100.0 * (e - s):
            out[s:e] = 1
    return out


def pa_f1(labels, pred, k: float = 0.0) -> PRF:
    """Precision / recall / F1 after PA%K adjustment (k = 0: point-adjusted). Inflated: show beside point_prf."""
    return point_prf(labels, point_adjust(labels, pred, k))


def pa_k_auc(labels, pred, ks: Sequence[float] = tuple(range(101))) -> float:
    """Area under F1-PA%K as K goes 0..100 (trapezoids, normalised to [0, 1]), as Kim et al. report it."""
    ks = np.asarray(ks, dtype=np.float64)
    f1s = np.array([pa_f1(labels, pred, k).f1 for k in ks])
    return float(np.sum((ks[1:] - ks[:-1]) * (f1s[1:] + f1s[:-1]) / 2) / (ks[-1] - ks[0]))


def _ranked_counts(y: np.ndarray, s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Cumulative true and false positives at each distinct score, highest first (predict ``score >= t``)."""
    order = np.argsort(-s, kind="mergesort")
    s_sorted, y_sorted = s[order], y[order].astype(np.int64)
    # last position of each run of equal scores: all tied points enter together
    last = np.flatnonzero(np.concatenate([s_sorted[1:] != s_sorted[:-1], [True]]))
    tps = np.cumsum(y_sorted)[last]
    fps = (last + 1) - tps
    return tps, fps, s_sorted[last]


def auc_roc(labels, scores) -> float:
    """Area under the ROC curve (trapezoids over every distinct threshold; ties count half, as Mann-Whitney U)."""
    y, s = _scored(labels, scores)
    n_pos, n_neg = int(y.sum()), int(y.size - y.sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC-ROC needs both normal and anomalous points")
    tps, fps, _ = _ranked_counts(y, s)
    tpr = np.concatenate([[0.0], tps / n_pos])
    fpr = np.concatenate([[0.0], fps / n_neg])
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2))


def auc_pr(labels, scores) -> float:
    """Average precision: sum over distinct thresholds of (R_i - R_{i-1}) * P_i (step-wise, no interpolation).

    This is scikit-learn's ``average_precision_score``, which TSB-AD reports as AUC-PR.
    """
    y, s = _scored(labels, scores)
    n_pos = int(y.sum())
    if n_pos == 0:
        raise ValueError("AUC-PR needs at least one anomalous point")
    tps, fps, _ = _ranked_counts(y, s)
    precision = tps / (tps + fps)
    recall = np.concatenate([[0.0], tps / n_pos])
    return float(np.sum((recall[1:] - recall[:-1]) * precision))


def best_f1(labels, scores) -> tuple[PRF, float]:
    """Best point F1 over every threshold ``score >= t`` — an oracle: it picks t WITH the labels.

    Returns (PRF at the best threshold, that threshold). Never report it as a detector's F1.
    """
    y, s = _scored(labels, scores)
    n_pos = int(y.sum())
    if n_pos == 0:
        raise ValueError("best F1 needs at least one anomalous point")
    tps, fps, thresholds = _ranked_counts(y, s)
    precision, recall = tps / (tps + fps), tps / n_pos
    f1 = np.where(precision + recall > 0, 2 * precision * recall / np.maximum(precision + recall, 1e-300), 0.0)
    i = int(np.argmax(f1))
    return PRF(float(precision[i]), float(recall[i]), float(f1[i])), float(thresholds[i])


def rank_event_causes(cause_lists: Iterable[Sequence[str]]) -> list[str]:
    """One ranking of root causes for an event from the per-timestamp top lists inside it.

    A sensor ranks by how many flagged timestamps list it (votes), ties by its mean position in those lists,
    then by name. Empty lists (normal timestamps) do not vote.
    """
    votes: dict[str, int] = {}
    positions: dict[str, int] = {}
    for causes in cause_lists:
        for pos, name in enumerate(causes):
            votes[name] = votes.get(name, 0) + 1
            positions[name] = positions.get(name, 0) + pos
    return sorted(votes, key=lambda n: (-votes[n], positions[n] / votes[n], n))


def root_cause_recall_at_k(true_causes: Sequence[Iterable[str]], ranked: Sequence[Sequence[str]], k: int = 3) -> float:
    """Mean over events of |true causes in the top k of the ranking| / |true causes|.

    Parameters
    ----------
    true_causes : per event, the set of true root-cause sensor names (events without any are skipped)
    ranked : per event, the predicted ranking (empty for a missed event, which then scores 0)
    """
    if len(true_causes) != len(ranked):
        raise ValueError(f"{len(true_causes)} events of ground truth but {len(ranked)} rankings")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    recalls = []
    for truth, pred in zip(true_causes, ranked):
        truth = set(truth)
        if truth:
            recalls.append(len(truth & set(list(pred)[:k])) / len(truth))
    if not recalls:
        raise ValueError("no event has ground-truth root causes")
    return float(np.mean(recalls))
