"""What the sweep scripts share (bench_cell_blocks.py, bench_attention_tiles.py, bench_small_tiles.py): the line
naming card, versions and date, and the writing of a sweep's rows (JSON) beside its table (Markdown); ``table``
does the whole report of a one-table sweep (bench_bias_act_fwd.py, bench_im2col_levels.py, ...)."""
from __future__ import annotations

import datetime
import json
import pathlib

import torch


def machine_line() -> str:
    """"<GPU>, torch <v>, triton <v>, cuDNN <v>, <UTC time>" of this process."""
    import triton
    return (f"{torch.cuda.get_device_name()}, torch {torch.__version__}, triton {triton.__version__}, "
            f"cuDNN {torch.backends.cudnn.version()}, {datetime.datetime.now(datetime.timezone.utc).isoformat()}")


def table(out: str | pathlib.Path, stem: str, script: str, title: str, intro: str, columns: list[str],
          rows: list[dict], cells, machine: str | None = None) -> None:
    """``write`` of a one-table report: "# TITLE", the machine line (``machine_line()`` unless given) with the
    command `PYTHONPATH=src python3 benchmarks/SCRIPT`, INTRO, then the table of ``columns`` with one line per row,
    ``cells(row)`` its cells as text."""
    meta = f"{machine or machine_line()}. Command: `PYTHONPATH=src python3 benchmarks/{script}`."
    lines = [f"# {title}", "", meta, "", intro, "", "| " + " | ".join(columns) + " |",
             "| " + " | ".join("---" for _ in columns) + " |"]
    lines += ["| " + " | ".join(str(c) for c in cells(r)) + " |" for r in rows]
    write(out, stem, meta, rows, lines)


def write(out: str | pathlib.Path, stem: str, meta: str, rows: list[dict], lines: list[str]) -> None:
    """OUT/STEM.json (meta and rows) and OUT/STEM.md (the table's lines), and the table to stdout."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
