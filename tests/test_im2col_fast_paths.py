"""The whole-plane 2 x 2 patch kernels behind the "implicit-pipe" variant, against float64 ``F.conv2d`` (CUDA only).

``implicit_pipelined_forward`` (im2col.cu) sends every 2 x 2, stride-2 convolution of an 8 x 8 input without
top/left padding whose channel count is a multiple of 8 (conv4 of the encoder at n = 30, conv3 at n = 16) to
``conv_patch_wgmma`` where the extension is built for sm_90a (H100/H200: 4 images x 128 channels per block, wgmma
with tensor-map copies), else to ``conv_patch``: tiles of 10 whole images (5 at small batches) x 128 output
channels, whole channel planes copied 16 bytes at a time, the im2col order made in the fragment loads; both are
checked (test_patch_kernel_choice forces each). The encoder tests in test_ops_im2col.py use
n = 5, 16 and 55, which reach it only through conv3 at n = 16, so these tests cover conv4 at n = 30 and the tails
the kernel has (images past the batch in the last tile, output channels past the last 128, both tile choices),
with and without bias and SELU, the propagation of a NaN input, an unused bottom/right padding, and a misaligned
input (which the kernel declines); and conv3's kernel for 15 x 15 inputs (``conv_patch_pad``) at both its tiles and
their tails, a NaN on its last row and column; then the halo kernels for conv1 and conv2. TF32 forward: relative RMS
error against float64 at most 1.5e-3 (as test_ops_im2col.py).
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from mscred.ops import im2col

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="needs a CUDA device (this kernel exists only in the CUDA build)")

FLOOR_TF32 = 1.5e-3


def _inputs(batch, cin, cout, size, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, cin, size, size, generator=g, dtype=torch.float64)
    w = torch.randn(cout, cin, 2, 2, generator=g, dtype=torch.float64) / (2 * cin ** 0.5)
    b = torch.randn(cout, generator=g, dtype=torch.float64) * 0.5
    return [t.cuda() for t in (x, w, b)]


def _oracle(x, w, b, pad, selu):
    top, bottom, left, right = pad
    y = F.conv2d(F.pad(x.double(), (left, right, top, bottom)), w.double(), None if b is None else b.double(),
                 stride=2)
    return F.selu(y) if selu else y


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _run(x, w, b, pad, selu):
    # NaN in the blocks the caching allocator hands out next: an output the kernel never wrote fails the check
    torch.full((x.shape[0] * w.shape[0] * 64,), float("nan"), device="cuda")
    return im2col.conv2d_implicit_pipelined(x.float(), w.float(), None if b is None else b.float(), 2, pad, selu)


# (batch, cin, cout): conv4's channels at batch 640 (the 10-image tile, one wave), 7 and 643 (image tails; 7 takes
# the 5-image tile), conv3's at n = 16; 2 K-steps only; a channel tail (136 = 128 + 8); no bias; no SELU.
@pytest.mark.parametrize("batch, cin, cout, has_bias, selu", [
    (640, 128, 256, True, True), (643, 128, 256, True, True), (7, 128, 256, True, True), (1, 64, 128, True, True),
    (3, 16, 136, True, True), (6, 8, 40, False, True), (25, 24, 128, True, False)])
def test_patch_kernel(batch, cin, cout, has_bias, selu):
    _check(batch, cin, cout, has_bias, selu, size=8, pad=(0, 0, 0, 0))


def _check(batch, cin, cout, has_bias, selu, size, pad):
    x, w, b = _inputs(batch, cin, cout, size, seed=batch + cin + cout)
    b = b if has_bias else None
    y = _run(x, w, b, pad, selu)
    ref = _oracle(x, w, b, pad, selu)
    assert y.shape == ref.shape and torch.isfinite(y).all()
    assert _rel(y, ref) <= FLOOR_TF32


def test_unused_bottom_right_padding():
    """(0, 1, 0, 1) gives the same 4 x 4 output as no padding (the padded row and column are never read)."""
    x, w, b = _inputs(4, 16, 128, 8, seed=5)
    y = _run(x, w, b, (0, 1, 0, 1), True)
    assert _rel(y, _oracle(x, w, b, (0, 1, 0, 1), True)) <= FLOOR_TF32


def test_nan_reaches_exactly_its_pixel():
    """Each input element belongs to one output pixel: a NaN reaches exactly that pixel's 128 channels (and SELU's
    fast exponential keeps it NaN)."""
    x, w, b = _inputs(6, 16, 128, 8, seed=2)
    x[4, 9, 5, 2] = float("nan")
    y = _run(x, w, b, (0, 0, 0, 0), True)
    ref = _oracle(x, w, b, (0, 0, 0, 0), True)
    assert torch.equal(torch.isnan(y), torch.isnan(ref)) and int(torch.isnan(ref).sum()) == 128


def test_misaligned_input_takes_the_generic_kernel():
    """x one float off 16-byte alignment: the whole-plane copies cannot take it, the generic kernel does."""
    x, w, b = _inputs(2, 16, 128, 8, seed=4)
    flat = torch.empty(x.numel() + 1, device="cuda", dtype=torch.float32)
    x_odd = flat[1:].view(x.shape)
    x_odd.copy_(x)
    y = im2col.conv2d_implicit_pipelined(x_odd, w.float(), b.float(), 2, (0, 0, 0, 0), True)
    assert _rel(y, _oracle(x, w, b, (0, 0, 0, 0), True)) <= FLOOR_TF32


# conv3's kernel for inputs one row and column short (conv_patch_pad: 15 x 15 -> 8 x 8, TF "same" padding the bottom
# row and right column): on the H200 (132 SMs) batch 640 and 643 (the 5-image tile, one wave, 3 images in the last
# tile), 396 (the lowest batch that takes it), 395 and 661 (the 1-image tile: below that, and past the 5-image tile's
# one wave), 7 and 1; the channel tail (136); one K-step (8 channels); no bias; no SELU.
@pytest.mark.parametrize("batch, cin, cout, has_bias, selu", [
    (640, 64, 128, True, True), (643, 64, 128, True, True), (396, 64, 128, True, True), (395, 64, 128, True, True),
    (661, 64, 128, True, True),
    (7, 64, 128, True, True), (1, 8, 128, True, True), (3, 16, 136, True, True), (6, 8, 40, False, True),
    (25, 24, 128, True, False)])
def test_padded_patch_kernel(batch, cin, cout, has_bias, selu):
    _check(batch, cin, cout, has_bias, selu, size=15, pad=(0, 1, 0, 1))


def test_padded_patch_nan_on_the_last_row_and_column():
    """x[..., 14, 14] sits in output pixel (7, 7) alone (its other taps are the padding): a NaN there reaches exactly
    that pixel's channels, and the masked taps of the padding never turn into NaN from stale shared memory."""
    x, w, b = _inputs(6, 16, 128, 15, seed=3)
    x[2, 5, 14, 14] = float("nan")
    y = _run(x, w, b, (0, 1, 0, 1), True)
    ref = _oracle(x, w, b, (0, 1, 0, 1), True)
    assert torch.equal(torch.isnan(y), torch.isnan(ref)) and int(torch.isnan(ref).sum()) == 128
    assert bool(torch.isnan(y[2, :, 7, 7]).all())


# The halo kernels forced on, forced off and left to their dispatch, against float64. The variables that force them
# (MSCRED_CONV1_KERNEL, MSCRED_CONV2_KERNEL) are read once per process, so each check runs in a subprocess: this
# script, with the layer's output channels, stride and cases (batch, input channels, n, bias, SELU) as arguments.
# TF32 products: error ~3e-4.
_FORCED_KERNEL_SCRIPT = r"""
import json, sys, torch, torch.nn.functional as F
from mscred.ops import im2col
from mscred.ops.reference import same_padding
cout, stride, k, cases = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
worst = 0.0
for batch, cin, n, has_bias, selu, *own_cout in cases:
    o = own_cout[0] if own_cout else cout
    g = torch.Generator().manual_seed(batch + cin + n)
    x = torch.randn(batch, cin, n, n, generator=g, dtype=torch.float64).cuda()
    w = (torch.randn(o, cin, k, k, generator=g, dtype=torch.float64) / (k * cin ** 0.5)).cuda()
    b = (torch.randn(o, generator=g, dtype=torch.float64) * 0.5).cuda() if has_bias else None
    pad = same_padding(n, k, stride)
    y = im2col.conv2d_implicit_pipelined(x.float(), w.float(), None if b is None else b.float(), stride, pad, selu)
    top, bottom, left, right = pad
    ref = F.conv2d(F.pad(x, (left, right, top, bottom)), w, b, stride=stride)
    ref = F.selu(ref) if selu else ref
    rel = ((y.double() - ref).norm() / ref.norm()).item()
    worst = max(worst, rel)
    print(batch, cin, n, has_bias, selu, rel, torch.isfinite(y).all().item())
sys.exit(0 if worst < 2e-3 else 1)
"""


def _check_with_kernel(variable: str, value: str | None, cout: int, stride: int, cases: list, k: int = 3) -> None:
    """Each case (batch, input channels, n, bias, SELU[, output channels]) through the k x k layer of `cout` output
    channels and `stride`, with `variable` set to `value` (unset for None)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k != variable}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[1] / "src")
    if value is not None:
        env[variable] = value
    proc = subprocess.run([sys.executable, "-c", _FORCED_KERNEL_SCRIPT, str(cout), str(stride), str(k),
                           json.dumps(cases)],
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]


# conv1's halo kernel (MSCRED_CONV1_KERNEL=halo or halo_tma: 16-byte or bulk-copy stores): conv1's shape at n = 30
# (batches 640, 643, 7), other image sizes (rows of 4 to 111 pixels, a last tile of fewer rows), 1-3 input channels,
# with and without bias and SELU; and layers it does not take (4 channels; 200 pixels wide at 3 channels), which the
# generic kernel runs. Unset, the same shapes go to whichever kernel halo_pays picks.
_CONV1_CASES = [(640, 3, 30, True, True), (643, 3, 30, True, True), (7, 3, 30, True, True), (5, 3, 16, True, True),
                (3, 3, 55, True, False), (4, 1, 30, False, True), (2, 2, 17, True, True), (3, 3, 5, True, True),
                (2, 3, 4, True, True), (2, 3, 111, True, True), (2, 1, 256, True, False), (2, 3, 200, True, True),
                (3, 4, 30, True, True)]


@pytest.mark.parametrize("kernel", ["halo", "halo_tma", None])
def test_halo_conv1_kernel(kernel):
    _check_with_kernel("MSCRED_CONV1_KERNEL", kernel, 32, 1, _CONV1_CASES)


# conv2's halo kernel (conv_halo3x3s2: 32 -> 64 channels, 3 x 3, stride 2, Wo <= 15; MSCRED_CONV2_KERNEL=halo, its
# consumers on wgmma on the H200, =halo_mma on mma.sync, as other GPUs run it, or generic): conv2's shape at n = 30
# (batches 640, 643, 7, 1: full and partial waves of the persistent blocks), odd inputs (TF "same" then pads the
# top/left too: n = 29, 9), a last tile of fewer rows (n = 29: 15 rows in tiles of 8), fewer rows than a tile holds
# (n = 16, 5), output rows of 9 and 15 pixels (padded to 16 in the tile), with and without bias and SELU; and layers
# it does not take (16 input channels, 16 and 28 output columns), which the generic kernel runs. Unset, the same
# shapes go to whichever kernel halo2_pays picks.
_CONV2_CASES = [(640, 32, 30, True, True), (643, 32, 30, True, True), (7, 32, 30, True, True),
                (1, 32, 30, False, False), (5, 32, 29, True, True), (3, 32, 16, True, True), (3, 32, 5, True, False),
                (4, 32, 17, True, True), (3, 32, 9, False, True), (2, 32, 31, True, True), (2, 32, 55, True, True),
                (3, 16, 30, True, True)]


@pytest.mark.parametrize("kernel", ["halo", "halo_mma", "generic", None])
def test_halo_conv2_kernel(kernel):
    _check_with_kernel("MSCRED_CONV2_KERNEL", kernel, 64, 2, _CONV2_CASES)


# The patch shapes with the mma.sync kernels forced (MSCRED_PATCH_KERNEL=mma: the kernels of GPUs other than Hopper,
# which on the H200 the wgmma kernel replaces) and left to the dispatch (the wgmma kernel on sm_90a): conv4's (2 x 2,
# stride 2 on 8 x 8: test_patch_kernel's cases, tails included, and O = 200) and conv3's at n = 30 (15 x 15, the TF
# "same" padding on the bottom row and right column: batches 640, 643, 7, 1, a channel tail past 128, no bias, no
# SELU, 8 input channels: one K-step), as (batch, input channels, n, bias, SELU, output channels).
_CONV4_CASES = [(640, 128, 8, True, True, 256), (643, 128, 8, True, True, 256), (7, 128, 8, True, True, 256),
                (1, 64, 8, True, True, 128), (3, 16, 8, True, True, 136), (6, 8, 8, False, True, 40),
                (25, 24, 8, True, False, 128), (5, 128, 8, False, False, 200)]
_CONV3_CASES = [(640, 64, 15, True, True, 128), (643, 64, 15, True, True, 128), (7, 64, 15, True, True, 128),
                (1, 64, 15, False, False, 128), (5, 64, 15, True, True, 200), (3, 8, 15, True, True, 128),
                (4, 24, 15, True, False, 64)]


@pytest.mark.parametrize("kernel", ["mma", None])
def test_patch_kernel_choice(kernel):
    _check_with_kernel("MSCRED_PATCH_KERNEL", kernel, 256, 2, _CONV4_CASES + _CONV3_CASES, k=2)
