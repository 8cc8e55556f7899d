"""Peaks-Over-Threshold thresholds from extreme value theory (Siffer et al., KDD 2017), NumPy only.

POT: take the scores above an initial high quantile t (``level``, e.g. 0.98), fit a Generalised Pareto
Distribution (GPD) to the excesses Y = s - t by maximum likelihood with Grimshaw's trick, and return the score
z_q exceeded with probability ``risk``:

    z_q = t + sigma/gamma * ((risk * n / N_t) ** -gamma - 1)     (gamma != 0)
    z_q = t - sigma * log(risk * n / N_t)                       (gamma == 0)

where n is the number of scores and N_t the number of peaks. SPOT is the streaming version: every new score that
is a peak but not an alarm joins the peaks and the GPD is refitted (Siffer's Algorithm 1; OmniAnomaly's
``pot_eval`` uses the same code with a fixed initial set).

Grimshaw's method: with x = gamma/sigma, the MLE satisfies u(x) v(x) = 1 where u(x) = 1 + mean(log(1 + x Y))
and v(x) = mean(1 / (1 + x Y)); then gamma = u(x) - 1, sigma = gamma / x. The roots lie in (-1/max(Y), 0) and
in (0, 2 (mean - min) / min^2) (Grimshaw 1993). The reference code (Siffer's spot.py) finds them with scipy's
L-BFGS-B on the squared equation over narrower intervals; we scan dense grids for sign changes and bisect, which
finds every root the grids separate, and keep the candidate of highest likelihood (the exponential gamma = 0 is
always a candidate).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class GPDFit:
    gamma: float  # shape (xi); > 0 heavy tail, 0 exponential, < 0 bounded tail
    sigma: float  # scale, > 0
    log_likelihood: float


def gpd_log_likelihood(y: np.ndarray, gamma: float, sigma: float) -> float:
    """Log-likelihood of the excesses ``y`` (shape (N,), all >= 0) under GPD(gamma, sigma); -inf outside support."""
    y = np.asarray(y, dtype=np.float64)
    if sigma <= 0:
        return -np.inf
    if abs(gamma) < 1e-12:
        return float(-y.size * np.log(sigma) - y.sum() / sigma)
    z = 1.0 + gamma * y / sigma
    if np.any(z <= 0):
        return -np.inf
    return float(-y.size * np.log(sigma) - (1.0 + 1.0 / gamma) * np.log(z).sum())


def _roots(f, grid: np.ndarray) -> list[float]:
    """Every root of ``f`` that the sorted ``grid`` brackets by a sign change, refined by 60 bisections."""
    values = np.array([f(x) for x in grid])
    roots = []
    for i in np.flatnonzero(np.sign(values[:-1]) * np.sign(values[1:]) < 0):
        a, b, fa = grid[i], grid[i + 1], values[i]
        for _ in range(60):
            mid = 0.5 * (a + b)
            fm = f(mid)
            if np.sign(fm) == np.sign(fa):
                a, fa = mid, fm
            else:
                b = mid
        roots.append(0.5 * (a + b))
    return roots


def fit_gpd(excesses, n_grid: int = 200) -> GPDFit:
    """Maximum-likelihood GPD fit of ``excesses`` (shape (N,), > 0) by Grimshaw's method.

    Returns the candidate of highest log-likelihood among the exponential fit (gamma = 0, sigma = mean) and every
    root of Grimshaw's equation.
    """
    y = np.asarray(excesses, dtype=np.float64).reshape(-1)
    if y.size == 0 or np.any(y <= 0) or not np.all(np.isfinite(y)):
        raise ValueError("GPD fit needs at least one positive, finite excess")
    y_min, y_max, y_mean = y.min(), y.max(), y.mean()
    best = GPDFit(0.0, float(y_mean), gpd_log_likelihood(y, 0.0, y_mean))
    if y_max - y_min <= 1e-12 * y_max:
        return best  # all excesses equal: the equation is degenerate, the exponential is the MLE family member

    def w(x: float) -> float:
        s = 1.0 + x * y
        return (1.0 + np.log(s).mean()) * np.mean(1.0 / s) - 1.0

    # Grimshaw's equation always has the trivial root x = 0; the others lie in (-1/max, 0) and (0, x_U) with
    # x_U = 2 (mean - min) / min^2. Siffer's code searches (2 (mean - min) / (mean min), x_U) on the right, which
    # misses roots like x = 0.16 of a GPD(0.3, 2) sample, so we scan all of (0, x_U): geometric steps resolve roots
    # near 0, linear steps the ones near -1/max.
    lo = 1e-8 / y_max
    left = -np.unique(np.concatenate([np.geomspace(lo, 1.0 / y_max, n_grid), np.linspace(lo, 1.0 / y_max, n_grid)]))
    left = np.sort(left[left > -1.0 / y_max])
    right = np.geomspace(lo, max(2 * (y_mean - y_min) / y_min**2, 10 * lo), n_grid)
    left, right = _roots(w, left), _roots(w, right)
    for x in left + right:
        if x == 0:
            continue
        gamma = float(np.log1p(x * y).mean())
        sigma = gamma / x
        ll = gpd_log_likelihood(y, gamma, sigma)
        if ll > best.log_likelihood:
            best = GPDFit(gamma, float(sigma), ll)
    return best


def _quantile(t: float, fit: GPDFit, risk: float, n: int, n_peaks: int) -> float:
    r = risk * n / n_peaks
    if abs(fit.gamma) < 1e-12:
        return float(t - fit.sigma * np.log(r))
    return float(t + fit.sigma / fit.gamma * (r ** (-fit.gamma) - 1.0))


def _initial(scores: np.ndarray, level: float) -> tuple[float, np.ndarray]:
    if not 0.0 < level < 1.0:
        raise ValueError(f"POT level must be in (0, 1), got {level}")
    # Siffer's initial threshold: the order statistic at rank floor(level * n).
    t = float(np.sort(scores)[int(level * scores.size)])
    return t, scores[scores > t] - t


def pot(scores, risk: float = 1e-3, level: float = 0.98) -> float:
    """Static POT threshold of ``scores`` (shape (N,), higher = more anomalous).

    Parameters
    ----------
    scores : array-like, shape (N,)
        Calibration scores (normal validation windows).
    risk : float
        Probability q that a normal score exceeds the threshold (Siffer's q; 1e-3 .. 1e-5 typical).
    level : float
        Quantile of the initial threshold t (0.98 in Siffer's experiments).

    Notes
    -----
    With no score above t (e.g. a count score that is 0 on almost all validation windows) there is no tail to
    fit; the threshold is then t itself, the largest validation score — the only honest value left.
    """
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    if s.size < 2 or not np.all(np.isfinite(s)):
        raise ValueError("POT needs at least 2 finite scores")
    if not 0.0 < risk < 1.0:
        raise ValueError(f"POT risk must be in (0, 1), got {risk}")
    t, peaks = _initial(s, level)
    if peaks.size == 0:
        return t
    return _quantile(t, fit_gpd(peaks), risk, s.size, peaks.size)


def spot(init_scores, stream, risk: float = 1e-3, level: float = 0.98) -> tuple[np.ndarray, np.ndarray]:
    """Streaming POT (SPOT, Siffer's Algorithm 1) over ``stream`` after calibrating on ``init_scores``.

    Parameters
    ----------
    init_scores : array-like, shape (N,)
        Calibration scores.
    stream : array-like, shape (M,)
        Scores to threshold in order.

    Returns
    -------
    thresholds : float64 (M,)
        The threshold in force when each stream score arrived.
    alarms : bool (M,)
        ``stream > thresholds``. Alarms do not update the model; normal peaks (above t, below z_q) do.
    """
    s = np.asarray(init_scores, dtype=np.float64).reshape(-1)
    x = np.asarray(stream, dtype=np.float64).reshape(-1)
    if s.size < 2 or not (np.all(np.isfinite(s)) and np.all(np.isfinite(x))):
        raise ValueError("SPOT needs at least 2 finite calibration scores and a finite stream")
    t, peaks = _initial(s, level)
    peaks = list(peaks)
    n = s.size
    z = _quantile(t, fit_gpd(peaks), risk, n, len(peaks)) if peaks else t
    thresholds = np.empty(x.size)
    alarms = np.zeros(x.size, dtype=bool)
    for i, value in enumerate(x):
        thresholds[i] = z
        if value > z:
            alarms[i] = True
            continue
        n += 1
        if value > t:
            peaks.append(value - t)
            z = _quantile(t, fit_gpd(peaks), risk, n, len(peaks))
    return thresholds, alarms
