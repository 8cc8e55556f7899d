"""Compile the conv + cell step kernel (``ops/triton/convlstm_conv_cell.py``) for sm_90 on a CPU machine and report
registers, spills, shared memory and the SASS's instruction mix (TMA loads, wgmma, local memory), per tile
(BLOCK_M/warps/stages/programs-per-SM; a persistent tile compiles the flattened loop).

Why: the per-step Triton fusion of 2026-12-01 spilled at every tile (255 registers) and fed its dots through
registers; this kernel's operands come by TMA, which the SASS shows as UTMALDG and the dots as HGMMA. Triton on
this machine (3.9) is not the H200's (3.6): counts can differ by a few registers.

Usage: ``.venv/bin/python benchmarks/conv_cell_sm90.py [--sass DIR]`` (level 1's shapes: C = Ch = 32, bf16).
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
os.environ.setdefault("TRITON_INTERPRET", "0")

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from mscred.ops.triton import convlstm_conv_cell as cc  # noqa: E402
from triton_sm90 import resource_usage, sass  # noqa: E402

POINTERS = {"bias_ptr": "*fp32", "z_ptr": "*bf16", "cprev_ptr": "*fp16", "c_ptr": "*fp16", "h_ptr": "*bf16",
            "hp_ptr": "*bf16"}


def compile_step(block_m: int, warps: int, stages: int, flatten: bool, resident: bool = False, ws: bool = False,
                 C: int = 32, CH: int = 32):
    KC = C + CH
    fn = cc._conv_cell_kernel
    tl = triton.language
    constexprs = dict(CH=CH, KC=KC, TAPS_W=2, TAPS=4, HAS_CPREV=True, WRITE_HP=True, CDT=tl.float32,
                      FAST_ACT=True, BLOCK_M=block_m, FLATTEN=flatten, RESIDENT_W=resident,
                      WARP_SPECIALIZE=ws)
    signature, attrs = {}, {}
    for i, name in enumerate(fn.arg_names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name == "x_desc":
            signature[name] = f"tensordesc<bf16[{block_m}, {KC}]>"
        elif name == "w_desc":
            signature[name] = f"tensordesc<bf16[{KC}, {CH}]>"
        elif name in POINTERS:
            signature[name] = POINTERS[name]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "forget_bias":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name in ("h_sb", "KC_STRIDE"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn, signature, {(fn.arg_names.index(k),): v for k, v in constexprs.items()}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32),
                          options={"num_warps": warps, "num_stages": stages})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sass", help="folder to write each tile's SASS into")
    ap.add_argument("--tiles", default="128/8/2/0,128/8/3/0,128/4/3/0,64/4/3/0,256/8/2/0,128/8/2/1,64/4/2/1,64/4/3/1")
    args = ap.parse_args()
    for tile in args.tiles.split(","):
        block_m, warps, stages, per_sm = (int(v) for v in tile.split("/"))
        kernel = compile_step(block_m, warps, stages, flatten=per_sm > 0, resident=per_sm > 0)
        code = sass(kernel.asm["cubin"])
        mix = {op: len(re.findall(rf"\b{op}\b", code)) for op in ("UTMALDG", "HGMMA", "STL", "LDL", "LDG", "STG")}
        print(f"BLOCK_M {block_m} warps {warps} stages {stages} persistent {per_sm > 0}: {resource_usage(kernel.asm['cubin'])}, "
              f"shared {kernel.metadata.shared} B, {mix}", flush=True)
        if args.sass:
            Path(args.sass).mkdir(parents=True, exist_ok=True)
            (Path(args.sass) / f"conv_cell_{tile.replace('/', '_')}.sass").write_text(code)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
