"""benchmarks/sweep_report.py's one-table report: the Markdown the benchmark scripts commit, and its JSON rows."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import sweep_report  # noqa: E402


def test_table_writes_title_machine_command_intro_and_one_line_a_row(tmp_path, capsys):
    rows = [dict(call="conv2", us=91.31, same=True), dict(call="conv3", us=12.5, same=False)]
    sweep_report.table(tmp_path, "demo", "bench_demo.py", "A title", "What was timed.", ["call", "us", "same"], rows,
                       lambda r: (r["call"], f"{r['us']:.1f}", r["same"]), machine="H200, torch 2.11")
    meta = "H200, torch 2.11. Command: `PYTHONPATH=src python3 benchmarks/bench_demo.py`."
    expected = ["# A title", "", meta, "", "What was timed.", "", "| call | us | same |", "| --- | --- | --- |",
                "| conv2 | 91.3 | True |", "| conv3 | 12.5 | False |"]
    assert (tmp_path / "demo.md").read_text() == "\n".join(expected) + "\n"
    assert json.loads((tmp_path / "demo.json").read_text()) == dict(meta=meta, rows=rows)
    assert capsys.readouterr().out == "\n".join(expected) + "\n"
