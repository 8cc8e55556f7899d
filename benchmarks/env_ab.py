"""The graphed training step under settings of one environment switch, in alternation, in one process.

For A/B switches read while the step is built and captured (every ``MSCRED_*`` switch of the training path is):
each variant's GraphedStep is built anew per round with the variable set to its value, timed as
``step_alternation`` times steps (median of 5 runs of 40 steps), dropped, the next built. Prints and writes
DIR/env_ab.md: ms a step per round and the loss after the timed steps (equal losses: the same arithmetic).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/env_ab.py --var MSCRED_LSTM_WGRAD_PER_STEP --values 0,1
    [--rounds 3] [--out DIR]
"""
from __future__ import annotations

import argparse
import os

import step_alternation  # noqa: E402
import sweep_report  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--var", required=True)
    ap.add_argument("--values", required=True, help="comma-separated values; '' leaves the variable unset")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default="benchmarks/results/env_ab")
    args = ap.parse_args()
    data, device = step_alternation.thesis_data()

    def make(value: str, _round: int):
        if value:
            os.environ[args.var] = value
        else:
            os.environ.pop(args.var, None)
        return step_alternation.graphed_step(data, device)

    variants = tuple(args.values.split(","))
    times, losses = step_alternation.alternate(make, variants, args.rounds,
                                               step_alternation.random_batches(len(data), device))
    lines = [f"# The graphed step with {args.var} = {' / '.join(repr(v) for v in variants)} (env_ab.py)", "",
             f"{sweep_report.machine_line()}.", ""]
    lines += step_alternation.table({f"{args.var}={v!r}": t for v, t in times.items()},
                                    {f"{args.var}={v!r}": loss for v, loss in losses.items()})
    step_alternation.report(args.out, "env_ab.md", lines)


if __name__ == "__main__":
    main()
