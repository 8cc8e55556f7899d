"""The default epilogue kernels' sm_90 code in this tree against another revision's: is it the same?

Why: the copy levers of 2026-12-04 (``ops/encoder_xh.py``, ``ops/attention_cat.py``) gave bias + SELU and conv1's
small convolution second-output variants. Those are kernels of their own, which share the default kernels' bodies,
so that the default kernels keep their arguments and code. This script is the evidence for that claim: it compiles
the default forward and backward kernels at the training step's shapes for sm_90 on this CPU machine
(``tests/sm90_compile.py``), in this tree and in ``--before``'s ``src`` (extracted with ``git archive``), and
tables each kernel's SASS instruction count and registers per thread for both.

Since 2026-12-05 it also tables the small convolution's weight-gradient kernels and deconv1's gather (which
``ops/triton/small_deconv.py`` gave variants of the same kind), and with ``--moved-lines`` a third column: the
``--before`` tree with two comment lines added inside ``_small_conv_wgrad_kernel``'s body and nothing else -- a
kernel's sm_90 code follows its source lines (``docs/sass.md``), so a difference between the trees that this column
shows too is line numbers, not the change. Every tree compiles into a fresh Triton cache of its own.

Usage: ``.venv/bin/python benchmarks/epilogue_sm90.py [--before REV] [--moved-lines] [--out DIR]``
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def configs() -> dict[str, tuple[str, str, dict]]:
    """name -> (module, kernel, sm90_compile configuration) of each default kernel, at a training-step shape: bf16,
    channels-last, SELU; the bias + SELU forward at level 2's bordered 16 x 16 map (64 channels), its backward at
    the decoder's level 1 (32 channels, with a crop) and at the encoder's shared buffer (a second gradient), conv1's
    forward (3 -> 32, bordered)."""
    from mscred.ops.triton import bias_act as ba
    from mscred.ops.triton import small_conv as sc
    import torch

    fwd_p, fwd_c, _ = ba._launch(640 * 16 * 16, 64, 1, ba.FWD_BLOCK)
    fwd = dict(y_sc=1, o_sc=1, SELU=True, CDT="tl.float32", BLOCK_P=fwd_p, BLOCK_C=fwd_c, SHUFFLE=1, BORDER=True)
    fwd_pointers = dict(y_ptr="*bf16", o_ptr="*bf16", b_ptr="*fp32")
    bwd_p, bwd_c, _ = ba._launch(128 * 32 * 32, 32, ba.BWD_TILES, ba.BWD_BLOCK)
    bwd = dict(g_sc=1, g2_sc=1, o_sc=1, d_sc=1, SELU=True, CDT="tl.float32", BLOCK_P=bwd_p, BLOCK_C=bwd_c,
               TILES=ba.BWD_TILES, HWO=32 * 32, WO=32)
    bwd_pointers = {p: "*bf16" for p in ("g_ptr", "g2_ptr", "o_ptr", "d_ptr")}
    bias_act, small_conv = "mscred.ops.triton.bias_act", "mscred.ops.triton.small_conv"
    return {
        "bias + SELU forward, sizes as constants": (bias_act, "_bias_act_fwd_const_kernel", dict(
            constants=dict(fwd, HWO=16 * 16, WO=16), pointers=fwd_pointers, num_warps=ba.FWD_WARPS)),
        "bias + SELU forward, sizes at run time": (bias_act, "_bias_act_fwd_kernel", dict(
            constants=fwd, pointers=fwd_pointers, num_warps=ba.FWD_WARPS)),
        "bias + SELU backward, a crop": (bias_act, "_bias_act_bwd_const_kernel", dict(
            constants=dict(bwd, BORDER=True, HAS_G2=False), pointers=bwd_pointers, num_warps=ba.BWD_WARPS)),
        "bias + SELU backward, two gradients": (bias_act, "_bias_act_bwd_const_kernel", dict(
            constants=dict(bwd, BORDER=False, HAS_G2=True), pointers=bwd_pointers, num_warps=ba.BWD_WARPS)),
        "conv1 forward (3 -> 32, bordered)": (small_conv, "_small_conv_fwd_kernel", dict(
            constants=dict(x_sc=1, o_sc=1, SELU=True, HAS_BIAS=True, BORDER=True,
                           **sc.fwd_constants(3, 32, 3, torch.bfloat16)),
            pointers=dict(x_ptr="*bf16", w_ptr="*bf16", o_ptr="*bf16"), num_warps=sc.FWD_WARPS)),
        **small_conv_configs(),
    }


def small_conv_configs() -> dict[str, tuple[str, str, dict]]:
    """The small convolution's weight gradient (conv1: flat, two gradients; deconv1: taps-in-N) and deconv1's
    forward gather, at the training step's shapes (bf16, 30 x 30)."""
    from mscred.ops.triton import small_conv as sc
    import torch

    result = {}
    for name, ci, co, g2 in (("conv1 weight gradient (flat, two gradients)", 3, 32, True),
                             ("deconv1 weight gradient (taps-in-N)", 64, 3, False)):
        tile, warps, _, _ = sc.wgrad_launch(ci, co, 3, torch.bfloat16, 30)
        result[name] = ("mscred.ops.triton.small_conv", "_small_conv_wgrad_kernel", dict(
            constants=dict(x_sc=1, g_sc=1, g2_sc=1, o_sc=1, SELU=True, HAS_G2=g2, **tile),
            pointers={p: "*bf16" for p in ("x_ptr", "g_ptr", "g2_ptr", "o_ptr")}, num_warps=warps))
    result["deconv1 forward gather (taps sum)"] = ("mscred.ops.triton.small_conv_taps", "_taps_sum_kernel", dict(
        constants=dict(CO=3, CO_PAD=4, KS=3, COLUMNS=32, SELU=True, HAS_BIAS=True, BLOCK_P=256, o_sc=1),
        pointers=dict(y_ptr="*fp32", b_ptr="*fp32", o_ptr="*bf16"), num_warps=4))
    return result


def measure() -> dict[str, list[int]]:
    """name -> [SASS instructions, registers per thread] of each of ``configs``, for the ``mscred`` on sys.path."""
    sys.path.insert(0, str(ROOT / "tests"))
    import sm90_compile

    result = {}
    for name, (module, kernel, config) in configs().items():
        code = sm90_compile.compiled_code(module, kernel, config)
        instructions = [ln for ln in code["listing"].splitlines() if re.match(r"\s+/\*[0-9a-f]{4,}\*/", ln)]
        result[name] = [len(instructions), code["registers"]]
    return result


def measure_tree(src: Path) -> dict[str, list[int]]:
    """``measure`` in a process whose ``mscred`` is ``src``'s, compiling into a fresh Triton cache."""
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
               "TRITON_CACHE_DIR": cache}
        out = subprocess.run([sys.executable, __file__, "--child"], env=env, check=True, capture_output=True,
                             text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def with_moved_lines(src: Path, into: Path) -> Path:
    """A copy of the tree ``src`` (its ``src`` folder) with two comment lines added at the top of
    ``_small_conv_wgrad_kernel``'s body (after its docstring), nothing else changed."""
    if into.exists():
        shutil.rmtree(into)
    shutil.copytree(src, into)
    path = into / "mscred" / "ops" / "triton" / "small_conv.py"
    text = path.read_text()
    start = text.index("def _small_conv_wgrad_kernel(")
    doc_end = text.index('"""', text.index('"""', start) + 3) + 3
    comment = "\n        # two comment lines that only move the body's lines\n        # (benchmarks/epilogue_sm90.py)"
    path.write_text(text[:doc_end] + comment + text[doc_end:])
    return into


def main() -> None:
    if "--child" in sys.argv:
        print(json.dumps(measure()))
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default="fae659a", help="the revision to compare with (default: fae659a, the tree "
                    "before the second outputs)")
    ap.add_argument("--moved-lines", action="store_true",
                    help="a third column: --before's tree with two comment lines in the weight gradient's body")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/epilogue_sm90"))
    args = ap.parse_args()
    rev = subprocess.run(["git", "rev-parse", "--short", args.before], cwd=ROOT, check=True, capture_output=True,
                         text=True).stdout.strip()
    before = ROOT / "build" / f"src_{rev}"
    if not before.exists():
        before.mkdir(parents=True)
        archive = subprocess.run(["git", "archive", rev, "src"], cwd=ROOT, check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(before)], input=archive, check=True)
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, check=True, capture_output=True,
                          text=True).stdout.strip()
    old, new = measure_tree(before / "src"), measure_tree(ROOT / "src")
    moved = measure_tree(with_moved_lines(before / "src", ROOT / "build" / f"src_{rev}_moved")) \
        if args.moved_lines else None
    flag = " --moved-lines" if moved else ""
    lines = [f"# The default kernels' sm_90 code: {rev} against this tree ({head})", "",
             "sm_90 code compiled by Triton on the CPU machine (`tests/sm90_compile.py`; this machine's Triton, not "
             "the H200's 3.6, so compare the columns, not the device), each tree into a fresh cache. Command: "
             f"`.venv/bin/python benchmarks/epilogue_sm90.py --before {rev}{flag}`.", ""]
    head_row = f"| kernel | {rev}: instructions, registers | this tree | the same |"
    rule = "| --- | --- | --- | --- |"
    if moved:
        head_row += f" {rev}, two comment lines in the weight gradient's body |"
        rule += " --- |"
    lines += [head_row, rule]
    for name in new:
        row = (f"| {name} | {old[name][0]}, {old[name][1]} | {new[name][0]}, {new[name][1]} | "
               f"{'yes' if old[name] == new[name] else 'NO'} |")
        if moved:
            row += f" {moved[name][0]}, {moved[name][1]} |"
        lines.append(row)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "README.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
