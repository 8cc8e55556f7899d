"""What the fused recurrent step (``ops/triton/convlstm_rec_cell.py``) compiles to for the H200, read on a machine
without a GPU: per tile, the kernel's registers a thread, shared memory, instructions, warpgroup MMAs (HGMMA) and
shared-memory traffic (LDSM / LDS / STS). At f4e1643 it also compiled an A/B form with one dot per gate
(results/rec_cell_sass/: not kept).

Triton's compiler builds each for sm_90 as the training step launches it (bf16 buffers, float16 cells, k = 2,
channel strides 1, the others 16-aligned) and ``tests/sm90_compile.py`` disassembles it with the Triton wheel's
nvdisasm and cuobjdump. Numbers from the compiled code, not GPU measurements; the Triton here may differ from the
GPU machine's.

Usage (any machine with Triton's NVIDIA backend): PYTHONPATH=src python3 benchmarks/rec_cell_sass.py [--out DIR]
Writes DIR/rec_cell_sass.md (DIR: benchmarks/results/rec_cell_sass).
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import Counter
from pathlib import Path

from cell_kernel_sass import instructions  # noqa: E402 (benchmarks/ is the script's own folder)

ROOT = Path(__file__).resolve().parents[1]
MODULE = "mscred.ops.triton.convlstm_rec_cell"
UNIT_STRIDES = ("gx_sc", "pre_sc", "c_sc", "h_sc", "hp_sc")
# (hidden channels, tile BM/BC/BK/warps/stages): the adopted tiles, then others of the sweep
TILES = ((128, (128, 64, 64, 8, 3)), (256, (64, 64, 64, 8, 3)), (128, (128, 32, 64, 8, 3)),
         (256, (64, 32, 64, 4, 3)), (128, (64, 64, 64, 4, 3)))
COUNTED = ("HGMMA", "LDGSTS", "LDG", "LDSM", "LDS", "STS", "STG", "BAR")


def kernel_config(tile: tuple[int, int, int, int, int]) -> dict:
    """``tests/sm90_compile.py``'s configuration of ``rec_cell_fwd_kernel`` as the training step launches it."""
    from mscred.ops.triton import convlstm_rec_cell

    bm, bc, bk, warps, stages = tile
    strides = [n for n in convlstm_rec_cell.rec_cell_fwd_kernel.arg_names
               if n.endswith(("_sb", "_sc", "_sp", "_sy", "_sx", "_so"))]
    return {"constants": {"KH": 2, "KW": 2, "WRITE_HP": True, "STORE_PRE": True, "STORE_C": True, "HP_BORDER": 10,
                          "CDT": "tl.float32", "BM": bm, "BC": bc, "BK": bk, "FAST_ACT": True,
                          **{n: 1 for n in UNIT_STRIDES}},
            "pointers": {**{n: "*bf16" for n in ("hb_ptr", "w_ptr", "gx_ptr", "pre_ptr", "h_ptr", "hp_ptr")},
                         "cprev_ptr": "*fp16", "c_ptr": "*fp16", "bias_ptr": "*fp32"},
            "floats": ["forget_bias"], "aligned": [n for n in strides if n not in UNIT_STRIDES] + ["CH"],
            "num_warps": warps, "num_stages": stages}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/rec_cell_sass"))
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    import sm90_compile

    lines = ["| hidden channels | tile BM/BC/BK/warps/stages | registers | shared KB | instructions | "
             + " | ".join(COUNTED) + " |", "| --- " * (5 + len(COUNTED)) + "|"]
    for ch, tile in TILES:
        code = sm90_compile.compiled_code(MODULE, "rec_cell_fwd_kernel", kernel_config(tile))
        ops = instructions(code["listing"])
        counts = Counter(re.sub(r"^@!?U?P\w+\s+", "", op).split()[0].split(".")[0] for op in ops)
        row = [str(ch), "/".join(map(str, tile)), str(code["registers"]), f"{code['shared'] / 1024:.0f}",
               str(len(ops)), *(str(counts.get(name, 0)) for name in COUNTED)]
        lines.append("| " + " | ".join(row) + " |")
        print(lines[-1], flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    import triton

    (out / "rec_cell_sass.md").write_text(f"Compiled for sm_90 with Triton {triton.__version__} on the CPU "
                                          "(benchmarks/rec_cell_sass.py); not GPU measurements.\n\n"
                                          + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
