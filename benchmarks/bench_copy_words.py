"""``padding.copy_pixels`` in 16-byte words against 8-byte words and PyTorch's own copy, at the training step's calls.

Why: the graphed bf16 step spends ~100 us in copies (results/step_profile_1202/), most of them ``copy_pixels`` in
8-byte words: levels 1-2's inputs into the concatenated [x, h] buffer (27.3 us at level 1: 78.7 MB moved, 2.9 TB/s,
against the card's 4.26 TB/s copy rate), each step's dx out of the transposed convolution's [dx, dh], the
decoder's skip halves. A 16-byte word (complex128, moved without arithmetic) halves the elements again.

Each (call, variant): 10 copies captured in a CUDA graph, cycling over 8 source / destination pairs (more than the
50 MB L2 holds at the large calls), median of 30 replays; bytes read + written over that time against the copy rate;
every variant's destination bit-equal to PyTorch's ``copy_`` of the same random bits (NaN payloads included).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/bench_copy_words.py [--out DIR]
Writes DIR/copy_words.md and .json (DIR: benchmarks/results/copy_words).
"""
from __future__ import annotations

import argparse
import os

import torch

import sweep_report  # noqa: E402 (benchmarks/ is the script's own folder)
from bench_train_cells import graph_ms  # noqa: E402

COPY_TB_S = 4.26  # the H200's measured device-to-device copy rate (README, the bench table's floor row)
PAIRS, CALLS = 8, 10
# (label, destination's buffer shape, its channel slice, source's buffer shape, its channel slice): bf16,
# channels-last, at batch 128 x 5 steps
CALLS_OF_STEP = (
    ("level 1: x into xh", (640, 64, 31, 31), (0, 32), (640, 32, 31, 31), (0, 32)),
    ("level 2: x into xh", (640, 128, 16, 16), (0, 64), (640, 64, 16, 16), (0, 64)),
    ("level 1: dx out of [dx, dh], a step", (128, 32, 31, 31), (0, 32), (128, 64, 31, 31), (0, 32)),
    ("level 2: dx out of [dx, dh], a step", (128, 64, 16, 16), (0, 64), (128, 128, 16, 16), (0, 64)),
    ("decoder skip half, level 1", (128, 64, 30, 30), (32, 64), (128, 32, 30, 30), (0, 32)),
    ("decoder skip half, level 3", (128, 256, 8, 8), (128, 256), (128, 128, 8, 8), (0, 128)),
)
VARIANTS = (("torch copy_", None), ("8-byte words", "8"), ("16-byte words (default)", ""))


def _slice(shape, channels):
    buf = torch.empty(shape, device="cuda", dtype=torch.bfloat16, memory_format=torch.channels_last)
    return buf[:, channels[0]:channels[1]]


def make_pairs(dst_shape, dst_ch, src_shape, src_ch, pairs: int = PAIRS):
    """``pairs`` (dst, src) views; every source filled with random bits (any bf16 pattern)."""
    torch.manual_seed(0)
    made = []
    for _ in range(pairs):
        dst, src = _slice(dst_shape, dst_ch), _slice(src_shape, src_ch)
        src.copy_(torch.randint(-2 ** 15, 2 ** 15, src.shape, device="cuda", dtype=torch.int32).to(torch.int16)
                  .view(torch.bfloat16))
        made.append((dst, src))
    return made


def copies(pairs, cap, n: int = CALLS):
    """A function making ``n`` copies cycling over ``pairs``: ``copy_`` (cap None) or ``copy_pixels`` with
    MSCRED_COPY_WORD_BYTES=cap (read when each copy is issued: set during capture)."""
    from mscred.ops.padding import copy_pixels

    def run():
        for i in range(n):
            dst, src = pairs[i % len(pairs)]
            if cap is None:
                dst.copy_(src)
            else:
                copy_pixels(dst, src)
    return run


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.permute(0, 2, 3, 1).contiguous().view(torch.int16)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/copy_words")
    args = ap.parse_args()
    from mscred.ops.padding import word_dtype

    rows = []
    for label, dst_shape, dst_ch, src_shape, src_ch in CALLS_OF_STEP:
        pairs = make_pairs(dst_shape, dst_ch, src_shape, src_ch)
        moved = pairs[0][1].numel() * 2 * 2  # bytes of one copy: read + written, bf16
        first = None
        for name, cap in VARIANTS:
            saved = os.environ.pop("MSCRED_COPY_WORD_BYTES", None)
            os.environ["MSCRED_COPY_WORD_BYTES"] = cap or ""
            try:
                word = str(word_dtype(*pairs[0])).replace("torch.", "") if cap is not None else "bf16"
                ms = graph_ms(copies(pairs, cap)) / CALLS
                dst, src = pairs[0]
                dst.zero_()
                copies(pairs[:1], cap, 1)()
                same = bool(torch.equal(bits(dst), bits(src)))
            finally:
                os.environ.pop("MSCRED_COPY_WORD_BYTES", None)
                if saved is not None:
                    os.environ["MSCRED_COPY_WORD_BYTES"] = saved
            first = first or ms
            rows.append(dict(call=label, shape=list(src.shape), variant=name, word=word, us=round(ms * 1e3, 2),
                             tb_s=round(moved / ms / 1e9, 2), of_copy=round(moved / ms / 1e9 / COPY_TB_S, 3),
                             speedup=round(first / ms, 3), bit_equal=same))
            print(rows[-1], flush=True)
    meta = sweep_report.machine_line() + ". Command: `PYTHONPATH=src python3 benchmarks/bench_copy_words.py`."
    lines = ["# copy_pixels' word width at the training step's copies", "", meta, "",
             f"{CALLS} copies a CUDA graph over {PAIRS} source / destination pairs, median of 30 replays; bf16, "
             "channels-last views. Bytes: read + written; copy rate 4.26 TB/s.", "",
             "| call | (N, C, H, W) | variant | word | us a copy | TB/s | of copy rate | vs torch copy_ | bit-equal |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    lines += [f"| {r['call']} | {tuple(r['shape'])} | {r['variant']} | {r['word']} | {r['us']} | {r['tb_s']} "
              f"| {r['of_copy']:.0%} | {r['speedup']:.2f}x | {r['bit_equal']} |" for r in rows]
    sweep_report.write(args.out, "copy_words", meta, rows, lines)


if __name__ == "__main__":
    main()
