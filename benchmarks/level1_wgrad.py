"""Level 1's ConvLSTM weight gradient alone, as cuDNN runs it in the training step: is it bound by its bytes?

The graphed step computes it as one call over all 5 steps' [x_t, h_{t-1}] rows (640 x 64 x 31 x 31, bf16,
channels-last) and gate gradients (640 x 128 x 30 x 30: 147 MB), ~83 + 7 us (results/step_profile_1204/); split
into two calls of 32 input channels each took 81.9 and 61.9 us (results/step_profile_x_read/). Here each shape is
timed alone (CUDA events, median of 20 after cuDNN's autotuning) with its bytes and FLOPs beside, and the timed calls
run inside an NVTX range "measured" so that Nsight Compute can take exactly them
(``benchmarks/gpu_level1_wgrad_ncu.sh``). Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/level1_wgrad.py
"""
from __future__ import annotations

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)

SHAPES = {  # name: (images, input channels)
    "one call, 64 channels (the product)": (640, 64),
    "x half, 32 channels (the reverted split)": (640, 32),
    "h half, 32 channels, steps 1-4": (512, 32),
}
GATES, H, W = 128, 30, 30


def time_call(n: int, c: int) -> tuple[float, int, float]:
    """(median us, bytes read, GFLOP) of cuDNN's weight gradient of the 2 x 2 convolution of (n, c, H+1, W+1)."""
    fmt = torch.channels_last
    rows = torch.randn(n, c, H + 1, W + 1, device="cuda").to(torch.bfloat16).contiguous(memory_format=fmt)
    grad = torch.randn(n, GATES, H, W, device="cuda").to(torch.bfloat16).contiguous(memory_format=fmt)
    w = torch.empty(GATES, c, 2, 2, device="cuda", dtype=torch.bfloat16).contiguous(memory_format=fmt)

    def call():
        return torch.ops.aten.convolution_backward(grad, rows, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                   [False, True, False])[1]
    for _ in range(3):
        call()
    torch.cuda.synchronize()
    with torch.cuda.nvtx.range("measured"):
        us = step_alternation.median_ms(call, 1, 20) * 1000
    nbytes = (rows.numel() + grad.numel()) * 2
    return us, nbytes, 2 * n * H * W * GATES * c * 4 / 1e9


def main() -> None:
    torch.backends.cudnn.benchmark = True
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}")
    print("| call | us | MB read (at least) | GB/s | GFLOP | TFLOP/s |")
    print("| --- | --- | --- | --- | --- | --- |")
    for name, (n, c) in SHAPES.items():
        us, nbytes, gflop = time_call(n, c)
        print(f"| {name} | {us:.1f} | {nbytes / 1e6:.0f} | {nbytes / us / 1e3:.0f} | {gflop:.1f} | "
              f"{gflop / us * 1e3:.0f} |")


if __name__ == "__main__":
    main()
