"""A self-contained HTML report of one evaluation: opens offline (inline CSS, PNGs embedded as base64, no JS).

Sections: metrics beside the random baseline; the score with its threshold; each sensor's score over time (the
``score_<sensor>`` columns of ``detect --sensor-scores``); the series of the top sensors with the
detected intervals shaded and the true events marked; residual signature matrices of the worst windows (needs the
model and the data); a root-cause bar chart per event. Written atomically into ``DIR/index.html`` (+ metrics.json).
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import html
import json
import os
import warnings
from pathlib import Path
from typing import Optional

import numpy as np

from mscred.atomic import atomic_path
from mscred.errors import InputError
from mscred.evaluation import (GroundTruth, Scores, event_causes, event_notes, flagged_causes, metric_rows,
                               read_data)
from mscred.figures import (CSS, DETECTED, TRUTH, figure_png, img_tag, is_date, row_edges, shade_intervals,
                            short_name, x_axis)
from mscred.metrics import events as runs
from mscred.metrics import rank_event_causes

REPORT_FILES = ("index.html", "metrics.json")  # all a report directory holds (figures are inlined)
ZOOM_EVENTS = 4  # events the zoomed series show, the first ones
SENSOR_ROWS = 20  # sensors the sensor-score heat map shows, those with the largest scores


def _mark(ax, truth, pred, x, lo: int = 0, hi: Optional[int] = None) -> None:
    """Detected intervals shaded over the whole height; true events as a red strip along the bottom."""
    edges = row_edges(x)
    shade_intervals(ax, runs(pred), edges, DETECTED, 0.35, "detected", lo=lo, hi=hi)
    shade_intervals(ax, truth.events, edges, TRUTH, 0.9, "true anomaly", ymax=0.06, lo=lo, hi=hi)


def _at(x: np.ndarray, i: int) -> str:
    """``x[i]`` as a title shows it: a date as written in the file's format, a number as %g."""
    import pandas as pd

    return str(pd.Timestamp(x[i])) if is_date(x) else f"{x[i]:g}"


def _threshold(scores: Scores, pred: np.ndarray, result: dict, model) -> tuple[Optional[float], str]:
    if "threshold" in result:
        return float(result["threshold"]), f"threshold ({result['threshold_method']})"
    if model is not None:
        return float(model.threshold_), "threshold (model)"
    if pred.any() and not pred.all():
        low = float(scores.score[pred == 0].max())
        return low, f"largest unflagged score {low:.4g} (threshold inferred from is_anomaly)"
    return None, ""


def score_figure(scores, truth, pred, threshold, threshold_label) -> str:
    import matplotlib.pyplot as plt

    x, xlabel = x_axis(scores)
    fig, ax = plt.subplots(figsize=(12, 3))
    ax.plot(x, scores.score, lw=0.7, color="#1d3557", label="score")
    _mark(ax, truth, pred, x)
    if threshold is not None:
        ax.axhline(threshold, color="k", ls="--", lw=1, label=threshold_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("score")
    ax.legend(loc="upper left", fontsize=8, ncol=4)
    return figure_png(fig)


def sensor_score_figure(scores: Scores, truth, pred, k: int = SENSOR_ROWS) -> tuple[str, list[str]]:
    """Each sensor's score over time (``score_<sensor>`` columns, what root_causes ranks) as a heat map of the
    ``k`` sensors with the largest ones, largest first, under a strip of the detected intervals and true events;
    blank where no window covers a row. Returns the figure and the sensors drawn."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt

    values = scores.sensor_scores
    with warnings.catch_warnings():   # (an all-NaN column: a sensor of rows no window covers, ranked last)
        warnings.simplefilter("ignore", RuntimeWarning)
        peak = np.nanmax(values, axis=0)
    order = np.argsort(-np.nan_to_num(peak, nan=-np.inf), kind="stable")[:k]
    x, xlabel = x_axis(scores)
    edges = row_edges(x)
    fig, (strip, ax) = plt.subplots(2, 1, figsize=(12, 0.8 + 0.28 * len(order)), sharex=True,
                                    gridspec_kw={"height_ratios": [1, max(len(order), 2)]})
    # (as _mark draws them, but the true events half the strip's height: _mark's 6% is a pixel in a strip)
    shade_intervals(strip, runs(pred), edges, DETECTED, 0.6, "detected")
    shade_intervals(strip, truth.events, edges, TRUTH, 0.9, "true anomaly", ymax=0.45)
    strip.set_yticks([])
    strip.set_ylabel("events", rotation=0, ha="right", fontsize=8)
    shown = np.ma.masked_invalid(values[:, order].T)
    top = float(peak[order[0]]) if np.isfinite(peak[order[0]]) else 1.0   # (order: the largest peak first)
    cmap = plt.get_cmap("magma_r").with_extremes(bad="white")
    image = ax.imshow(shown, aspect="auto", interpolation="nearest", cmap=cmap, vmin=0.0, vmax=max(top, 1e-12),
                      extent=(edges[0], edges[-1], len(order), 0))
    ax.set_yticks(np.arange(len(order)) + 0.5, [short_name(scores.scored_sensors[i]) for i in order], fontsize=8)
    if is_date(x):
        ax.xaxis_date()
    ax.set_xlim(edges[0], edges[-1])
    ax.set_xlabel(xlabel)
    fig.colorbar(image, ax=[strip, ax], fraction=0.02, pad=0.01, label="sensor score")
    if strip.get_legend_handles_labels()[0]:   # above the strip, not over its first events
        strip.legend(loc="lower left", bbox_to_anchor=(0, 1), fontsize=8, ncol=2, frameon=False)
    return figure_png(fig), [scores.scored_sensors[i] for i in order]


def top_sensors(scores: Scores, truth: GroundTruth, pred: np.ndarray, sensors: list[str], k: int) -> list[str]:
    """Sensors most often named as root causes on flagged rows, then true root causes, then column order."""
    votes: dict[str, int] = {}
    for row, flagged in zip(scores.root_causes, pred):
        if flagged:
            for name in row:
                votes[name] = votes.get(name, 0) + 1
    ranked = [n for n in sorted(votes, key=lambda n: (-votes[n], n)) if n in sensors]
    for cause in truth.causes or []:
        ranked += sorted(c for c in cause if c in sensors and c not in ranked)
    ranked += [s for s in sensors if s not in ranked]
    return ranked[:k]


def sensor_scores_section(scores: Scores, truth: GroundTruth, pred: np.ndarray) -> list[str]:
    """The page's "Sensor scores" section (this page's and ``detection_report``'s): the heat map with what it shows,
    or what writes the columns it needs."""
    parts = ['<h2 id="sec-sensor-scores">Sensor scores</h2>']
    if scores.sensor_scores is not None and scores.scored_sensors:
        b64, drawn = sensor_score_figure(scores, truth, pred)
        more = len(scores.scored_sensors) - len(drawn)
        parts.append(img_tag(b64, "sensor scores") + "<p class='meta'>Each sensor's score on every row (the "
                     "<code>score_&lt;sensor&gt;</code> columns: what the root causes are ranked by), the "
                     f"{len(drawn)} with the largest first{f', {more} more not drawn' if more else ''}; blank where "
                     "no window covers a row; negative scores (below the normal mean) show as 0.</p>")
    else:
        parts.append(_missing("Sensor scores not in the SCORES file: `mscred detect --sensor-scores` writes them."))
    return parts


def _mark_gaps(ax, x, values, gaps, j, lo: int = 0, hi: Optional[int] = None) -> None:
    """Filled values (``--missing interpolate`` or ``hold``) of sensor column ``j`` as dots over its line."""
    if gaps is None:
        return
    where = np.flatnonzero(gaps[lo:hi, j]) + lo
    if len(where):
        ax.plot(x[where], values[where, j], ls="none", marker=".", ms=3, color="#e76f51", label="filled")


def series_figure(scores, truth, pred, values, sensors, chosen, gaps=None) -> str:
    import matplotlib.pyplot as plt

    x, xlabel = x_axis(scores)
    fig, axes = plt.subplots(len(chosen), 1, figsize=(12, 1.6 * len(chosen) + 0.4), sharex=True, squeeze=False)
    for ax, name in zip(axes[:, 0], chosen):
        ax.plot(x, values[:, sensors.index(name)], lw=0.6, color="#1d3557")
        _mark_gaps(ax, x, values, gaps, sensors.index(name))
        _mark(ax, truth, pred, x)
        ax.set_ylabel(short_name(name), rotation=0, ha="right", fontsize=9)
    axes[-1, 0].set_xlabel(xlabel)
    # only with something labelled in it: all-normal labels with nothing flagged and no gap leave no labelled
    # artist, and legend() then printed matplotlib's "No artists with labels found" warning on stderr
    if axes[0, 0].get_legend_handles_labels()[0]:
        axes[0, 0].legend(loc="upper left", fontsize=8, ncol=2)
    return figure_png(fig)


def zoom_figure(scores, truth, pred, values, sensors, chosen, margin: int = 150, max_events: int = ZOOM_EVENTS,
                gaps=None) -> str:
    """The top sensors around each of the first events (true ones, else detected intervals), +- ``margin`` rows."""
    import matplotlib.dates as mdates
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    spots = list(truth.events[:max_events]) if len(truth.events) else list(runs(pred)[:max_events])
    x, _ = x_axis(scores)
    fig, axes = plt.subplots(len(chosen), len(spots), figsize=(3.2 * len(spots), 1.5 * len(chosen) + 0.6),
                             squeeze=False)
    for col, (a, b) in enumerate(spots):
        lo, hi = max(int(a) - margin, 0), min(int(b) + margin, len(x))
        for row, name in enumerate(chosen):
            ax = axes[row, col]
            ax.plot(x[lo:hi], values[lo:hi, sensors.index(name)], lw=0.8, color="#1d3557")
            _mark_gaps(ax, x, values, gaps, sensors.index(name), lo, hi)
            ax.set_xlim(x[lo], x[hi - 1])
            _mark(ax, truth, pred, x, lo, hi)
            ax.tick_params(labelsize=7)
            if is_date(x):  # MaxNLocator would put ticks at fractions of days, unreadable as dates
                locator = mdates.AutoDateLocator(minticks=2, maxticks=4)
                ax.xaxis.set_major_locator(locator)
                ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))
                ax.xaxis.get_offset_text().set_fontsize(7)
            else:
                ax.xaxis.set_major_locator(MaxNLocator(3))
            if col == 0:
                ax.set_ylabel(short_name(name), rotation=0, ha="right", fontsize=8)
            if row == 0:
                ax.set_title(f"around {_at(x, a)}..{_at(x, b - 1)}", fontsize=8)
    fig.tight_layout()
    return figure_png(fig)


def _event_votes(scores: Scores, a: int, b: int) -> tuple[list[str], dict[str, int]]:
    """The root causes written on the flagged rows of [a, b), ranked as root-cause recall ranks them (votes, then
    mean position, then name), and their votes. Flagged by the SCORES file's ``is_anomaly``, as
    ``compute_metrics`` ranks them: those are the rows detect wrote causes for; the rows of a refit ``--threshold``
    drew another ranking than the recall@3 printed above it."""
    lists = flagged_causes(scores, a, b)
    votes: dict[str, int] = {}
    for name in (n for row in lists for n in row):
        votes[name] = votes.get(name, 0) + 1
    return rank_event_causes(lists), votes


def _not_ranked(found: bool) -> str:
    """Why an event has no ranking. Found (a row flagged by the threshold in use) but without causes (a SCORES file
    without root_causes, rows only a refit threshold flags) read "not detected", beside "events found 1/1"."""
    return "detected, no root causes written on its rows" if found else "not detected"


def cause_figure(scores, truth, pred) -> tuple[str, int]:
    """One bar chart per event: votes of the flagged rows inside it, true root causes in red."""
    import matplotlib.pyplot as plt

    shown = list(range(min(len(truth.events), 12)))
    cols = min(3, len(shown))
    rows = (len(shown) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 2.6 * rows), squeeze=False)
    for ax in axes.ravel()[len(shown):]:
        ax.axis("off")
    for ax, e in zip(axes.ravel(), shown):
        a, b = truth.events[e]
        names, votes = _event_votes(scores, a, b)
        names = names[:8]
        true = truth.causes[e] if truth.causes else set()
        ax.bar(range(len(names)), [votes[n] for n in names],
               color=[TRUTH if n in true else "#457b9d" for n in names])
        ax.set_xticks(range(len(names)), [short_name(n, 20) for n in names], rotation=45, ha="right", fontsize=8)
        where = f"{scores.index[a]}..{scores.index[b - 1]}"
        found = bool(pred[a:b].any())
        title = f"event {e + 1} ({where})" + ("" if names else f": {_not_ranked(found)}")
        if true:
            title += "\ntrue: " + ", ".join(short_name(n, 20) for n in sorted(true))
        ax.set_title(title, fontsize=8)
        if not names:
            ax.set_xticks([])
            ax.set_yticks([])
            ax.text(0.5, 0.5, "its flagged rows name no sensor" if found else "no flagged row in this event",
                    ha="center", va="center", fontsize=8, color="#777", transform=ax.transAxes)
        elif e % cols == 0:
            ax.set_ylabel("flagged rows naming it", fontsize=7)
    fig.tight_layout()
    return figure_png(fig), len(truth.events) - len(shown)


def worst_residuals(model, values: np.ndarray, sensors: list[str], row_scores: np.ndarray, k: int,
                    times=None):
    """Residual signature matrices (M - recon)^2 of the k windows with the highest scores in ``row_scores``.

    Parameters
    ----------
    model : a loaded ``mscred.detector.MSCRED``
    values : float64 (T, n) the scored data; ``sensors`` its column names
    row_scores : float64 (T,) the SCORES file's per-row scores (a row takes its window's score)
    times : the rows' timestamps (a SCORES file's), or None: what the rates of counters divide by
        (``train.rate_sensors``; ``mscred.data.rate.step_seconds``)

    Returns a list of (window index, last row that takes the window's score, residual float32 (n_scales, n, n)).
    Only those k windows go through the network (the whole test set would cost minutes on a CPU); the signature
    matrices come from the estimator's own preprocessing (``_table``/``_aligned``/``_segments`` of H3's MSCRED).
    """
    import pandas as pd

    from mscred.detect import residuals

    table = model._table(pd.DataFrame(values, columns=sensors))
    if times is not None and model._settings().train.rate_sensors:   # (read as the order check reads them)
        table = dataclasses.replace(table, index=pd.Index(times))
    aligned = model._inputs(table)
    steps = model.config_.signature.steps
    window_of_row = model.window_of_row(len(values))          # (T,) window index or -1
    covered = np.flatnonzero(window_of_row >= 0)
    order = covered[np.argsort(-row_scores[covered], kind="mergesort")]
    worst: list[int] = []
    for t in order:                                           # distinct windows, highest score first
        if int(window_of_row[t]) not in worst:
            worst.append(int(window_of_row[t]))
        if len(worst) == k:
            break
    out = []
    for w in worst:
        # Window w's segments w .. w + steps - 1 from the rows they cover alone: not every segment of a long
        # series for k windows.
        window = model._segments(aligned[model._segment_rows(w, w + steps)])   # (steps, n_scales, n, n)
        recon = model._reconstruct(window)                    # (1, n_scales, n, n)
        rows = np.flatnonzero(window_of_row == w)
        out.append((w, int(rows[-1]), residuals(window[-1:], recon)[0]))
    return out


def _residual_sensors(res: np.ndarray, n_full: int = 40, top: int = 20) -> Optional[np.ndarray]:
    """The sensors a residual panel shows: None (all of them, in column order) up to ``n_full`` sensors, else the
    ``top`` sensors with the largest residual rows of this window (summed over the scales), largest first.

    200 x 200 matrices in ~180 px without ticks matched no row to a sensor; the rows of the worst sensors, with
    their names, are what a reader looks for (MSCRED's root causes are the rows with the largest residuals)."""
    n = res.shape[-1]
    if n <= n_full:
        return None
    load = res.sum(axis=(0, 2), dtype=np.float64)            # (n,) each sensor's row, all scales
    return np.argsort(-load, kind="mergesort")[:top]


def residual_figure(items, windows, sensors, index, n_full: int = 40, top: int = 20) -> str:
    import matplotlib.pyplot as plt

    from matplotlib.colors import PowerNorm

    n_scales = items[0][2].shape[0]
    fig, axes = plt.subplots(len(items), n_scales, figsize=(3.6 * n_scales, 3.3 * len(items)), squeeze=False)
    # one colour scale for all panels, so scales and windows compare; the square-root norm keeps the small
    # residuals of the long windows visible beside the large ones of w = 10
    norm = PowerNorm(0.5, vmin=0.0, vmax=max(float(r.max()) for _, _, r in items) or 1.0)
    for row, (w, last, res) in enumerate(items):
        pick = _residual_sensors(res, n_full, top)           # the same sensors in every scale of one window
        names = sensors if pick is None else [sensors[i] for i in pick]
        size = max(4.0, min(8.0, 150 / len(names)))
        for s in range(n_scales):
            ax = axes[row, s]
            im = ax.imshow(res[s] if pick is None else res[s][np.ix_(pick, pick)], cmap="magma", norm=norm)
            when = index[last] if last >= 0 else "?"
            title = f"window {w} (to {when}), w = {windows[s]}"
            if pick is not None:  # say that the panel is a part of the matrix, and which
                title += f"\ntop {len(pick)} of {len(sensors)} sensors by residual"
            ax.set_title(title, fontsize=8)
            if pick is None:
                ax.set_xticks([])
            else:  # each window has its own sensors: name the columns too, in every panel
                ax.set_xticks(range(len(names)), [short_name(n, 20) for n in names], rotation=90, fontsize=size)
            if s == 0:  # the rows are the same sensors across one window's scales
                ax.set_yticks(range(len(names)), [short_name(n, 20) for n in names], fontsize=size)
            else:
                ax.set_yticks([])
    fig.colorbar(im, ax=axes.ravel().tolist(), shrink=0.6, label="(M - recon)^2 (square-root colour scale)")
    return figure_png(fig)


def _metrics_table(result: dict) -> str:
    base = result.get("random_baseline", {})
    rows = []
    for key, label, note in metric_rows(result):
        cells = [_cell(result.get(key)), _cell(base.get(key))]
        rows.append(f"<tr><td>{html.escape(label)}</td><td>{cells[0]}</td><td>{cells[1]}</td>"
                    f'<td class="note">{html.escape(note)}</td></tr>')
    return ('<table id="metrics"><tr><th>metric</th><th>mscred</th>'
            f'<th>random (seed {base.get("seed", "-")})</th><th>note</th></tr>' + "".join(rows) + "</table>")


def _cell(v) -> str:
    return "-" if v is None else (f"{v:.3f}" if isinstance(v, float) else html.escape(str(v)))


def _event_notes(result: dict) -> str:
    """evaluate's notes on left-out and cut events, under the report's table too."""
    return "".join(f"<p class='meta'>Note: {html.escape(n)}.</p>" for n in event_notes(result))


def _events_from(truth: GroundTruth) -> str:
    """Where the events and root causes came from, when another file than the labels: the header named only the
    labels file, while an anomalies.csv beside it (or --anomalies) set every event and cause the page shows."""
    if not truth.events_source or truth.events_source == truth.source:
        return ""
    return f" (events and root causes: {html.escape(truth.events_source)})"


def _zoom_note(truth: GroundTruth, pred: np.ndarray) -> str:
    """Which events the zoom leaves out: the first ZOOM_EVENTS are drawn, and a later one -- often the one that was
    detected -- was missing from the page without a word."""
    spots = len(truth.events) if len(truth.events) else len(runs(pred))
    if spots <= ZOOM_EVENTS:
        return ""
    what = "true events" if len(truth.events) else "detected intervals"
    return f"<p class='meta'>Zoomed: the first {ZOOM_EVENTS} of {spots} {what}.</p>"


def _missing(text: str) -> str:
    return f'<p class="missing">{html.escape(text)}</p>'


def require_matplotlib(otherwise: str = ""):
    """matplotlib, or InputError naming the extra that brings it and ``otherwise`` (another way out, e.g.
    "--no-report"); commands that end in a report check first."""
    try:
        import matplotlib
    except ImportError:
        raise InputError("the report needs matplotlib: pip install 'mscred[report]'"
                         + (f" (or {otherwise})" if otherwise else "")) from None
    return matplotlib


def build_report(out_dir: str | os.PathLike, scores: Scores, truth: GroundTruth, result: dict,
                 pred: Optional[np.ndarray] = None, model_dir=None, data_path=None, n_sensors: int = 4,
                 n_worst: int = 3, missing: str = "error", data=None, encoding: Optional[str] = None) -> Path:
    """Render the report into ``out_dir/index.html`` (atomically: the directory appears whole or not at all);
    ``missing``: what a missing value of ``data_path`` gets (as at detect); ``data``: ``data_path`` already read by
    ``evaluation.read_data`` (checked against ``scores``), else it is read here, in ``encoding`` (a CSV's text
    encoding, as ``load_table``'s)."""
    with drawing():
        return _build(out_dir, scores, truth, result, pred, model_dir, data_path, n_sensors, n_worst, missing,
                      data, encoding)


@contextlib.contextmanager
def drawing():
    """Where a report's figures are drawn (this page's and ``detection_report``'s): matplotlib without a display,
    its warnings about sensor names kept off stderr, names drawn as text."""
    matplotlib = require_matplotlib()
    matplotlib.use("Agg")  # files only, no display
    with warnings.catch_warnings():
        # Sensor names in scripts the default font lacks (CJK) drew one "Glyph ... missing" warning per character
        # and figure, and then tight_layout's, all on stderr around the command's own line: the names still
        # appear in the page's text, the figures show boxes for them.
        for message in (r"Glyph \d+ .* missing from", r"Tight layout not applied"):
            warnings.filterwarnings("ignore", message=message, category=UserWarning)
        # Sensor names are text, not TeX: "$\foo$" was a ParseFatalException (exit 1, "internal error") when the
        # figure was saved, and "$\alpha$" drew as a Greek letter under another sensor's name.
        with matplotlib.rc_context({"text.parse_math": False}):
            yield


def _model_sensors(model, sensors: list[str], positional: bool, model_dir, source) -> list[str]:
    """The data's column names as the model knows them, or InputError. A ``.npy`` array names no sensor: its
    columns are the training sensors in order, as ``detect`` takes it (it was refused as "missing sensor(s)
    sensor_8; unknown sensor(s) sensor_0", the names the array was given on loading)."""
    from mscred.detector import sensor_difference

    if positional:
        if len(sensors) != len(model.sensors_):
            raise InputError(f"{source}: an array of {len(sensors)} column(s); the model {model_dir} was trained on "
                             f"{len(model.sensors_)} sensors, which an array gives in their training order")
        return list(model.sensors_)
    difference = sensor_difference(model.sensors_, sensors)
    if difference:
        raise InputError(f"{model_dir}: the model's sensors differ from those of {source} ({difference})")
    return sensors


def _build(out_dir, scores, truth, result, pred, model_dir, data_path, n_sensors, n_worst, missing, data,
           encoding=None) -> Path:
    pred = scores.is_anomaly if pred is None else np.asarray(pred, dtype=np.int8)

    values, sensors, gaps, positional = truth.values, truth.sensors, truth.gaps, False
    if data_path is not None:
        # the rows and timestamps of the scores, as the labels are held to: the row count alone let data shifted by
        # 100 steps be drawn under the scores' timestamps, and its windows' residuals shown as the worst ones
        table = data if data is not None else read_data(data_path, scores, missing, encoding)
        values, sensors, gaps, positional = table.values, table.sensors, table.gaps, table.positional
    model, model_note = None, "pass --model MODEL_DIR (and the scored data) to see them"
    if model_dir is not None:
        from mscred.detector import MSCRED

        model = MSCRED.load(model_dir, device="cpu")
        if values is not None:   # before any figure: a refusal costs nothing (it came after three of them)
            sensors = _model_sensors(model, sensors, positional, model_dir, data_path or truth.source)

    threshold, threshold_label = _threshold(scores, pred, result, model)
    parts = [f"<h1>mscred evaluation report</h1><p class='meta'>scores: {html.escape(scores.source)} &middot; "
             f"ground truth: {html.escape(truth.source)}{_events_from(truth)} &middot; {result['n_rows']} rows, "
             f"{result['n_anomalous_rows']} anomalous, {result['n_flagged_rows']} flagged &middot; VUS sliding "
             f"window {result['vus_sliding_window']} &middot; {_dt.datetime.now():%Y-%m-%d %H:%M}</p>",
             '<h2 id="sec-metrics">Metrics</h2>', _metrics_table(result), _event_notes(result),
             "<p class='meta'>Point-adjusted F1 and best F1 are shown only beside the unadjusted figures: the first "
             "credits a whole event for one hit, the second picks its threshold with the labels.</p>",
             '<h2 id="sec-score">Score and threshold</h2>',
             img_tag(score_figure(scores, truth, pred, threshold, threshold_label), "score")]

    parts += sensor_scores_section(scores, truth, pred)

    parts.append('<h2 id="sec-series">Top sensors</h2>')
    if values is not None and sensors:
        chosen = top_sensors(scores, truth, pred, sensors, n_sensors)
        if gaps is not None:
            parts.append(f"<p class='meta'>{int(gaps.sum())} sensor values were missing and filled "
                         f"(--missing interpolate or hold), in {int(gaps.any(axis=0).sum())} sensor(s); they are drawn "
                         f"as dots.</p>")
        parts.append(img_tag(series_figure(scores, truth, pred, values, sensors, chosen, gaps), "series"))
        if len(truth.events) or pred.any():
            parts.append(img_tag(zoom_figure(scores, truth, pred, values, sensors, chosen, gaps=gaps), "series zoomed")
                         + _zoom_note(truth, pred))
    else:
        parts.append(_missing("Sensor series not available: the labels file has no sensor columns; pass --data."))

    parts.append('<h2 id="sec-residuals">Residual signature matrices of the worst windows</h2>')
    if model is not None and values is not None:
        items = worst_residuals(model, values, sensors, scores.score, n_worst,
                                times=scores.index if scores.has_timestamp else None)
        # the residuals are in the model's sensor order (``_aligned``), not the data's column order
        parts.append(img_tag(residual_figure(items, model.config_.signature.windows, model.sensors_, scores.index),
                          "residuals"))
    else:
        reason = model_note if model is None else "the scored data is needed (pass --data)"
        parts.append(_missing(f"Residual matrices not available: {reason}."))

    parts.append('<h2 id="sec-causes">Root causes per event</h2>')
    if len(truth.events):
        b64, hidden = cause_figure(scores, truth, pred)
        parts.append(img_tag(b64, "root causes"))
        ranked = event_causes(scores, truth.events)   # the rankings root-cause recall scored (_event_votes)
        items = "".join(f"<li>event {i + 1}: "
                        f"{html.escape(', '.join(r[:3]) or _not_ranked(bool(pred[a:b].any())))}</li>"
                        for i, (r, (a, b)) in enumerate(zip(ranked, truth.events)))
        parts.append(f"<ul>{items}</ul>" + (f"<p class='meta'>{hidden} more events not drawn.</p>" if hidden else ""))
    else:
        parts.append(_missing("No ground-truth events."))

    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mscred report</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    out_dir = Path(out_dir)
    with atomic_path(out_dir, owned=REPORT_FILES, what="an mscred report") as tmp:
        tmp.mkdir()
        (tmp / "index.html").write_text(page, encoding="utf-8")
        (tmp / "metrics.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return out_dir
