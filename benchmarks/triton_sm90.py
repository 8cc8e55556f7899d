"""Compile the training cell kernels for sm_90 on a CPU machine and report registers, spills and SASS size.

Why: device time is scarce, and a kernel's register count (which sets its occupancy) and its SASS can be read
without a GPU -- Triton compiles for a named target and the triton wheel carries cuobjdump. The numbers are those
of this machine's Triton (the H200 runs Triton 3.6: counts can differ by a few registers), so use this to compare
variants, and the device to time them.

Usage: ``.venv/bin/python benchmarks/triton_sm90.py [--sass DIR] [--src SRC]`` (env overrides such as
MSCRED_CELL_BWD_TILES apply as in the op; SRC: another tree's ``src`` folder, default this one's).
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# --src DIR compiles another tree's kernels (e.g. `git archive REV src | tar -x -C build/before`), for a before/after.
SRC = sys.argv[sys.argv.index("--src") + 1] if "--src" in sys.argv else str(ROOT / "src")
sys.path.insert(0, SRC)

import triton  # noqa: E402
from triton.backends.compiler import GPUTarget  # noqa: E402
from triton.compiler import ASTSource  # noqa: E402

from mscred.ops.triton import convlstm  # noqa: E402
from mscred.ops.triton import convlstm_kernels as K  # noqa: E402

# Hidden channels of the default model's levels (30 sensors, batch 128: pixels B*H*W).
LEVELS = {32: 128 * 900, 64: 128 * 225, 128: 128 * 64, 256: 128 * 16}
POINTERS = {  # element types of the pointer arguments in a bf16 training step (cells in float16)
    "bwd": {"pre_ptr": "*bf16", "cprev_ptr": "*fp16", "c_ptr": "*fp16", "dh_ptr": "*bf16", "dhr_ptr": "*bf16",
            "dc_ptr": "*fp32", "dpre_ptr": "*bf16", "dpre2_ptr": "*bf16", "db_ptr": "*fp32"},
    "fwd": {"gx_ptr": "*bf16", "bias_ptr": "*fp32", "rec_ptr": "*bf16", "pre_ptr": "*bf16", "cprev_ptr": "*fp16",
            "c_ptr": "*fp16", "h_ptr": "*bf16", "hp_ptr": "*bf16"},
}


def _tool(name: str) -> str:
    return str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name)


def compile_kernel(fn, pointers: dict[str, str], constexprs: dict[str, object]):
    """The sm_90 compilation of ``fn`` with every pointer 16-byte aligned and every int stride divisible by 16
    (what the op's channels-last buffers give at these levels); float args fp32."""
    warps = constexprs.pop("_warps", 4)
    names = fn.arg_names
    constexprs = {k: v for k, v in constexprs.items() if k in names}  # (an older tree's kernel may lack some)
    signature, attrs = {}, {}
    for i, name in enumerate(names):
        if name in constexprs:
            signature[name] = "constexpr"
        elif name in pointers:
            signature[name] = pointers[name]
            attrs[(i,)] = [["tt.divisibility", 16]]
        elif name == "forget_bias":
            signature[name] = "fp32"
        else:
            signature[name] = "i32"
            if name not in ("N", "HW", "W", "PAD_T", "PAD_L", "CH", "H"):
                attrs[(i,)] = [["tt.divisibility", 16]]
    src = ASTSource(fn, signature, {(names.index(k),): v for k, v in constexprs.items()}, attrs)
    return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})


def resource_usage(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        out = subprocess.run([_tool("cuobjdump"), "--dump-resource-usage", f.name], capture_output=True,
                             text=True, check=True).stdout
    return re.search(r"REG:\d+ STACK:\d+ SHARED:\d+ LOCAL:\d+", out).group(0)


def sass(cubin: bytes) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        return subprocess.run([_tool("cuobjdump"), "--dump-sass", f.name], capture_output=True, text=True,
                              check=True).stdout


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sass", help="folder to write each variant's SASS into")
    parser.add_argument("--src", help="the src folder whose kernels to compile (read before the imports)")
    args = parser.parse_args()
    tl = triton.language
    for ch in LEVELS:
        block, block_c, tiles, _ = convlstm._launch_bwd("nhwc", LEVELS[ch], ch)
        bwd = dict(HAS_CPREV=True, HAS_DHR=True, HAS_DC=True, PIX_MAJOR=True, CDT=tl.float32, BLOCK=block,
                   BLOCK_C=block_c, DBIAS=True, STORE2=False, TILES=tiles, _warps=convlstm.NUM_WARPS_BWD)
        fblock, fblock_c, _ = convlstm._launch("nhwc", LEVELS[ch], ch)
        fwd = dict(HAS_REC=True, HAS_CPREV=True, WRITE_HP=True, STORE_PRE=True, STORE_C=True, HP_BORDER=10,
                   PIX_MAJOR=True,
                   CDT=tl.float32, BLOCK=fblock, BLOCK_C=fblock_c, _warps=convlstm.NUM_WARPS)
        for name, fn, const in (("bwd", K.cell_bwd_kernel, bwd), ("fwd", K.cell_fwd_kernel, fwd)):
            shape = {k: v for k, v in const.items() if k in ("BLOCK", "BLOCK_C", "TILES", "_warps")}
            kernel = compile_kernel(fn, POINTERS[name], dict(const))
            cubin = kernel.asm["cubin"]
            code = sass(cubin)
            n = sum(1 for line in code.splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", line))
            print(f"{name} Ch={ch:<4} {shape}: {resource_usage(cubin)}, {n} SASS instructions", flush=True)
            if args.sass:
                Path(args.sass).mkdir(parents=True, exist_ok=True)
                (Path(args.sass) / f"cell_{name}_{ch}.sass").write_text(code)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TRITON_INTERPRET", "0")
    raise SystemExit(main())
