"""Thresholds: beta x max, percentile, POT / SPOT (GPD by Grimshaw's method)."""
import numpy as np
import pytest

from mscred.config import ScoreConfig
from mscred.pot import fit_gpd, gpd_log_likelihood, pot, spot
from mscred.thresholds import beta_max, choose_threshold, percentile


def test_beta_max_hand_computed():
    assert beta_max([0.0, 2.0, 1.0], beta=1.5) == 3.0
    assert beta_max([4], beta=2.0) == 8.0
    # count score on clean validation data: all zero -> threshold 0
    assert beta_max(np.zeros(7)) == 0.0


def test_percentile_hand_computed():
    s = np.arange(11, dtype=float)  # 0..10
    assert percentile(s, 50) == 5.0
    assert percentile(s, 99) == pytest.approx(9.9)  # linear interpolation between 9 and 10
    assert percentile(s, 100) == 10.0


@pytest.mark.parametrize("bad", [[], [1.0, np.nan], [np.inf]])
def test_bad_scores_raise(bad):
    with pytest.raises(ValueError):
        beta_max(bad)
    with pytest.raises(ValueError):
        percentile(bad)


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        beta_max([1.0], beta=0)
    with pytest.raises(ValueError):
        percentile([1.0], q=101)
    with pytest.raises(ValueError):
        choose_threshold("nope", [1.0], ScoreConfig())


def test_choose_threshold_reads_config():
    s = np.arange(101, dtype=float)
    assert choose_threshold("beta_max", s, ScoreConfig(beta=2.0)) == 200.0
    assert choose_threshold("percentile", s, ScoreConfig(percentile=90.0)) == 90.0
    cfg = ScoreConfig(pot_risk=1e-3, pot_level=0.9)
    assert choose_threshold("pot", s, cfg) == pot(s, risk=1e-3, level=0.9)


def test_gpd_log_likelihood_hand_computed():
    y = np.array([1.0, 2.0])
    # exponential, sigma = 1: -sum(y) = -3
    assert gpd_log_likelihood(y, 0.0, 1.0) == pytest.approx(-3.0)
    # gamma = 1, sigma = 1: -(1 + 1) * (log 2 + log 3)
    assert gpd_log_likelihood(y, 1.0, 1.0) == pytest.approx(-2 * np.log(6.0))
    # gamma = -1, sigma = 1: support ends at y = 1 -> 1 + gamma*y/sigma = 0 at y = 1 -> -inf
    assert gpd_log_likelihood(y, -1.0, 1.0) == -np.inf


def test_fit_gpd_is_the_maximum_of_the_likelihood():
    rng = np.random.default_rng(0)
    gamma, sigma = 0.3, 2.0
    u = rng.random(3000)
    y = sigma / gamma * (u ** -gamma - 1.0)  # inverse-CDF sample of GPD(0.3, 2)
    fit = fit_gpd(y)
    assert fit.gamma == pytest.approx(gamma, abs=0.08)
    assert fit.sigma == pytest.approx(sigma, rel=0.1)
    # no point of a dense grid around the estimate has a higher likelihood
    best_grid = max(gpd_log_likelihood(y, g, s) for g in np.linspace(0.0, 0.6, 61) for s in np.linspace(1.5, 2.5, 51))
    assert fit.log_likelihood >= best_grid - 1e-9


def test_fit_gpd_bounded_tail():
    rng = np.random.default_rng(1)
    gamma, sigma = -0.3, 3.0  # support ends at sigma / |gamma| = 10
    y = sigma / gamma * (rng.random(3000) ** -gamma - 1.0)
    fit = fit_gpd(y)
    assert fit.gamma == pytest.approx(gamma, abs=0.05)
    assert fit.sigma == pytest.approx(sigma, rel=0.08)


def test_pot_recovers_an_exponential_quantile():
    rng = np.random.default_rng(2)
    s = rng.exponential(1.0, 200_000)
    # P(S > z) = exp(-z) = 1e-4  ->  z = 9.21
    assert pot(s, risk=1e-4, level=0.98) == pytest.approx(-np.log(1e-4), rel=0.05)


def test_pot_without_peaks_returns_the_initial_threshold():
    s = np.zeros(100)
    s[-1] = 0.0
    assert pot(s) == 0.0


def test_spot_matches_pot_without_updates_and_flags_outliers():
    rng = np.random.default_rng(3)
    init = rng.exponential(1.0, 5000)
    stream = np.array([0.1, 50.0, 0.2])  # below t, far above z_q, below t: no peak joins the model
    th, alarms = spot(init, stream, risk=1e-3, level=0.98)
    assert np.allclose(th, pot(init, risk=1e-3, level=0.98))
    assert alarms.tolist() == [False, True, False]


def test_spot_updates_with_normal_peaks():
    rng = np.random.default_rng(4)
    init = rng.exponential(1.0, 2000)
    t = np.sort(init)[int(0.98 * init.size)]
    stream = np.full(50, t + 0.5)  # peaks, never alarms: each is refitted into the tail
    th, alarms = spot(init, stream, risk=1e-3, level=0.98)
    assert not alarms.any()
    assert not np.allclose(th[0], th[-1])
