"""An offline HTML page of a fleet's scoring (``mscred fleet-detect --report``): which entities alarmed, the fleet's
alarm list, and the score over time of the entities with the most anomalous rows. Inline CSS and PNGs, no JS, as
``report.py``'s page (the helpers of ``figures.py``); written inside fleet-detect's output folder, with it."""
from __future__ import annotations

import datetime as _dt
import html
from pathlib import Path

import numpy as np
import pandas as pd

from mscred.evaluation import Scores
from mscred.metrics import events as runs
from mscred.figures import (CSS, DETECTED, figure_png, html_table, img_tag, row_edges, shade_intervals,
                            short_name, x_axis)

PLOTTED = 12   # entities whose score is drawn: those with the most anomalous rows
LISTED = 200   # alarms listed: those with the largest peak scores


class MostAnomalous:
    """The ``PLOTTED`` scored entities with the most anomalous rows, their score columns kept (the others' frames
    are let go as the fleet is scored: a fleet of thousands would not fit otherwise)."""

    def __init__(self, keep: int = PLOTTED):
        self.keep, self.frames = keep, {}

    def offer(self, name: str, frame: pd.DataFrame, threshold: float) -> None:
        flagged = int(frame["is_anomaly"].sum())
        if not flagged:
            return
        self.frames[name] = (flagged, frame.iloc[:, :3].copy(), threshold)   # index, score, is_anomaly
        if len(self.frames) > self.keep:
            del self.frames[max(self.frames, key=self._rank)]   # the one ranked last

    def _rank(self, name: str) -> tuple[int, str]:
        return -self.frames[name][0], name

    def ranked(self) -> list[tuple[str, pd.DataFrame, float]]:
        names = sorted(self.frames, key=self._rank)
        return [(name, self.frames[name][1], self.frames[name][2]) for name in names]


def score_figure(plots: list[tuple[str, pd.DataFrame, float]]) -> str:
    """One panel per entity: its score over time, its threshold dashed, its flagged runs shaded."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(plots), 1, figsize=(12, 1.5 * len(plots) + 0.5), squeeze=False)
    for ax, (name, frame, threshold) in zip(axes[:, 0], plots):
        scores = Scores(index=frame.iloc[:, 0].to_numpy(), score=frame["score"].to_numpy(dtype=np.float64),
                        is_anomaly=frame["is_anomaly"].to_numpy(dtype=np.int8), root_causes=[],
                        has_timestamp=frame.columns[0] == "timestamp", source=name)
        x, xlabel = x_axis(scores)
        ax.plot(x, scores.score, lw=0.6, color="#1d3557")
        ax.axhline(threshold, color="k", ls="--", lw=0.8)
        shade_intervals(ax, runs(scores.is_anomaly), row_edges(x), DETECTED, 0.35)
        ax.set_ylabel(short_name(name), rotation=0, ha="right", fontsize=9)
        ax.set_xlabel(xlabel, fontsize=8)
        ax.tick_params(labelsize=7)
    fig.tight_layout()
    return figure_png(fig)


def write_fleet_report(path: Path, summary: pd.DataFrame, alarms: pd.DataFrame, plots: MostAnomalous,
                       source: str, pages: dict[str, str] | None = None) -> None:
    """The page at ``path`` (the caller writes it atomically, with the folder it is in); ``pages``: entity -> the
    path of its detection page relative to ``path``'s folder (``fleet-detect --entity-reports``), linked."""
    order = summary.assign(_flagged=summary["anomalous"].fillna(-1)).sort_values(
        ["_flagged", "entity"], ascending=[False, True]).drop(columns="_flagged")
    listed = alarms.sort_values("peak_score", ascending=False).head(LISTED)
    scored = int((summary["status"] == "ok").sum())
    alarming = int((summary["anomalous"].fillna(0) > 0).sum())
    parts = [f"<h1>mscred fleet scores</h1><p class='meta'>{html.escape(source)} &middot; {len(summary)} entities, "
             f"{scored} scored, {alarming} with anomalous rows, {len(alarms)} alarms &middot; "
             f"{_dt.datetime.now():%Y-%m-%d %H:%M}</p>",
             '<h2 id="sec-entities">Entities</h2>', html_table(order, "entities"),
             '<h2 id="sec-alarms">Alarms</h2>']
    if len(listed):
        more = len(alarms) - len(listed)
        parts.append(html_table(listed, "alarms") + (f"<p class='meta'>{more} more, of lower peaks, in events.csv.</p>"
                                                 if more else ""))
    else:
        parts.append("<p class='meta'>No anomalous row in any entity.</p>")
    if pages:
        links = "".join(f'<li><a href="{html.escape(href)}">{html.escape(name)}</a></li>'
                        for name, href in sorted(pages.items()))
        parts += ['<h2 id="sec-pages">Entity pages</h2>',
                  f"<p class='meta'>The detection page of each entity with an alarm ({len(pages)}): its alarms, score, "
                  f"sensor scores, top sensors and worst windows.</p><ul>{links}</ul>"]
    ranked = plots.ranked()
    if ranked:
        parts += ['<h2 id="sec-scores">Scores of the entities with the most anomalous rows</h2>',
                  img_tag(score_figure(ranked), "scores")]
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>mscred fleet scores</title>"
            f"<style>{CSS}</style></head><body>{''.join(parts)}</body></html>")
    path.write_text(page, encoding="utf-8")
