"""What the training cell kernels compile to for the H200, read on a machine without a GPU: instructions, registers,
blocks per SM and waves, per ConvLSTM level of the default model at the training batch.

Triton's compiler builds each kernel for sm_90 with the launch constants the op uses at that level (``convlstm``'s
``_launch`` / ``_launch_bwd``: BLOCK, BLOCK_C, TILES; bf16 gates, float16 cells, channels-last, strides specialised
as at the launch) and ``tests/sm90_compile.py`` disassembles it with the Triton wheel's nvdisasm and cuobjdump. Per
kernel and level, with the exact activations and with the SFU's tanh (``FAST_ACT``):
- instructions in the whole kernel, and in its tile loop (the backward's: TILES row tiles per program, or its
  grid-stride loop where it launches as one wave; also with c_t read back instead of recomputed,
  MSCRED_LSTM_RECOMPUTE_C=0),
- shared-memory loads and stores, in the kernel and in its tile loop (the backward's are its bias sums' reduction),
- MUFU instructions (EX2 and RCP for the exact forms, TANH for the SFU),
- registers per thread, and the blocks of ``NUM_WARPS`` warps they let an SM hold (65,536 registers, allocated in
  multiples of 8 per thread; at most 64 warps),
- programs launched per step (the backward's as one wave of ``convlstm.WAVE_PER_SM`` per SM where its grid holds
  more) and the waves they make on 132 SMs: a fraction above a whole number is a last wave that runs partly empty.
Numbers from the compiled code and our arithmetic on it, not GPU measurements.

Usage (any machine with Triton's NVIDIA backend): PYTHONPATH=src python3 benchmarks/cell_kernel_sass.py [--out DIR]
Writes DIR/cell_kernel_sass.md and .json (DIR: benchmarks/results/cell_kernel_sass).
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ((32, 30), (64, 15), (128, 8), (256, 4))
BATCH, SMS = 128, 132  # the training batch; the H200's SMs
MODULE = "mscred.ops.triton.convlstm_kernels"


def cell_kernel_config(kernel: str, fast: bool, block: int = 512, block_c: int = 32, tiles: int = 4,
                       concat: bool = True, num_warps: int = 4, recompute_c: bool = True,
                       grid_stride: bool = False) -> dict:
    """``tests/sm90_compile.py``'s configuration of a training cell kernel in bf16 (channels-last, float16 cells),
    specialised as its launch is (channel strides 1, the others 16-aligned): ``concat`` the concatenated-gates
    path of levels 1-2 (the backward adds the bias to the stored gates; the forward reads one gate tensor, no
    recurrent one, and stores no pre-activations), else the per-step path of levels 3-4 (the backward summing the
    recurrent gradient's four tap shares, DHR_TAPS, ``convlstm_gemm.dgrad_by_gemm``); ``recompute_c`` the
    backward's RECOMPUTE_C and ``grid_stride`` its GRID_STRIDE (``convlstm.wave_grid``). The defaults are level
    1's backward."""
    from mscred.ops.triton import convlstm_kernels

    strides = [name for name in getattr(convlstm_kernels, kernel).arg_names
               if name.endswith(("_sb", "_sc", "_sp", "_sy", "_sx"))]
    constants = {name: 1 for name in strides if name.endswith("_sc")}
    constants.update(HAS_CPREV=True, PIX_MAJOR=True, CDT="tl.float32", BLOCK=block, BLOCK_C=block_c,
                     FAST_ACT=fast)
    if kernel == "cell_bwd_kernel":
        constants.update(HAS_DHR=True, HAS_DC=True, DBIAS=True, STORE2=False, TILES=tiles, PRE_BIAS=concat,
                         RECOMPUTE_C=recompute_c, GRID_STRIDE=grid_stride, DHR_TAPS=not concat)
    else:
        constants.update(HAS_REC=not concat, WRITE_HP=True, STORE_PRE=not concat, STORE_C=True, HP_BORDER=10)
    pointers = {name: "*bf16" for name in ("gx_ptr", "rec_ptr", "pre_ptr", "h_ptr", "hp_ptr", "dh_ptr", "dhr_ptr",
                                           "dpre_ptr", "dpre2_ptr")}
    pointers.update(cprev_ptr="*fp16", c_ptr="*fp16")
    return dict(constants=constants, pointers=pointers, floats=["forget_bias"], num_warps=num_warps,
                aligned=[name for name in strides if name not in constants] + ["CH"])


def instructions(listing: str) -> list[str]:
    """The instructions of an nvdisasm listing, predicates and operands included, in order."""
    return re.findall(r"^\s+/\*[0-9a-f]{4,}\*/\s+(.*?);", listing, flags=re.M)


def tile_loop(listing: str) -> list[str]:
    """The instructions from the first backward branch's target label to the branch ([] without a loop; the
    one-instruction branch-to-itself that ends every kernel is not a loop)."""
    lines = listing.splitlines()
    labels = {line.strip()[:-1]: i for i, line in enumerate(lines) if re.match(r"^\.L_x_\d+:", line)}
    for i, line in enumerate(lines):
        target = re.search(r"BRA `\((\.L_x_\d+)\)", line)
        if target and labels.get(target.group(1), len(lines)) < i:
            loop = instructions("\n".join(lines[labels[target.group(1)]:i + 1]))
            if len(loop) > 1:
                return loop
    return []


def loop_instructions(listing: str) -> int:
    """The number of ``tile_loop``'s instructions."""
    return len(tile_loop(listing))


def shared_memory_ops(code: list[str]) -> int:
    """Shared-memory loads and stores (LDS, LDSM, STS) among ``code``'s instructions."""
    return sum(re.sub(r"^@!?U?P\w+\s+", "", i).split()[0].split(".")[0] in ("LDS", "LDSM", "STS") for i in code)


def blocks_per_sm(registers: int, warps: int) -> int:
    """Blocks of ``warps`` warps an sm_90 SM holds by registers (multiples of 8 a thread) and by its 64 warps."""
    per_block = math.ceil(registers / 8) * 8 * 32 * warps
    return min(65536 // per_block, 64 // warps)


def out_dir_and_compiler(doc: str, default_out: str):
    """(--out of the command line, ``tests/sm90_compile``): what a SASS-reading script of benchmarks/ starts with."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", default=default_out)
    sys.path.insert(0, str(ROOT / "tests"))
    import sm90_compile

    return ap.parse_args().out, sm90_compile


def main() -> None:
    out, sm90_compile = out_dir_and_compiler(__doc__, "benchmarks/results/cell_kernel_sass")
    from mscred.ops.triton import convlstm as fused

    rows = []
    for ch, n in LEVELS:
        pixels, concat = BATCH * n * n, n * n >= fused.convlstm_concat.MIN_PIXELS
        block, block_c, grid = fused._launch("nhwc", pixels, ch)
        bblock, bblock_c, tiles, bgrid = fused._launch_bwd("nhwc", pixels, ch)
        for kernel, launch, warps in (("cell_fwd_kernel", (block, block_c, 1, grid), fused.NUM_WARPS),
                                      ("cell_bwd_kernel", (bblock, bblock_c, tiles, bgrid), fused.NUM_WARPS_BWD)):
            b, bc, t, g = launch
            wave, stride = fused.one_wave(g, fused.WAVE_PER_SM if kernel == "cell_bwd_kernel" else 0, SMS)
            programs = math.prod(wave)
            for fast in (False, True):
                code = sm90_compile.compiled_code(MODULE, kernel, cell_kernel_config(kernel, fast, b, bc, t, concat,
                                                                                     warps, grid_stride=stride))
                ins = instructions(code["listing"])
                read_c = 0
                if kernel == "cell_bwd_kernel":  # the tile loop as it was before c_t was recomputed
                    read_c = loop_instructions(sm90_compile.sass(MODULE, kernel, cell_kernel_config(
                        kernel, fast, b, bc, t, concat, warps, recompute_c=False, grid_stride=stride)))
                per_sm = blocks_per_sm(code["registers"], warps)
                rows.append(dict(channels=ch, size=n, kernel=kernel, activations="SFU" if fast else "exact",
                                 block=b, block_c=bc, tiles=t, warps=warps, instructions=len(ins),
                                 loop=loop_instructions(code["listing"]), loop_reading_c=read_c,
                                 shared_ops=shared_memory_ops(ins),
                                 loop_shared_ops=shared_memory_ops(tile_loop(code["listing"])),
                                 mufu={op: sum(i.split()[0].endswith(op) for i in ins)
                                       for op in ("MUFU.EX2", "MUFU.RCP", "MUFU.TANH")},
                                 registers=code["registers"], blocks_per_sm=per_sm, programs=programs,
                                 waves=programs / (SMS * per_sm)))
                print(rows[-1], flush=True)
    meta = ("sm_90 code compiled by Triton on the CPU machine (tests/sm90_compile.py), the op's launch constants at "
            f"batch {BATCH}, bf16 gates, float16 cells; waves on {SMS} SMs by our arithmetic. "
            "Command: `PYTHONPATH=src python3 benchmarks/cell_kernel_sass.py`.")
    lines = ["# The training cell kernels' sm_90 code per level", "", meta, "",
             "| level (channels, size) | kernel | activations | BLOCK / BLOCK_C / TILES | instructions | tile loop "
             "(c_t read) | shared-memory ops: kernel / loop | MUFU EX2 / RCP / TANH | registers | blocks per SM | "
             "programs | waves |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        m = r["mufu"]
        reading_c = f" ({r['loop_reading_c']})" if r["loop_reading_c"] else ""
        lines.append(f"| {r['channels']}, {r['size']} | {r['kernel']} | {r['activations']} | "
                     f"{r['block']} / {r['block_c']} / {r['tiles']} | {r['instructions']} | "
                     f"{r['loop'] or '-'}{reading_c} | {r['shared_ops']} / {r['loop_shared_ops'] if r['loop'] else '-'} | "
                     f"{m['MUFU.EX2']} / {m['MUFU.RCP']} / {m['MUFU.TANH']} | {r['registers']} | {r['blocks_per_sm']} | "
                     f"{r['programs']:,} | {r['waves']:.2f} |")
    sweep_report.write(out, "cell_kernel_sass", meta, rows, lines)


if __name__ == "__main__":
    main()
