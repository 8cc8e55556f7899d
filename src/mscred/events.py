"""Detected anomalies as events: one row per run of flagged rows of a SCORES table (``MSCRED.events``, ``mscred
detect --events``), the alarm list an operator reads instead of one row per timestamp."""
from __future__ import annotations

import numpy as np
import pandas as pd

from mscred.evaluation import split_names
from mscred.metrics import events as runs
from mscred.metrics import rank_event_causes

COLUMNS = ["start", "end", "rows", "peak_score", "peak_at", "root_causes", "scales"]


def events_table(scores: pd.DataFrame, top_k: int = 3) -> pd.DataFrame:
    """One row per run of ``is_anomaly`` rows of ``scores`` (``MSCRED.detect``'s frame): its first and last row's
    timestamp (or row number), its rows, its largest score and where, the ``top_k`` root causes by the votes of its
    rows (``metrics.rank_event_causes``: how many rows list a sensor, then its mean place in their lists, as the
    root-cause recall of ``evaluate`` ranks them) and the scales that flagged any of its rows, shortest first."""
    index = scores.iloc[:, 0].to_numpy()
    score = scores["score"].to_numpy()
    rows = []
    for a, b in runs(scores["is_anomaly"].to_numpy()).tolist():
        causes = [split_names(cell) for cell in scores["root_causes"].iloc[a:b]]
        lit = sorted({int(w) for cell in scores["scales"].iloc[a:b] for w in split_names(cell)})
        peak = a + int(np.argmax(score[a:b]))
        rows.append({"start": index[a], "end": index[b - 1], "rows": b - a, "peak_score": float(score[peak]),
                     "peak_at": index[peak], "root_causes": ";".join(rank_event_causes(causes)[:top_k]),
                     "scales": ";".join(map(str, lit))})
    return pd.DataFrame(rows, columns=COLUMNS)
