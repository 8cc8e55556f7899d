"""The graphed training step under settings of environment switches, in alternation, in one process.

For A/B switches read while the step is built and captured (every ``MSCRED_*`` switch of the training path is):
each variant's GraphedStep is built anew per round with its variables set, timed as ``step_alternation`` times
steps (median of 5 runs of 40 steps), dropped, the next built. Prints and writes DIR/env_ab.md: ms a step per round
and the loss after the timed steps (equal losses: the same arithmetic).

A variant is one variable's value (``--var`` / ``--values``), or several variables at once (``--variant``, repeated):
``--variant off:`` ``--variant all:MSCRED_ENCODER_XH=1,MSCRED_ATTENTION_CAT=1`` -- levers of ~10 us each sit inside
a 4-round spread alone and together do not. A variant's unnamed variables keep the process's own settings.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/env_ab.py --var MSCRED_LSTM_WGRAD_PER_STEP --values 0,1
    [--rounds 3] [--out DIR]
  or: ... env_ab.py --variant NAME:VAR=VALUE,VAR=VALUE --variant NAME2:... [--rounds 3] [--out DIR]
"""
from __future__ import annotations

import argparse
import os

import step_alternation  # noqa: E402
import sweep_report  # noqa: E402


def parse_variants(var: str | None, values: str | None, variants: list[str] | None) -> dict[str, dict[str, str]]:
    """{variant name: {variable: value}} from --var / --values (one variable; '' unsets it) or --variant
    "NAME:VAR=VALUE,..." (several; NAME alone: none set). Exactly one of the two forms; names must differ."""
    if bool(variants) == bool(var or values):
        raise SystemExit("env_ab.py: give --var and --values, or --variant (repeated), not both")
    if not variants:
        if not var or values is None:
            raise SystemExit("env_ab.py: --var needs --values")
        return {f"{var}={v!r}": {var: v} for v in values.split(",")}
    out: dict[str, dict[str, str]] = {}
    for spec in variants:
        name, sep, settings = spec.partition(":")
        if not sep or not name or name in out:
            raise SystemExit(f"env_ab.py: --variant {spec!r}: want NAME:VAR=VALUE,... with a new NAME")
        pairs = {}
        for item in filter(None, settings.split(",")):
            key, eq, value = item.partition("=")
            if not eq or not key:
                raise SystemExit(f"env_ab.py: --variant {spec!r}: {item!r} is not VAR=VALUE")
            pairs[key] = value
        out[name] = pairs
    return out


def apply(settings: dict[str, str], named: set[str], original: dict[str, str | None]) -> None:
    """The environment of one variant: its variables set ('' unsets), every other variable any variant names back
    to its ``original`` value."""
    for key in named:
        value = settings.get(key, original[key])
        if value:
            os.environ[key] = value
        else:
            os.environ.pop(key, None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--var")
    ap.add_argument("--values", help="comma-separated values; '' leaves the variable unset")
    ap.add_argument("--variant", action="append", help="NAME:VAR=VALUE,VAR=VALUE (repeat for each variant)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/env_ab")
    args = ap.parse_args()
    variants = parse_variants(args.var, args.values, args.variant)
    named = {key for settings in variants.values() for key in settings}
    original = {key: os.environ.get(key) for key in named}
    data, device = step_alternation.thesis_data()

    def make(name: str, _round: int):
        apply(variants[name], named, original)
        return step_alternation.graphed_step(data, device)

    failures: dict[str, str] = {}  # a variant that fails leaves the others their rounds (step_alternation)
    times, losses = step_alternation.alternate(make, tuple(variants), args.rounds,
                                               step_alternation.random_batches(len(data), device), failures)
    title = (f"{args.var} = {' / '.join(repr(v) for v in args.values.split(','))}" if args.var else
             " / ".join(f"{name} ({', '.join(f'{k}={v}' for k, v in s.items()) or 'as set'})"
                        for name, s in variants.items()))
    lines = [f"# The graphed step with {title} (env_ab.py)", "", f"{sweep_report.machine_line()}.", ""]
    lines += step_alternation.table(times, losses, failures)
    step_alternation.report(args.out, "env_ab.md", lines)


if __name__ == "__main__":
    main()
