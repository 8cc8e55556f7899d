"""What `detect --report DIR` adds to a detect: `mscred detect MODEL DATA --out S.csv` with and without the page,
each a fresh process, timed alternately ROUNDS times, on the demo's data (`mscred generate`: 30 sensors, test
10,000 rows) with a model trained here (MODEL, or a tiny one: channels 4/8/8/8, 1 epoch, CPU). The page's extra
work: each sensor's score (the heat map), the figures, and the worst windows through the network again. Prints one
JSON line:
    PYTHONPATH=src python3 benchmarks/bench_detect_report.py [MODEL_DIR]   (results/detect_report/)"""
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cli_timing import MSCRED, run  # noqa: E402

ROUNDS = 3

with tempfile.TemporaryDirectory() as folder:
    root = Path(folder)
    subprocess.run(MSCRED + ["generate", root / "data", "--seed", "0"], check=True, capture_output=True)
    model = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "model"
    if len(sys.argv) <= 1:
        subprocess.run(MSCRED + ["train", root / "data" / "train.csv", "--out", model, "--epochs", "1", "--set",
                                 "channels=4,8,8,8", "--device", "cpu", "--quiet"], check=True, capture_output=True)
    data = root / "data" / "test.csv"
    plain, page = [], []
    for r in range(ROUNDS):
        plain.append(run(MSCRED + ["detect", model, data, "--out", root / "a.csv", "--device", "cpu"]))
        page.append(run(MSCRED + ["detect", model, data, "--out", root / "b.csv", "--device", "cpu", "--report",
                                  root / "report"]))
    same = (root / "a.csv").read_bytes() == (root / "b.csv").read_bytes()
    print(json.dumps({"model": "given" if len(sys.argv) > 1 else "tiny (4/8/8/8, 1 epoch)",
                      "rows": 10000, "sensors": 30, "rounds": ROUNDS,
                      "detect_s": [round(t, 2) for t in plain], "detect_report_s": [round(t, 2) for t in page],
                      "median_added_s": round(statistics.median(page) - statistics.median(plain), 2),
                      "scores_identical": same}))
