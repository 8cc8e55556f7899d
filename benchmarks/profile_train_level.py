"""One ConvLSTM level's training forward and backward at batch 128 (bf16), for Nsight Compute (gpu_cell_ncu.sh).

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/profile_train_level.py CH SIZE
Runs ``convlstm_train`` and ``convlstm_train_backward`` three times on ``bench_train_cells.level_inputs(CH, SIZE)``
(the first compiles).
"""
from __future__ import annotations

import sys

import torch

from bench_train_cells import level_inputs  # noqa: E402 (benchmarks/ is the script's own folder)


def main() -> None:
    from mscred.ops.triton import convlstm as fused

    ch, n = int(sys.argv[1]), int(sys.argv[2])
    x, w, b, dout = level_inputs(ch, n)
    xp, w_x, w_h = fused.train_inputs(x, w)
    for _ in range(3):
        state = fused.convlstm_train(xp, w_x, w_h, b, 1.0, "nhwc")
        fused.convlstm_train_backward(dout, xp, w_x, w_h, b, *state[1:], 1.0, "nhwc")
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
