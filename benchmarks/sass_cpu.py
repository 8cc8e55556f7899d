"""`mscred sass` on a CPU machine: probe answers across GPU generations, and inspect of mscred's own CUDA kernels.

Needs nvcc (CUDA 13 here) and, for sm_5x..sm_72, a CUDA 12 ptxas (``pip install nvidia-cuda-nvcc-cu12``).
Writes benchmarks/results/sass_probe.{json,md} and sass_inspect_im2col.{json,txt}.

Usage: ``.venv/bin/python benchmarks/sass_cpu.py [--archs sm_50,sm_90] [--out benchmarks/results]``
"""
from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from mscred.errors import InputError  # noqa: E402
from mscred.sass.inspect import format_summaries, inspect_file  # noqa: E402
from mscred.sass.probe import probe  # noqa: E402
from mscred.sass.toolchain import compile_cubin, find_tool, tool_release  # noqa: E402

ARCHS = "sm_50,sm_61,sm_70,sm_75,sm_80,sm_89,sm_90,sm_100,sm_120"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--archs", default=ARCHS)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    nvcc, ptxas = find_tool("nvcc"), find_tool("ptxas12")
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "nvcc": tool_release(nvcc) if nvcc else None, "ptxas_cuda12": tool_release(ptxas) if ptxas else None}

    rows, table = [], ["| arch | instruction | immediate bits | layout (V = immediate) | store register bits | "
                       "store layout (R = register) |", "| --- | --- | --- | --- | --- | --- |"]
    for arch in args.archs.split(","):
        row = {"arch": arch}
        try:
            imm = probe(arch)
            reg = probe(arch, template="register")
        except InputError as err:
            row["error"] = str(err)
            table.append(f"| {arch} | - | - | {err} | - | - |")
            rows.append(row)
            print(arch, "error:", err, flush=True)
            continue
        asm = next(iter(imm.disassembly.values()), "")
        row.update(immediate=imm.to_json(), immediate_layout=imm.layout(), immediate_asm=asm,
                   register=reg.to_json(), register_layout=reg.layout(), register_values=reg.register_values,
                   register_asm=reg.disassembly)
        rows.append(row)
        table.append(f"| {arch} | {imm.instruction_bits}-bit{', ' + asm.split()[0] if asm else ''} | "
                     f"[{imm.immediate_bits[0]}, {imm.immediate_bits[1]}) | `{imm.layout()}` | "
                     f"[{reg.register_bits[0]}, {reg.register_bits[1]}) | `{reg.layout()}` |")
        print(table[-1], flush=True)
    (out / "sass_probe.json").write_text(json.dumps({**meta, "probes": rows}, indent=2) + "\n")
    (out / "sass_probe.md").write_text(
        f"# `mscred sass probe` across architectures\n\nnvcc {meta['nvcc']}, CUDA {meta['ptxas_cuda12']} ptxas for "
        f"sm_5x..sm_72, {meta['date']}. Command: `.venv/bin/python benchmarks/sass_cpu.py`.\n"
        f"Immediate: template `a[0] = VALUE` (values 0xcc, 0xdecc, 0x12345678, 0x9abcdef1); register: the store "
        f"`a[0] = v3` etc. against `a[0] = 0` (RZ). Bit 0 = least significant bit of the little-endian word; "
        f"128-bit layouts are printed high 64 bits first.\n\n" + "\n".join(table) + "\n")

    source = ROOT / "src" / "mscred" / "ops" / "im2col" / "im2col.cu"
    if source.is_file():
        try:
            cubin = compile_cubin(source, "sm_90", extra=["-O3"])
        except InputError as err:
            print("im2col.cu:", err)
        else:
            summaries = inspect_file(cubin, "im2col.cu (sm_90)")
            (out / "sass_inspect_im2col.json").write_text(
                json.dumps({**meta, "source": "src/mscred/ops/im2col/im2col.cu", "nvcc_flags": "-cubin -arch=sm_90 -O3",
                            "kernels": [s.to_json() for s in summaries]}, indent=2) + "\n")
            (out / "sass_inspect_im2col.txt").write_text(
                f"mscred sass inspect of src/mscred/ops/im2col/im2col.cu built with nvcc {meta['nvcc']} -cubin "
                f"-arch=sm_90 -O3 ({meta['date']})\n\n" + format_summaries(summaries) + "\n")
            print(format_summaries(summaries, top=0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
