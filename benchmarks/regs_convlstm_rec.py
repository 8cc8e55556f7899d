"""Registers and spills of the implicit-GEMM recurrent ConvLSTM kernel, compiled ahead of time for sm_90a on a CPU box.

No GPU needed: Triton compiles ``_rec_cell_kernel`` for a Hopper target (GPUTarget("cuda", 90, ...)), and the
ptxas Triton ships reports registers and spill stores of the PTX. Channel strides are compiled as the constant 1
(the channels-last buffers: what Triton's JIT specialises them to at run time); other strides and sizes as plain
integers (the JIT may also specialise some on divisibility by 16, so this is a slight overestimate). Also printed:
shared memory, and whether the dots became wgmma (Hopper warp-group MMA) or mma.sync.

    .venv/bin/python benchmarks/regs_convlstm_rec.py                 # the bench's configs, levels 1 and 2, bf16+fp32
"""
from __future__ import annotations

import argparse
import inspect
import os
import re
import subprocess
import sys
import tempfile


def main() -> int:
    if os.environ.get("TRITON_INTERPRET") == "1":
        print("unset TRITON_INTERPRET: the kernel must be compiled, not interpreted", file=sys.stderr)
        return 2
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    sys.path.insert(0, os.path.dirname(__file__))
    from bench_convlstm_rec import CONFIGS, fits
    from mscred.ops.triton import convlstm_fused_rec as rec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kernel", type=int, default=2)
    ap.add_argument("--channels", default="32,64")
    ap.add_argument("--dtypes", default="bf16,fp32")
    args = ap.parse_args()
    nvbin = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
    # the bundled "ptxas" may be older than the PTX version Triton emits; the Blackwell one reads it and targets sm_90a
    ptxas = next(p for p in (os.path.join(nvbin, n) for n in ("ptxas-blackwell", "ptxas")) if os.path.exists(p))
    kern = rec._rec_cell_kernel
    names = list(inspect.signature(kern.fn).parameters)
    const = {"CH", "KS", "STORE_PRE", "WRITE_HP", "UPCAST", "ONE_DOT", "CDT", "DOT_PREC",
             "BLOCK_P", "BLOCK_C", "BLOCK_K"}
    print("| dtype | Ch | k | blocks (P, C, K, warps) | stages | registers | spill stores (B) | shared (B) | MMA |")
    print("|---|---|---|---|---|---|---|---|---|")
    for dt in args.dtypes.split(","):
        for ch in (int(c) for c in args.channels.split(",")):
            for cfg in CONFIGS:
                if not fits(cfg, ch):
                    continue
                bp, bc, bk, warps = cfg[:4]
                one = len(cfg) > 4 and bool(cfg[4])
                sig, cx = {}, {}
                for n in names:
                    if n in const or n.endswith("_sc"):
                        sig[n] = "constexpr"
                    elif n == "w_desc":
                        sig[n] = f"tensordesc<{dt}[{bk}, {4 * bc if one else bc}]>"
                    elif n.endswith("_ptr"):
                        sig[n] = "*fp32" if n in ("cprev_ptr", "c_ptr", "bias_ptr") else f"*{dt}"
                    elif n == "forget_bias":
                        sig[n] = "fp32"
                    else:
                        sig[n] = "i64" if n[-3:] in ("_sb", "_sy", "_sx") else "i32"
                    if n.endswith("_sc"):
                        cx[n] = 1
                cx.update(CH=ch, KS=args.kernel, STORE_PRE=False, WRITE_HP=False, UPCAST=False, ONE_DOT=one,
                          CDT=tl.float32,
                          DOT_PREC="tf32" if dt == "fp32" else "ieee", BLOCK_P=bp, BLOCK_C=bc, BLOCK_K=bk)
                stages = rec.num_stages((bp, bc, bk), 2 if dt == "bf16" else 4, ch)
                src = ASTSource(fn=kern, signature=sig, constexprs={(names.index(n),): v for n, v in cx.items()})
                c = triton.compile(src, target=GPUTarget("cuda", 90, 128), options={"num_warps": warps,
                                                                                "num_stages": stages})
                ptx = c.asm["ptx"]
                with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
                    f.write(ptx)
                    f.flush()
                    rep = subprocess.run([ptxas, "-arch=sm_90a", "-v", f.name, "-o", os.devnull],
                                         capture_output=True, text=True).stderr
                regs = re.search(r"Used (\d+) registers", rep)
                spill = re.search(r"(\d+) bytes spill stores", rep)
                mma = "wgmma" if "wgmma" in ptx else "mma.sync" if "mma.sync" in ptx else "none"
                print(f"| {dt} | {ch} | {args.kernel} | {tuple(cfg)} | {stages} | {regs.group(1) if regs else '?'} | "
                      f"{spill.group(1) if spill else '?'} | {c.metadata.shared} | {mma} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
