"""Every tile ``bench_strided_conv.py`` tries, compiled for the H200 (sm_90) on this CPU machine: does it fit?

``bench_strided_conv.py`` times each of ``ops/triton/strided_conv.py``'s kernels at every tile of its list and every
shape the training step gives them; a tile whose shared memory the H200 cannot give would fail only there, in a
call of scarce device time (the bench records it and goes on). This script compiles each (shape, kernel, tile) as
the launch would (``strided_conv.launch_blocks``) through ``tests/sm90_compile.py`` and tables its shared memory
and registers per thread, against the H200's 227 KB.

Usage: ``.venv/bin/python benchmarks/strided_conv_sm90.py [--out DIR]`` (~2 min on 2 cores)
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sm90_compile  # noqa: E402

import bench_strided_conv  # noqa: E402 (benchmarks/ is the script's own folder)
import sweep_report  # noqa: E402

POINTERS = {"dy_ptr": "*bf16", "w_ptr": "*bf16", "dx_ptr": "*bf16"}


def constants(kernel: str, C: int, W: int, O: int, k: int, s: int) -> dict:
    """The compile-time arguments of ``kernel`` for a bench shape (N, C, H, W, O, k, s) at the tile the environment
    names, as ``strided_conv.strided_gemm`` launches it in bf16 (without padding: the step's inputs come padded)."""
    from mscred.ops.triton import strided_conv

    if kernel == "gather":  # the strided convolution of dy (O channels) into C channels
        block_m, block_n, block_k, warps = strided_conv.launch_blocks(kernel, O, C)
        return dict(CI=C, CO=O, K=k, S=s, PREC="tf32", BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k), warps
    columns = s * s * C if kernel == "columns" else C
    block_m, block_n, block_k, warps = strided_conv.launch_blocks(kernel, O, columns)
    tile = dict(O=O, C=C, K=k, S=s, TMAX=-(-k // s), PREC="tf32", BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k)
    return (dict(tile, WX=W) if kernel == "columns" else tile), warps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/strided_conv_sm90")
    args = ap.parse_args()
    rows, seen = [], set()
    for name, (_, C, _, W, O, k, s, kernels) in bench_strided_conv.SHAPES.items():
        for kernel in kernels:
            for tile in bench_strided_conv.TILES:
                os.environ["MSCRED_PHASE_DGRAD_TILE"] = tile
                consts, warps = constants(kernel, C, W, O, k, s)
                del os.environ["MSCRED_PHASE_DGRAD_TILE"]  # (the compiler process is kept per environment)
                key = (kernel, tuple(sorted(consts.items())), warps)
                if key in seen:  # (a tile whose columns were cut to the matrix's: compiled once)
                    continue
                seen.add(key)
                code = sm90_compile.compiled_code("mscred.ops.triton.strided_conv", f"_{kernel}_kernel",
                                                  dict(constants=consts, pointers=POINTERS, num_warps=warps))
                rows.append(dict(shape=name, kernel=kernel, tile=f"{consts['BLOCK_M']}/{consts['BLOCK_N']}/{warps}",
                                 shared=code["shared"], registers=code["registers"],
                                 fits=code["shared"] <= sm90_compile.HOPPER_SHARED_MEMORY))
                print(rows[-1], flush=True)
    import triton

    meta = (f"Compiled for sm_90 on the CPU (tests/sm90_compile.py) by Triton {triton.__version__} (the H200's "
            f"runs have their own Triton, whose code may differ). Command: `.venv/bin/python "
            f"benchmarks/strided_conv_sm90.py`. {len(rows)} compiles, {sum(not r['fits'] for r in rows)} over the "
            f"H200's {sm90_compile.HOPPER_SHARED_MEMORY // 1024} KB of shared memory. A kernel whose compile-time "
            f"arguments an earlier shape already had is listed once, under that shape.")
    lines = ["# The strided-convolution kernels' bench tiles, compiled for sm_90", "", meta, "",
             "| shape | kernel | tile (rows/columns/warps) | shared memory (KB) | registers / thread | fits |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['shape']} | {r['kernel']} | {r['tile']} | {r['shared'] / 1024:.0f} | {r['registers']} | "
              f"{'yes' if r['fits'] else 'NO'} |" for r in rows]
    sweep_report.write(args.out, "strided_conv_sm90", meta, rows, lines)


if __name__ == "__main__":
    main()
