"""How much would the graphed step gain without the ConvLSTM's input copies? An upper bound, not a product path.

On the concatenated-gates path (``ops/triton/convlstm_concat.py``) each of levels 1-2 copies its encoder output
into the x half of its [x_t, h_{t-1}] buffer before the first step: 27.3 us at level 1 and 11.5 us at level 2 in
the eager step's profile (``results/step_profile_1204/``), on the chain. Removing them for real means a step
kernel reading x and h from two buffers (and the weight gradient split in two). Before that work, this measures
what it could give: the same graphed step captured with those copies left out (the buffer's x half then holds
whatever the allocator left there: the losses are meaningless, the timings are what the bound is about).

Variants, in alternation (``step_alternation.py``): ``default``; ``no_l1_copy`` (level 1's copy left out);
``no_l1_l2_copy`` (both levels'). Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bound_copies.py --out DIR
"""
from __future__ import annotations

import argparse

import step_alternation  # noqa: E402
import sweep_report  # noqa: E402
from mscred.ops.triton import convlstm_concat

SKIPPED_CHANNELS = {"default": (), "no_l1_copy": (32,), "no_l1_l2_copy": (32, 64)}


def make(variant: str, data, device):
    """The product's GraphedStep, captured with the chosen levels' input copies left out."""
    real = convlstm_concat.copy_pixels
    steps_times_batch = 5 * step_alternation.BATCH

    def copy_unless_skipped(dst, src):  # the forward's copy is the one into all T * B images' x halves
        if not (dst.shape[0] == steps_times_batch and dst.shape[1] in SKIPPED_CHANNELS[variant]):
            real(dst, src)

    convlstm_concat.copy_pixels = copy_unless_skipped
    try:
        return step_alternation.graphed_step(data, device)
    finally:
        convlstm_concat.copy_pixels = real


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/bound_copies")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    data, device = step_alternation.thesis_data()
    times, losses = step_alternation.alternate(lambda v, r: make(v, data, device), tuple(SKIPPED_CHANNELS),
                                               args.rounds, step_alternation.random_batches(len(data), device))
    lines = ["# The graphed step without levels 1-2's input copies: an upper bound (bound_copies.py)", "",
             f"{sweep_report.machine_line()}.", ""] + step_alternation.table(times, losses)
    step_alternation.report(args.out, "bound_copies.md", lines)


if __name__ == "__main__":
    main()
