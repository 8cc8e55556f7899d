"""How far deconv1's direct weight gradient (MSCRED_DECONV_DIRECT=1) is from the flipped convolution's, at the shape
whose bit-for-bit test failed on an H100 (2026-12-05: N 3, 40 -> 3 channels, 3 x 3, n 6, NCHW weight, float32),
and at the test's other shapes: max |difference|, max relative, and whether each is bit for bit. Prints a table.
    PYTHONPATH=src:tests python3 benchmarks/deconv_direct_dweight_diff.py"""
import sys

import torch

sys.path.insert(0, "tests")
from test_small_deconv import _direct, _flipped, _fwd_bwd, _inputs  # noqa: E402

print(torch.cuda.get_device_name(), torch.__version__, "cudnn", torch.backends.cudnn.version(),
      "allow_tf32 conv", torch.backends.cudnn.allow_tf32)
shapes = [(2, 64, 3, 3, 7, True, True), (3, 40, 3, 3, 6, False, False), (1, 20, 5, 3, 5, True, True),
          (2, 8, 3, 3, 9, True, True), (2, 24, 2, 5, 8, False, True), (2, 4, 3, 3, 6, True, True)]
for N, CI, CO, k, n, selu, cl in shapes:
    x, w, b, dout = _inputs(N, CI, CO, k, n, torch.float32, cl, seed=N * CI + k)
    want = _fwd_bwd(_flipped(selu), x, w, b, dout)
    got = _fwd_bwd(_direct(selu), x, w, b, dout)
    x64 = [t.double() for t in (x, w, b, dout)]
    exact = _fwd_bwd(_flipped(selu), *x64)
    for name, g, e, r in zip(("out", "dx", "dweight", "dbias"), got, want, exact):
        d = (g - e).abs().max().item()
        print(f"{(N, CI, CO, k, n, selu, cl)} {name:8s} equal={torch.equal(g, e)!s:5s} max|direct-flipped|={d:.3e} "
              f"max|direct-f64|={(g.double() - r).abs().max().item():.3e} "
              f"max|flipped-f64|={(e.double() - r).abs().max().item():.3e} max|f64|={r.abs().max().item():.3e}")
