"""One ConvLSTM level's bf16 inference at the scoring batch, run twice (compile, then the call to profile): the
target of Nsight Compute in ``gpu_window_lstm_ncu.sh``, which reads where the per-window kernel's time goes (HBM
bytes, L2 hit rate, occupancy) against the per-step path's cell kernel.

Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/profile_window_lstm.py CH N [--attention]
(MSCRED_WINDOW_LSTM / MSCRED_WINDOW_LSTM_BLOCKS choose the path and tile, as in the product; --attention: the level
with its attention, as the model calls it, so the resident kernel with the attention's epilogue where it runs).
"""
from __future__ import annotations

import sys

import torch

sys.path.insert(0, "benchmarks")
from bench_window_lstm import SCORING_WINDOWS, level_inputs  # noqa: E402


def main() -> None:
    from mscred.ops.lstm_attention import resident_attention
    from mscred.ops.triton import convlstm as fused
    ch, n = int(sys.argv[1]), int(sys.argv[2])
    attention = "--attention" in sys.argv[3:]
    x, w, b = level_inputs(ch, n, SCORING_WINDOWS, sliding=True)
    for _ in range(2):
        with torch.no_grad():
            if not (attention and resident_attention(x, w, b, 1.0) is not None):
                fused.convlstm(x, w, b, 1.0)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
