"""`detect DIR` of a folder against `detect` of its files concatenated, with file lengths that are not multiples of
the gap (1,003, 998 and 999 rows of 5 sensors; a tiny model: channels 4/8/8/8, 1 epoch, CPU): the largest score
difference, how many rows differ, and the scores about the first seam (rows 995-1002). Run with the code to check on
PYTHONPATH (a worktree of an older commit for the "before"); prints one JSON line:
    PYTHONPATH=src python3 benchmarks/folder_feed_alignment.py   (results/folder_feed_alignment/)"""
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from cli_helpers import sensor_frame, tiny_model  # noqa: E402
from mscred.cli.main import main  # noqa: E402

with tempfile.TemporaryDirectory() as folder:
    root = Path(folder)
    frame = sensor_frame(4500, 5, seed=3)
    model = tiny_model(root / "model", frame.iloc[:1500])
    series = frame.iloc[1500:].reset_index(drop=True)
    (root / "feed").mkdir()
    cuts = [0, 1003, 2001, 3000]
    for k, (start, stop) in enumerate(zip(cuts, cuts[1:])):
        series.iloc[start:stop].to_csv(root / "feed" / f"part-{k}.csv", index=False)
    series.to_csv(root / "all.csv", index=False)
    for data, out in ((root / "feed", root / "folder.csv"), (root / "all.csv", root / "whole.csv")):
        assert main(["detect", str(model), str(data), "--out", str(out), "--device", "cpu"]) == 0
    folder_scores = pd.read_csv(root / "folder.csv")["score"].to_numpy()
    whole_scores = pd.read_csv(root / "whole.csv")["score"].to_numpy()
    diff = np.abs(folder_scores - whole_scores)
    print(json.dumps({"file_rows": [b - a for a, b in zip(cuts, cuts[1:])], "max_abs_diff": float(diff.max()),
                      "rows_differing": int((diff > 1e-6).sum()),
                      "folder_rows_995_1002": [round(float(v), 3) for v in folder_scores[995:1003]],
                      "whole_rows_995_1002": [round(float(v), 3) for v in whole_scores[995:1003]]}))
