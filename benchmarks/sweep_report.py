"""What the sweep scripts share (bench_cell_blocks.py, bench_attention_tiles.py, bench_small_tiles.py): the line
naming card, versions and date, and the writing of a sweep's rows (JSON) beside its table (Markdown)."""
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


def write(out: str | pathlib.Path, stem: str, meta: str, rows: list[dict], lines: list[str]) -> None:
    """OUT/STEM.json (meta and rows) and OUT/STEM.md (the table's lines), and the table to stdout."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
    (out / f"{stem}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
