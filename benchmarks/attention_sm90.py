"""Compile the temporal attention's kernels (``attention.py``, ``attention_last.py``) for sm_90 on a CPU machine:
registers, spills and SASS instructions.

As ``triton_sm90.py`` for the cell kernels (same ``compile_kernel``; this machine's Triton, whose counts can differ
from the H200's Triton 3.6 by a few registers): to compare two trees' kernels without a GPU, e.g. a refactor's.
bf16 h / dout / dh, float32 partials, the training defaults' tiles (one program per sample: 1024 x 8 warps forward,
1024 x 16 backward; split: 1024 x 4 warps), T_PAD 8, pointers 16-byte aligned and integers divisible by 16.

Usage: ``.venv/bin/python benchmarks/attention_sm90.py [--src SRC]`` (SRC: another tree's ``src`` folder).
"""
from __future__ import annotations

import re

import triton.language as tl

import triton_sm90 as T  # noqa: E402 (benchmarks/ is the script's own folder; it also puts --src on sys.path)
from mscred.ops.triton import attention as A  # noqa: E402
from mscred.ops.triton import attention_last as L  # noqa: E402

COMMON = dict(CDT=tl.float32, T_PAD=8, BLOCK=1024)
H, DOUT, DH, OUT, PART = ("h_ptr", "*bf16"), ("dout_ptr", "*bf16"), ("dh_ptr", "*bf16"), ("out_ptr", "*bf16"), \
    ("part_ptr", "*fp32")
KERNELS = {
    "fwd": (A._attn_fwd_kernel, [H, OUT], dict(COMMON, SLICED=False, _warps=8)),
    "fwd sliced": (A._attn_fwd_kernel, [H, OUT], dict(COMMON, SLICED=True, _warps=8)),
    "bwd": (A._attn_bwd_kernel, [H, DOUT, DH], dict(COMMON, _warps=16)),
    "split fwd": (A._attn_fwd_split_kernel, [H, PART, OUT], dict(COMMON, NCHUNK_PAD=8, SLICED=False, _warps=4)),
    "split bwd": (A._attn_bwd_split_kernel, [H, DOUT, PART, ("dpart_ptr", "*fp32"), DH],
                  dict(COMMON, NCHUNK_PAD=8, _warps=4)),
}
# The first split kernel, each direction: at the split's tile; MSCRED_ATTN_PARTIAL_TILE=1024/8 (4 elements a thread
# instead of 8); MSCRED_ATTN_LAST_APART=1 at T = 5 (the four earlier steps' tile, the last step apart).
for suffix, warps, apart in (("", 4, False), (", 8 warps", 8, False), (", last apart", 4, True)):
    for direction, with_dout in (("forward", False), ("backward", True)):
        KERNELS[f"split partial ({direction}){suffix}"] = (
            A._attn_partial_kernel, [H, DOUT, PART],
            dict(COMMON, WITH_DOUT=with_dout, LAST_APART=apart, ROWS=4 if apart else 1, SCORES=True, _warps=warps))
# The backward's first kernel with the forward's scores saved (the default; MSCRED_ATTN_SAVED_SCORES=0 recomputes
# them): <H_k, dout> alone.
KERNELS["split partial (backward), saved scores"] = (
    A._attn_partial_kernel, [H, DOUT, PART], dict(COMMON, WITH_DOUT=True, LAST_APART=False, ROWS=1, SCORES=False,
                                                  _warps=4))
# The attention's backward cut to the last step's map and the coefficients (attention_last.py: level 1's fold).
DLAST, COEF = ("dlast_ptr", "*bf16"), ("coef_ptr", "*fp32")
KERNELS["last step"] = (L._attn_last_kernel, [H, DOUT, DLAST, COEF], dict(COMMON, _warps=16))
KERNELS["split last step"] = (L._attn_last_split_kernel, [H, DOUT, PART, ("dpart_ptr", "*fp32"), DLAST, COEF],
                              dict(COMMON, NCHUNK_PAD=8, _warps=4))


def main() -> None:
    print(f"{A.__file__}\n\n| kernel | resources | SASS instructions |\n| --- | --- | --- |")
    for name, (fn, pointers, constexprs) in KERNELS.items():
        cubin = T.compile_kernel(fn, dict(pointers), dict(constexprs)).asm["cubin"]
        count = len(re.findall(r"^\s+/\*[0-9a-f]{4,}\*/", T.sass(cubin), re.M))
        print(f"| {name} | {T.resource_usage(cubin)} | {count} |")


if __name__ == "__main__":
    main()
