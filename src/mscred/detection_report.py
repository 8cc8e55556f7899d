"""The HTML page of a detect run (``mscred detect ... --report DIR``): what was found in data that has no ground
truth -- the alarms with their root causes, the score against the threshold, each sensor's score as a heat map, the
top sensors' series around the alarms and the residual signature matrices of the worst windows.

``evaluate --report`` draws the same figures beside ground truth and its metrics; here there is none, so the page
shows the detections alone (the figures of ``report.py`` with no true events). Inline CSS and PNGs, no JS; written
atomically, as the evaluation report is.
"""
from __future__ import annotations

import datetime as _dt
import html
import json
import os
from pathlib import Path

import numpy as np
import pandas as pd

from mscred.atomic import atomic_path
from mscred.detect import SENSOR_SCORE_PREFIX, sensor_score_columns
from mscred.evaluation import GroundTruth, Scores, split_names
from mscred.events import events_table
from mscred.figures import CSS, html_table, img_tag
from mscred.metrics import events as runs

DETECTION_REPORT_FILES = ("index.html", "events.csv", "summary.json")   # all its folder holds
LISTED = 200   # alarms listed in the page's table (the largest peaks; events.csv holds every one)


def scores_of_frame(frame: pd.DataFrame, source: str) -> Scores:
    """``Scores`` of ``MSCRED.detect``'s frame as it is, before any file: its first column the timestamp (or row
    number), and the score_<sensor> columns when it has them."""
    columns = sensor_score_columns(frame)
    per_sensor = frame[columns].to_numpy(dtype=np.float64) if columns else None
    return Scores(index=frame.iloc[:, 0].to_numpy(), score=frame["score"].to_numpy(dtype=np.float64),
                  is_anomaly=frame["is_anomaly"].to_numpy().astype(np.int8),
                  root_causes=[split_names(c) for c in frame["root_causes"]],
                  has_timestamp=frame.columns[0] == "timestamp", source=source, sensor_scores=per_sensor,
                  scored_sensors=[str(c)[len(SENSOR_SCORE_PREFIX):] for c in columns])


def build_detection_report(out_dir: str | os.PathLike, frame: pd.DataFrame, values: np.ndarray, sensors: list[str],
                           gaps, model, model_dir: str, data_label: str, scored: int, n_sensors: int = 4,
                           n_worst: int = 3) -> Path:
    """Render the page into ``out_dir/index.html``, the alarms into ``events.csv`` and the run's counts into
    ``summary.json`` (atomically: the folder appears whole or not at all). ``frame``: the detect frame (with the
    score_<sensor> columns for the heat map); ``values`` (T, n) the scored data, row for row, ``sensors`` its
    columns, ``gaps`` its interpolated cells or None; ``model`` the loaded MSCRED that scored it; ``scored``: how
    many rows a window covered (with a context, DATA's first rows too)."""
    from mscred.report import drawing

    with drawing():
        page, alarms, summary = _page(frame, values, sensors, gaps, model, model_dir, data_label, scored,
                                      n_sensors, n_worst)
    out_dir = Path(out_dir)
    with atomic_path(out_dir, owned=DETECTION_REPORT_FILES, what="an mscred detection report") as tmp:
        tmp.mkdir()
        (tmp / "index.html").write_text(page, encoding="utf-8")
        alarms.to_csv(tmp / "events.csv", index=False)
        (tmp / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    return out_dir


def feed_report(out_dir: str | os.PathLike, frame: pd.DataFrame, tables: list, model, model_dir, data_label: str,
                scored: int) -> Path:
    """``build_detection_report`` of a feed (``mscred.feed.score_feed``'s tables, scored as ``frame``): their values
    one after the other, their interpolated cells, their sensors -- a .npy array's named as the model's, in
    training order, as detect takes its columns."""
    values = np.concatenate([table.values for table in tables])
    gaps = (np.concatenate([table.gaps if table.gaps is not None else np.zeros(table.values.shape, dtype=bool)
                            for table in tables]) if any(table.gaps is not None for table in tables) else None)
    sensors = list(model.sensors_) if tables[0].positional else list(tables[0].sensors)
    return build_detection_report(out_dir, frame, values, sensors, gaps, model, str(model_dir), data_label, scored)


def _page(frame, values, sensors, gaps, model, model_dir, data_label, scored, n_sensors, n_worst):
    from mscred.report import (_missing, _zoom_note, residual_figure, score_figure, sensor_scores_section,
                               series_figure, top_sensors, worst_residuals, zoom_figure)

    scores = scores_of_frame(frame, data_label)
    pred = scores.is_anomaly
    # No ground truth: no true events, so the figures shade the detections alone.
    none = GroundTruth(labels=np.zeros(len(pred), dtype=np.int8), events=np.zeros((0, 2), dtype=np.int64),
                       causes=None, values=values, sensors=sensors, source=data_label, gaps=gaps)
    alarms = events_table(frame, top_k=model.config_.score.top_k)
    threshold = float(model.threshold_)
    summary = {"rows": len(frame), "scored": scored, "anomalous": int(pred.sum()),
               "alarms": len(alarms), "threshold": threshold, "model": str(model_dir), "data": data_label}
    listed = alarms.nlargest(LISTED, "peak_score").sort_index() if len(alarms) > LISTED else alarms
    parts = [f"<h1>mscred detection report</h1><p class='meta'>model: {html.escape(str(model_dir))} &middot; data: "
             f"{html.escape(data_label)} &middot; {len(frame)} rows, {summary['scored']} scored, "
             f"{summary['anomalous']} anomalous in {len(alarms)} alarm(s) &middot; threshold {threshold:.4g} "
             f"&middot; {_dt.datetime.now():%Y-%m-%d %H:%M}</p>",
             '<h2 id="sec-alarms">Alarms</h2>']
    if len(alarms):
        more = (f"<p class='meta'>The {LISTED} with the largest peaks of {len(alarms)}; events.csv beside this page "
                "holds every one.</p>" if len(alarms) > LISTED else "")
        parts.append(html_table(listed, "alarms") + more + "<p class='meta'>One row per run of anomalous rows: its "
                     "first and last row, its largest score and where, its root causes ranked by the votes of its "
                     "rows, the window lengths that flagged it (10 alone: short; all: long).</p>")
    else:
        parts.append("<p>No row scored above the threshold.</p>")
    parts += ['<h2 id="sec-score">Score and threshold</h2>',
              img_tag(score_figure(scores, none, pred, threshold, "threshold (model)"), "score")]
    parts += sensor_scores_section(scores, none, pred)   # (detect computes the columns for the page)
    parts.append('<h2 id="sec-series">Top sensors</h2>')
    chosen = top_sensors(scores, none, pred, sensors, n_sensors)
    parts.append(img_tag(series_figure(scores, none, pred, values, sensors, chosen, gaps), "series"))
    if pred.any():
        parts.append(img_tag(zoom_figure(scores, none, pred, values, sensors, chosen, gaps=gaps), "series zoomed")
                     + _zoom_note(none, pred))
    parts.append('<h2 id="sec-residuals">Residual signature matrices of the worst windows</h2>')
    if (model.window_of_row(len(values)) >= 0).any():   # (DATA's own windows: a context's rows are not here)
        items = worst_residuals(model, values, sensors, scores.score, n_worst,
                                times=scores.index if scores.has_timestamp else None)
        parts.append(img_tag(residual_figure(items, model.config_.signature.windows, model.sensors_, scores.index),
                             "residuals"))
    else:
        parts.append(_missing("No window covers any row: too few rows for one window."))
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mscred detection report</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    return page, alarms, summary
