"""The report's figures, inspected as matplotlib figures (``figure_png`` captured) rather than as PNG bytes."""
import warnings

import numpy as np
import pandas as pd
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="the report needs matplotlib (extra 'report')")
matplotlib.use("Agg")

from mscred import report  # noqa: E402
from mscred.evaluation import compute_metrics, read_ground_truth, read_scores  # noqa: E402


@pytest.fixture
def figures(monkeypatch):
    """Every figure the report draws, kept open (``figure_png`` would close it) and closed after the test."""
    import matplotlib.pyplot as plt

    drawn = []
    monkeypatch.setattr(report, "figure_png", lambda fig: drawn.append(fig) or "")
    yield drawn
    for fig in drawn:
        plt.close(fig)


def _write(tmp_path, timestamps, labels, flags, n=3):
    T = len(timestamps)
    rng = np.random.default_rng(0)
    sensors = [f"s{i}" for i in range(n)]
    data = pd.DataFrame(rng.standard_normal((T, n)), columns=sensors)
    data.insert(0, "timestamp", timestamps)
    data["label"] = labels
    data.to_csv(tmp_path / "test.csv", index=False)
    pd.DataFrame({"timestamp": timestamps, "score": rng.random(T) + labels, "is_anomaly": flags,
                  "root_causes": ["s0;s1" if f else "" for f in flags]}).to_csv(tmp_path / "scores.csv", index=False)
    scores = read_scores(tmp_path / "scores.csv")
    truth = read_ground_truth(tmp_path / "test.csv", scores)
    return scores, truth


def _build(tmp_path, timestamps, labels=None, flags=None):
    T = len(timestamps)
    labels = np.zeros(T, int) if labels is None else labels
    flags = labels.copy() if flags is None else flags
    scores, truth = _write(tmp_path, timestamps, labels, flags)
    report.build_report(tmp_path / "report", scores, truth, compute_metrics(scores, truth))


def _event_labels(T=400):
    labels = np.zeros(T, int)
    labels[100:130] = 1
    return labels


def test_date_timestamps_are_plotted_as_dates(tmp_path, figures):
    """'2024-01-01 00:00:00'-style timestamps: the x axes were row numbers 0..T under a "timestamp" label and the
    zoom titles said "around 100..129"; now matplotlib plots the dates and the titles name them."""
    stamps = pd.date_range("2024-01-01", periods=400, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    _build(tmp_path, stamps, _event_labels())
    score, series, zoom = figures[:3]
    for fig in (score, series, zoom):
        x = fig.axes[0].lines[0].get_xdata()
        assert np.issubdtype(np.asarray(x).dtype, np.datetime64), fig
    assert score.axes[0].get_xlabel() == "timestamp"
    lo, hi = score.axes[0].get_xlim()  # matplotlib date numbers (days since 1970), not 0..400
    assert str(matplotlib.dates.num2date((lo + hi) / 2).date()) == "2024-01-01" and hi - lo < 1
    assert zoom.axes[0].get_title() == "around 2024-01-01 01:40:00..2024-01-01 02:09:00"


def test_numeric_timestamps_stay_numbers(tmp_path, figures):
    _build(tmp_path, np.arange(1000, 1400), _event_labels())
    score, _, zoom = figures[:3]
    assert score.axes[0].lines[0].get_xdata()[0] == 1000.0 and score.axes[0].get_xlabel() == "timestamp"
    assert zoom.axes[0].get_title() == "around 1100..1129"


def test_timestamps_that_are_no_dates_are_labelled_rows(tmp_path, figures):
    """Text that neither is a number nor parses as a date falls back to row numbers, and the axis says "row"."""
    _build(tmp_path, [f"t{i}x" for i in range(400)], _event_labels())
    score, _, zoom = figures[:3]
    assert score.axes[0].get_xlabel() == "row" and score.axes[0].lines[0].get_xdata()[0] == 0.0
    assert zoom.axes[0].get_title() == "around 100..129"


def test_all_normal_nothing_flagged_warns_nothing(tmp_path):
    """No event and no flag leave the series figure with no labelled artist: its legend() call printed
    matplotlib's "No artists with labels found to put in legend" UserWarning on stderr."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _build(tmp_path, np.arange(300))
    assert (tmp_path / "report" / "index.html").exists()


def test_series_legend_still_drawn_with_events(tmp_path, figures):
    _build(tmp_path, np.arange(400), _event_labels())
    assert figures[1].axes[0].get_legend() is not None


def _items(n, hot, n_scales=3, seed=0):
    rng = np.random.default_rng(seed)
    res = rng.random((n_scales, n, n)).astype(np.float32) * 0.1
    res[:, hot, :] += 5.0
    return [(7, 42, res)]


def test_residuals_of_many_sensors_show_the_top_rows_by_name(figures):
    """200 sensors: the 200 x 200 matrix in ~180 px without ticks matched no row to a sensor; the panels now
    show the top 20 sensors' rows/columns (largest residual rows of the window) with their names, and say so."""
    sensors = [f"sensor_{i:03d}" for i in range(200)]
    hot = [150, 3, 77]
    report.residual_figure(_items(200, hot), [10, 30, 60], sensors, np.arange(100))
    fig = figures[0]
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 3
    first = panels[0]
    assert first.images[0].get_array().shape == (20, 20)
    names = [t.get_text() for t in first.get_yticklabels()]
    assert len(names) == 20 and set(names[:3]) == {f"sensor_{i:03d}" for i in hot}
    assert [t.get_text() for t in first.get_xticklabels()] == names
    assert "top 20 of 200 sensors" in first.get_title()


def test_residuals_of_few_sensors_stay_whole(figures):
    sensors = [f"s{i}" for i in range(12)]
    report.residual_figure(_items(12, [4]), [10, 30, 60], sensors, np.arange(100))
    first = [ax for ax in figures[0].axes if ax.images][0]
    assert first.images[0].get_array().shape == (12, 12)
    assert [t.get_text() for t in first.get_yticklabels()] == sensors
    assert "top" not in first.get_title()
