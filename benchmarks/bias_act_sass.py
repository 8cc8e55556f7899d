"""What bias_act's forward kernel compiles to for the H200, read on a machine without a GPU: per training-step call
shape, its instructions, registers, elements and global-load bytes per thread, and how many instructions the two
integer divisions by the map's runtime sizes cost (compiled again with those sizes as constants).

The launch's tile (``bias_act._launch`` with FWD_BLOCK / FWD_WARPS: BLOCK_C = the channels up to 64, BLOCK_P pixels
a tile), bf16, channels-last, SELU, compiled by ``tests/sm90_compile.py``. Why: the kernel reaches 1.57 TB/s (37% of
the copy rate) at the scoring batch (results/small_tiles/), and one 8-byte load in flight per thread is well below
what the H200's bandwidth-latency product asks (docs/kernel-experiments.md, the bias_act lead). Compiled code and
our arithmetic, not GPU measurements. Since 2026-12-02 the sizes are constants by default (``bias_act.const_sizes``,
after benchmarks/bench_bias_act_fwd.py measured them on the H200); the table compiles the runtime-size kernel, with
and without them.

Usage (any machine with Triton's NVIDIA backend): PYTHONPATH=src python3 benchmarks/bias_act_sass.py [--out DIR]
Writes DIR/bias_act_sass.md and .json (DIR: benchmarks/results/bias_act_sass).
"""
from __future__ import annotations

import re

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from cell_kernel_sass import instructions, out_dir_and_compiler  # noqa: E402 (benchmarks/ is the script's own folder)

MODULE = "mscred.ops.triton.bias_act"
# (channels, map side) of the training encoder's bias_act forward calls (batch 640 = 128 windows x 5 steps); each
# compiled with and without BORDER (a zero-bordered output, as the ConvLSTM inputs are written in training)
SHAPES = ((64, 15), (128, 8), (256, 4))


def config(block_p: int, block_c: int, warps: int, border: bool, sizes: tuple[int, int] | None) -> dict:
    """The forward kernel's sm_90 configuration as launched (``sizes`` = (HWO, WO) as constants, else runtime)."""
    from mscred.ops.triton import bias_act

    strides = [n for n in bias_act._bias_act_fwd_kernel.arg_names if n.endswith(("_sb", "_sc", "_sy", "_sx"))]
    constants = dict(y_sc=1, o_sc=1, SELU=True, CDT="tl.float32", BLOCK_P=block_p, BLOCK_C=block_c, SHUFFLE=1,
                     BORDER=border)
    if sizes:
        constants.update(HWO=sizes[0], WO=sizes[1])
    return dict(constants=constants, pointers=dict(y_ptr="*bf16", o_ptr="*bf16", b_ptr="*fp32"), num_warps=warps,
                aligned=[s for s in strides if s not in constants] + ["C"])


def global_load_bytes(code: list[str]) -> int:
    """Bytes per thread of the LDG instructions (LDG.E = 4, .64 = 8, .128 = 16)."""
    widths = [re.search(r"LDG\.E(?:\.(\d+))?", i) for i in code]
    return sum(int(m.group(1) or 32) // 8 for m in widths if m)


def main() -> None:
    out, sm90_compile = out_dir_and_compiler(__doc__, "benchmarks/results/bias_act_sass")
    from mscred.ops.triton import bias_act

    rows = []
    for (ch, n), border in ((shape, border) for shape in SHAPES for border in (False, True)):
        block_p, block_c, _ = bias_act._launch(640 * n * n, ch, 1, bias_act.FWD_BLOCK)
        side = n + 1 if border else n  # TF "same" for the 2 x 2 ConvLSTM kernel: one row / column, bottom and right
        counts = {}
        for label, sizes in (("runtime sizes", None), ("constant sizes", (side * side, side))):
            code = sm90_compile.compiled_code(MODULE, "_bias_act_fwd_kernel",
                                              config(block_p, block_c, bias_act.FWD_WARPS, border, sizes))
            counts[label] = (len(instructions(code["listing"])), code["registers"],
                             global_load_bytes(instructions(code["listing"])))
        per_thread = block_p * block_c // (32 * bias_act.FWD_WARPS)
        ins, regs, load = counts["runtime sizes"]
        rows.append(dict(channels=ch, size=n, border=border, block_p=block_p, block_c=block_c,
                         warps=bias_act.FWD_WARPS, elements_per_thread=per_thread, instructions=ins, registers=regs,
                         load_bytes_per_thread=load, instructions_constant_sizes=counts["constant sizes"][0]))
        print(rows[-1], flush=True)
    meta = ("sm_90 code compiled by Triton on the CPU machine (tests/sm90_compile.py), the launch's tile, bf16, "
            "channels-last, SELU; bytes per thread include the bias's float32 load. "
            "Command: `PYTHONPATH=src python3 benchmarks/bias_act_sass.py`.")
    lines = ["# bias_act's forward kernel, sm_90 code per training call shape", "", meta, "",
             "| channels, map | border | tile (pixels x channels), warps | elements a thread | instructions a thread "
             "(sizes as constants) | registers | global-load bytes a thread |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| {r['channels']}, {r['size']} x {r['size']} | {'yes' if r['border'] else 'no'} | "
                     f"{r['block_p']} x {r['block_c']}, {r['warps']} | {r['elements_per_thread']} | "
                     f"{r['instructions']} ({r['instructions_constant_sizes']}) | {r['registers']} | "
                     f"{r['load_bytes_per_thread']} |")
    sweep_report.write(out, "bias_act_sass", meta, rows, lines)


if __name__ == "__main__":
    main()
