"""conv1's weight-gradient loop (``small_conv``'s FLAT form) with N software-pipeline stages
(MSCRED_SMALL_CONV_WGRAD_STAGES=N: the loop as ``tl.range(..., num_stages=N)``; unset: Triton's default, 3),
compiled for sm_90 on this machine (no GPU needed: ``tests/sm90_compile.py``) with the training step's arguments --
strides divisible by 16 as the launch sees them (``aligned``), which is what lets the three 32-channel maps'
loads vectorise: how many asynchronous copies (LDGSTS) and plain loads (LDG) its code holds, and the shared memory
its stages take. The knob lives in e9eac98's ``small_conv.py`` (reverted: more stages ran slower on an H100,
results/conv1_wgrad_stages/); run this against that tree. Usage: PYTHONPATH=src python3
benchmarks/wgrad_loop_stages_sm90.py"""
from __future__ import annotations

import os
import subprocess
import sys

CHILD = r'''
import re, sys; sys.path.insert(0, "tests")
import torch, sm90_compile
from mscred.ops.triton import small_conv as sc
tile, warps, _, _ = sc.wgrad_launch(3, 32, 3, torch.bfloat16, 30)
# the step's strides: x (640, 3, 30, 30) channels-last (its row and pixel strides 90 and 3: not aligned), and the
# three maps (640, 32, 30, 30) inside 31 x 31 bordered buffers (strides 30752, 992, 32)
cfg = dict(constants=dict(x_sc=1, g_sc=1, g2_sc=1, o_sc=1, SELU=True, HAS_G2=True, **tile),
           pointers={n: "*bf16" for n in ("x_ptr", "g_ptr", "g2_ptr", "o_ptr")}, num_warps=warps,
           aligned=["g_sb", "g_sy", "g_sx", "g2_sb", "g2_sy", "g2_sx", "o_sb", "o_sy", "o_sx"])
code = sm90_compile.sass("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", cfg)
shared = sm90_compile.shared_bytes("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", [cfg])[0]
loads = sorted(set(re.findall(r"LDG\.[A-Z0-9.]*", code)))
print(tile.get("LOOP_STAGES"), len(code.splitlines()), code.count("LDGSTS"),
      "/".join(f"{name} x{len(re.findall(re.escape(name) + r'[ ;]', code))}" for name in loads), shared)
'''


def main() -> None:
    import triton

    print(f"triton {triton.__version__}; sm_90 code of _small_conv_wgrad_kernel (conv1: 3 -> 32, bf16, 30 wide)")
    print("stages  lines  LDGSTS  plain loads  shared bytes")
    for stages in ("", "2", "3", "4", "5"):
        env = {**os.environ, "MSCRED_SMALL_CONV_WGRAD_STAGES": stages, "PYTHONPATH": "src"}
        out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                             check=True).stdout.split()
        print(f"{out[0]:>6}  {out[1]:>5}  {out[2]:>6}  {out[3] + ' ' + out[4]:>11}  {out[5]:>12}")


if __name__ == "__main__":
    main()
