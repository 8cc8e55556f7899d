"""The fused bf16 training step under Triton's CPU interpreter against the float32 reference, per parameter.

Why: the interpreter computed bf16 ``tl.dot`` and float operators on bf16's bit patterns and truncated float32 ->
bf16 (triton-lang/triton#11584); ``tests/conftest.py`` makes its bf16 the GPU's. This script is the evidence for
the numbers ``tests/test_interpreter_bf16.py`` and ``docs/development.md`` quote: each gradient's relative error
against the float32 reference backend, for the fused bf16 step and for the reference backend's own bf16 step
(autocast), at the test's sizes (n = 12, channels 4/8/8/16, the concatenated ConvLSTM at levels 1-2). With
``--truncating-casts`` the interpreter keeps its own float32 -> bf16 casts (the arithmetic patch still on); with
``--unpatched`` its own bf16 throughout, as the CPU tests ran before 2026-12-05.

Usage (CPU): ``.venv/bin/python benchmarks/interpreter_bf16_errors.py [--truncating-casts | --unpatched]
[--out DIR]``
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: the kernels run under the interpreter
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

_PATCHED = ("cast_impl", "create_fp_to_fp", "create_dot", "binary_op", "unary_op")  # (conftest's, casts first)
_OWN = {name: getattr(interpreter.InterpreterBuilder, name) for name in _PATCHED}
import conftest  # noqa: E402,F401  (its interpreter patches, applied at import)
from model_runs import small_cpu_step as step  # noqa: E402  (the step tests/test_interpreter_bf16.py runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--truncating-casts", action="store_true")
    ap.add_argument("--unpatched", action="store_true", help="the interpreter's own bf16 throughout")
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/interpreter_bf16"))
    args = ap.parse_args()
    restored = _PATCHED if args.unpatched else _PATCHED[:2] if args.truncating_casts else ()
    for name in restored:  # the interpreter's own (--truncating-casts: its casts only, conftest's arithmetic kept)
        setattr(interpreter.InterpreterBuilder, name, _OWN[name])
    torch.set_num_threads(1)
    (ref_loss, ref), (yard_loss, yard), (fused_loss, fused) = (
        step("reference", False), step("reference", True), step("fused", True))

    def rel(got, want):
        return ((got - want).norm() / want.norm()).item()
    flag = " --unpatched" if args.unpatched else " --truncating-casts" if args.truncating_casts else ""
    setting = {"": "bf16 arithmetic as the GPU's, nearest-even casts (conftest)",
               " --truncating-casts": "bf16 arithmetic as the GPU's, the interpreter's truncating casts",
               " --unpatched": "the interpreter's own bf16 throughout (bit patterns multiplied and added)"}[flag]
    name = {"": "README.md", " --truncating-casts": "truncating_casts.md", " --unpatched": "unpatched.md"}[flag]
    lines = ["# The fused bf16 step under the CPU interpreter against the float32 reference", "",
             f"{setting}. torch {torch.__version__}. Command: `.venv/bin/python "
             f"benchmarks/interpreter_bf16_errors.py{flag}`.", "",
             f"Loss: float32 reference {ref_loss.item():.6f}, reference bf16 {yard_loss.item():.6f}, fused bf16 "
             f"{fused_loss.item():.6f}.",
             "", "| parameter | fused bf16 | reference bf16 | ratio |", "| --- | --- | --- | --- |"]
    worst = 0.0
    for k, want in ref.items():
        ours, theirs = rel(fused[k], want), rel(yard[k], want)
        worst = max(worst, ours)
        lines.append(f"| {k} | {ours:.4f} | {theirs:.4f} | {ours / theirs:.2f} |")
    lines += ["", f"Worst fused error {worst:.4f}; worst reference bf16 error "
              f"{max(rel(yard[k], ref[k]) for k in ref):.4f}."]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
