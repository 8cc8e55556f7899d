"""What every HTML page of the package draws with: the page's style, figures embedded as base64 PNGs, the x axis
of a score table (numbers, dates or row numbers), flagged intervals shaded as one collection, and sensor names cut
to what a label holds. Shared by the evaluation report (``report.py``) and the fleet's page (``fleet_report.py``)."""
from __future__ import annotations

import base64
import html
import io
import warnings
from typing import Optional

import numpy as np
import pandas as pd

from mscred.evaluation import Scores

CSS = """
body{font-family:-apple-system,Segoe UI,Helvetica,Arial,sans-serif;color:#222;
     margin:24px auto;padding:0 16px;max-width:1150px}
h1{font-size:22px;margin-bottom:4px} h2{font-size:17px;border-bottom:1px solid #ddd;padding-bottom:4px;margin-top:28px}
table{border-collapse:collapse;font-size:14px} td,th{border:1px solid #ddd;padding:4px 10px;text-align:right}
td:first-child,th:first-child,th:last-child,td.note{text-align:left} td.note{color:#777} .meta{color:#666;font-size:13px}
img{max-width:100%;border:1px solid #eee} .missing{background:#fff6e0;border:1px solid #f0d890;padding:8px 12px}
"""
DETECTED = "#ff9f1c"
TRUTH = "#d62828"


def html_table(frame: pd.DataFrame, table_id: str) -> str:
    """A DataFrame as an HTML table (cells escaped; floats to 4 significant digits, missing values as -)."""
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in frame.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(table_cell(v))}</td>" for v in row) + "</tr>"
                   for row in frame.itertuples(index=False))
    return f'<table id="{table_id}"><tr>{head}</tr>{body}</table>'


def table_cell(value) -> str:
    if value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA:
        return "-"
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def figure_png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def img_tag(b64: str, alt: str) -> str:
    return f'<img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'


def row_edges(x: np.ndarray) -> np.ndarray:
    """Row ``i``'s left edge in matplotlib's numbers (dates: days), plus one step past the last row, so that an
    interval [a, b) spans edges[a]..edges[b]: one that ended on the last row ran to x[-1] and a one-row flag
    there had no width at all."""
    import matplotlib.dates as mdates

    xs = mdates.date2num(x) if is_date(x) else np.asarray(x, dtype=np.float64)
    step = xs[-1] - xs[-2] if len(xs) > 1 else 1.0
    return np.append(xs, xs[-1] + step)


def shade_intervals(ax, intervals, edges, color, alpha, label=None, ymax=1.0, lo: int = 0, hi: Optional[int] = None) -> None:
    """The intervals overlapping rows lo..hi as ONE collection of boxes: an axvspan each cost ~1.4 ms to add and
    to draw, and 100,000 rows with ~1,000 flagged runs spent 30 s of a 31 s report there (each zoom panel drew
    every run of the whole series)."""
    from matplotlib.collections import PolyCollection

    hi = len(edges) - 1 if hi is None else hi
    shown = np.array([(a, b) for a, b in intervals if b > lo and a < hi], dtype=np.int64).reshape(-1, 2)
    if not len(shown):
        return
    left, right = edges[shown[:, 0]], edges[shown[:, 1]]
    boxes = np.stack([np.stack([left, np.zeros_like(left)], 1), np.stack([left, np.full_like(left, ymax)], 1),
                      np.stack([right, np.full_like(left, ymax)], 1), np.stack([right, np.zeros_like(left)], 1)], 1)
    ax.add_collection(PolyCollection(boxes, transform=ax.get_xaxis_transform(), facecolor=color, alpha=alpha,
                                     linewidth=0, label=label), autolim=False)


def short_name(name: str, most: int = 32) -> str:
    """A sensor name as a figure shows it: at most ``most`` characters, head and tail kept (names of one plant
    often differ only at the end). A 300-character name as a y label squeezed the plots into a sliver of the
    image (bbox_inches="tight" keeps the whole label); the page's text keeps the full names."""
    return name if len(name) <= most else name[:most // 2 - 1] + "\u2026" + name[-(most - most // 2):]


def x_axis(scores: Scores) -> tuple[np.ndarray, str]:
    """The x values of the figures and their axis label: numeric timestamps (or row numbers) as floats, date
    timestamps as datetime64 (matplotlib then draws dates; they were drawn as row numbers under a "timestamp"
    label), anything else as row numbers labelled "row"."""
    rows = np.arange(len(scores.score), dtype=np.float64)
    label = "timestamp" if scores.has_timestamp else "row"
    try:
        return np.asarray(scores.index, dtype=np.float64), label
    except (TypeError, ValueError):
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas' "Could not infer format" for text that is no date
            import pandas as pd

            when = pd.DatetimeIndex(pd.to_datetime(pd.Series(scores.index, dtype=object)))
    except (TypeError, ValueError, OverflowError):
        return rows, "row"
    if when.hasnans:
        return rows, "row"
    if when.tz is not None:  # datetime64 holds no zone: one instant scale for mixed offsets
        when, label = when.tz_convert(None), "timestamp (UTC)"
    return when.to_numpy(dtype="datetime64[ns]"), label


def is_date(x: np.ndarray) -> bool:
    return np.issubdtype(x.dtype, np.datetime64)
