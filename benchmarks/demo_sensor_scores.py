"""Per event of a `mscred demo` run (its data/anomalies.csv), the sensors with the largest sensor scores over the
event's rows (and the gap after them, which the event's last window covers), beside the event's root causes and the
threshold: the figures the README quotes under the sensor-score heat map.
    python3 benchmarks/demo_sensor_scores.py [DEMO_OUT]   (default demo_out; results/demo_sensor_scores/)"""
import json
import sys
from pathlib import Path

import pandas as pd

out = Path(sys.argv[1] if len(sys.argv) > 1 else "demo_out")
scores = pd.read_csv(out / "scores.csv")
events = pd.read_csv(out / "data" / "anomalies.csv")
threshold = json.loads((out / "metrics.json").read_text())["threshold"]
columns = [c for c in scores.columns if c.startswith("score_")]
print(f"threshold {threshold:.4g}")
for event in events.itertuples():
    rows = (scores["timestamp"] >= event.start) & (scores["timestamp"] < event.end + 10)
    peaks = scores.loc[rows, columns].max().sort_values(ascending=False)[:4]
    top = ", ".join(f"{name[len('score_'):]} {value:.1f}" for name, value in peaks.items())
    flagged = int(scores.loc[rows, "is_anomaly"].sum())
    print(f"event {event.start}-{event.end} (root causes {event.root_causes}): {flagged} rows flagged; largest "
          f"sensor scores: {top}")
