"""conv1's weight-gradient loop (``small_conv``'s FLAT form) with Triton's per-loop software pipelining asked for
(``tl.range(..., num_stages=N)``, MSCRED_SMALL_CONV_WGRAD_STAGES=N), compiled for sm_90 on this machine (no GPU
needed: ``tests/sm90_compile.py``): whether its loads become asynchronous copies (LDGSTS) with tiles in flight, or
stay the plain loads (LDG) they are. Usage: PYTHONPATH=src python3 benchmarks/wgrad_loop_stages_sm90.py"""
from __future__ import annotations

import os
import re
import subprocess
import sys

CHILD = r'''
import sys; sys.path.insert(0, "tests")
import torch, sm90_compile
from mscred.ops.triton import small_conv as sc
tile, warps, _, _ = sc.wgrad_launch(3, 32, 3, torch.bfloat16, 30)
cfg = dict(constants=dict(x_sc=1, g_sc=1, g2_sc=1, o_sc=1, SELU=True, HAS_G2=True, **tile),
           pointers={n: "*bf16" for n in ("x_ptr", "g_ptr", "g2_ptr", "o_ptr")}, num_warps=warps)
code = sm90_compile.sass("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", cfg)
shared = sm90_compile.shared_bytes("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", [cfg])[0]
print(tile.get("LOOP_STAGES"), len(code.splitlines()), code.count("LDGSTS"), len(re.findall(r"LDG\.", code)),
      code.count("BAR.SYNC"), shared)
'''


def main() -> None:
    import triton

    print(f"triton {triton.__version__}; sm_90 code of _small_conv_wgrad_kernel (conv1: 3 -> 32, bf16, 30 wide)")
    print("LOOP_STAGES  lines  LDGSTS  LDG  BAR.SYNC  shared bytes")
    for stages in ("", "2", "3", "4"):
        env = {**os.environ, "MSCRED_SMALL_CONV_WGRAD_STAGES": stages, "PYTHONPATH": "src"}
        out = subprocess.run([sys.executable, "-c", "import re\n" + CHILD], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        print(f"{out[0]:>11}  {out[1]:>5}  {out[2]:>6}  {out[3]:>3}  {out[4]:>8}  {out[5]:>12}")


if __name__ == "__main__":
    main()
