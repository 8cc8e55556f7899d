"""Anomaly thresholds on 1-D scores (higher = more anomalous).

Three rules, chosen by ``ScoreConfig.threshold``:
- ``beta_max``: the paper's beta x max(validation score), beta = 1.5;
- ``percentile``: the q-th percentile of the validation scores;
- ``pot``: Peaks-Over-Threshold from extreme value theory (Siffer et al., KDD 2017), as OmniAnomaly uses it; the
  streaming variant SPOT lives in :mod:`mscred.pot`.
"""
from __future__ import annotations

import numpy as np

METHODS = ("beta_max", "percentile", "pot")
# The ScoreConfig setting each rule reads ("spot": evaluate's streaming POT): an option given for another rule
# would change nothing, so the CLI refuses it (evaluate, calibrate).
READ_BY = {"beta": ("beta_max",), "percentile": ("percentile",), "pot_risk": ("pot", "spot"),
           "pot_level": ("pot", "spot")}


def _as_scores(scores, what: str = "scores") -> np.ndarray:
    """1-D float64 copy of ``scores``; empty or non-finite input is a ValueError (a caller's bug, not user input)."""
    arr = np.asarray(scores, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"{what}: empty")
    if not np.all(np.isfinite(arr)):
        raise ValueError(f"{what}: contains NaN or inf")
    return arr


def beta_max(val_scores, beta: float = 1.5) -> float:
    """The paper's threshold: ``beta * max(val_scores)``.

    Parameters
    ----------
    val_scores : array-like, shape (W,)
        Scores of the validation windows (normal data only).
    beta : float
        Margin above the largest normal score; the paper uses 1.5.

    Notes
    -----
    When every validation score is 0 (the count score on clean data often is), the threshold is 0 and any window
    with a positive score is flagged — exactly what the paper's rule says.
    """
    if beta <= 0:
        raise ValueError(f"beta must be > 0, got {beta}")
    return float(beta * _as_scores(val_scores, "val_scores").max())


def percentile(scores, q: float = 99.0) -> float:
    """The ``q``-th percentile (0..100, linear interpolation) of ``scores``, shape (W,)."""
    if not 0.0 <= q <= 100.0:
        raise ValueError(f"percentile q must be in [0, 100], got {q}")
    return float(np.percentile(_as_scores(scores), q))


def choose_threshold(method: str, val_scores, cfg) -> float:
    """Threshold of ``method`` fitted on the validation scores, with the parameters of ``cfg`` (a ScoreConfig).

    Parameters
    ----------
    method : {"beta_max", "percentile", "pot"}
    val_scores : array-like, shape (W,)
        Scores of normal validation windows.
    cfg : mscred.config.ScoreConfig
        Reads ``beta``, ``percentile``, and for POT ``pot_risk`` and ``pot_level``.
    """
    if method == "beta_max":
        return beta_max(val_scores, cfg.beta)
    if method == "percentile":
        return percentile(val_scores, cfg.percentile)
    if method == "pot":
        from mscred.pot import pot

        return pot(val_scores, risk=getattr(cfg, "pot_risk", 1e-3), level=getattr(cfg, "pot_level", 0.98))
    raise ValueError(f"unknown threshold method {method!r}; choose one of {', '.join(METHODS)}")
