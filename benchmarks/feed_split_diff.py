"""How far a series scored in two pieces (the second after the first as ``detect``'s context) is from the series
scored as one table: the float32 network sees the windows in other batches, so the scores differ by rounding. It
was the figure behind "to 1e-6" in the folder-feed tests while a folder's files were scored one after another; since
2026-12-06 a folder is scored as one table (mscred/feed.py), and the figure stands for `detect --context` of a split. A tiny model (channels 4/8/8/8, 1 epoch, CPU), SEEDS series; prints one JSON line:
    PYTHONPATH=src python3 benchmarks/feed_split_diff.py   (results/feed_split_diff/)"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame, tiny_model  # noqa: E402
from mscred.detector import MSCRED  # noqa: E402

SEEDS = range(5)
worst = []
with tempfile.TemporaryDirectory() as folder:
    for seed in SEEDS:
        series = sensor_frame(900, 4, seed=seed)
        model = MSCRED.load(tiny_model(Path(folder) / f"m{seed}", series.iloc[:500]), device="cpu")
        whole = model.detect(series.iloc[500:], context=series.iloc[400:500])["score"].to_numpy()
        split = pd.concat([model.detect(series.iloc[500:650], context=series.iloc[400:500]),
                           model.detect(series.iloc[650:], context=series.iloc[400:650])])["score"].to_numpy()
        worst.append(float(np.max(np.abs(split - whole) / np.maximum(np.abs(whole), 1e-12))))
print(json.dumps({"series": len(worst), "max_rel_diff_each": worst, "max_rel_diff": max(worst)}))
