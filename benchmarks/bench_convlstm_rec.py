"""One ConvLSTM level's forward on the GPU: convlstm.py's fused op vs the implicit-GEMM recurrent kernel.

    existing   ops/triton/convlstm.py: per step t >= 2 a cuDNN recurrent convolution h_{t-1} -> (B, 4Ch, H, W) gates
               in HBM, then _cell_fwd_kernel
    rec        ops/triton/convlstm_fused_rec.py: per step t >= 2 one Triton kernel, implicit GEMM over (tap, input
               channel) of h_{t-1} with the cell update in its epilogue (gates never reach HBM); every block
               configuration in CONFIGS that fits the level is timed, the default one marked "*"

Both share the hoisted input convolution (all 5 steps in one cuDNN call) and step 1's cell kernel. Rows: the levels
(1: B = 128, Ch = 32, 30 x 30; 2: Ch = 64, 15 x 15; 3 and 4 with --levels 1,2,3,4) in bf16 (the product's fast
path: bf16 x and W, fp32 bias and cell state) and float32 (TF32 on, as cuDNN runs it by default), kernel 2.
Timed: inference (no grad: nothing saved) and, with --train, forward with the saved tensors + convlstm.py's backward
(the existing op, the default blocks "*" and the one-dot variant only).

Correctness first: every variant's h against the float64 reference on the same inputs, bounded by 2x the existing
op's error plus a dtype slack (float32 under TF32: 2e-3; bf16: 1e-3); a variant over the bound is marked WRONG and
not timed. Times are medians of triton.testing.do_bench (CUDA events, after warm-up).

    PYTHONPATH=src python benchmarks/bench_convlstm_rec.py                   # levels 1, 2: ~30-60 s on the H200
    PYTHONPATH=src python benchmarks/bench_convlstm_rec.py --levels 1,2,3,4 --train
"""
from __future__ import annotations

import argparse
import sys

import torch

LEVELS = {1: (32, 30), 2: (64, 15), 3: (128, 8), 4: (256, 4)}  # level: (channels in = hidden, n)
# (BLOCK_P, BLOCK_C, BLOCK_K, num_warps): the spill-free ones of benchmarks/regs_convlstm_rec.py (ptxas, sm_90a),
# few, so that a whole run stays within about a minute of compilation and timing. A config wider than the level
# (BLOCK_C or BLOCK_K > Ch) is skipped.
# A fifth entry 1: the one-dot variant (all four gates' weights as one BLOCK_K x 4Ch tile; needs BLOCK_C == Ch).
CONFIGS = [
    (32, 32, 32, 4), (64, 32, 32, 4), (128, 32, 32, 8), (64, 32, 32, 4, 1),
    (64, 64, 32, 8), (64, 64, 64, 8), (32, 64, 64, 4), (64, 64, 64, 8, 1),
]


def fits(cfg, ch: int) -> bool:
    """Whether block config ``cfg`` is timed at ``ch`` hidden channels: BLOCK_C as wide as the level allows (all
    channels up to 64: the h tile is then gathered once per pixel block), BLOCK_K no wider than the level."""
    if len(cfg) > 4 and cfg[4]:
        return cfg[1] == ch and cfg[2] <= ch
    return cfg[1] == min(max(16, 1 << (ch - 1).bit_length()), 64) and cfg[2] <= ch
FB = 1.0


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.double() - b.double()).norm() / b.double().norm()).item()


def _inputs(B: int, C: int, n: int, k: int, seed: int):
    """float64 (x, W, bias) on CUDA, gate pre-activations of order 1."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, 5, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * C, 2 * C, k, k, generator=g, dtype=torch.float64) / (k * (2 * C) ** 0.5)
    b = torch.randn(4 * C, generator=g, dtype=torch.float64) * 0.5
    return x.cuda(), w.cuda(), b.cuda()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--levels", default="1,2", help="comma-separated MSCRED levels (1..4)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--kernel", type=int, default=2, help="ConvLSTM kernel size (the product's lstm_kernel: 2)")
    ap.add_argument("--dtypes", default="bf16,fp32")
    ap.add_argument("--train", action="store_true", help="also time forward (saving) + backward")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_convlstm_rec.py times GPU kernels and needs a CUDA device; none here. (The kernels' "
              "correctness on the CPU interpreter: pytest tests/test_ops_triton_convlstm_rec.py)", file=sys.stderr)
        return 2
    from triton.testing import do_bench

    from mscred.ops import reference as ref
    from mscred.ops.triton import convlstm as fused
    from mscred.ops.triton import convlstm_fused_rec as rec

    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = True
    dtypes = {"bf16": torch.bfloat16, "fp32": torch.float32}
    print(f"# {torch.cuda.get_device_name()}, batch {args.batch}, lstm kernel {args.kernel}, T = 5, "
          f"median ms of triton.testing.do_bench")
    print("| level | Ch | n | dtype | variant | blocks (P, C, K, warps[, one dot]) | rel. error vs float64 | "
          "inference ms | "
          "speed-up | train fwd+bwd ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for level in (int(s) for s in args.levels.split(",")):
        C, n = LEVELS[level]
        x64, w64, b64 = _inputs(args.batch, C, n, args.kernel, seed=level)
        oracle = ref.convlstm(x64, w64, b64, FB)
        for dname in args.dtypes.split(","):
            dt = dtypes[dname]
            x, w, b = x64.to(dt), w64.to(dt), b64.float()
            slack = 1e-3 if dt == torch.bfloat16 else 2e-3
            default = rec.default_blocks(C, n * n, x.element_size())
            variants = [("existing", None)] + [
                ("rec", list(cfg)) for cfg in CONFIGS if fits(cfg, C)]
            if tuple(default) not in CONFIGS:
                variants.append(("rec", list(default)))

            def infer(blocks):
                if blocks is None:
                    return lambda: fused.convlstm_fused(x, w, b, FB, "nhwc", False)[0]
                return lambda: rec.convlstm_fused_rec(x, w, b, FB, "nhwc", False, blocks)[0]

            def train(blocks):
                xs, ws, bs = (t.detach().clone().requires_grad_() for t in (x, w, b))
                dout = torch.randn_like(oracle, dtype=dt)

                def step():
                    y = (fused.convlstm_fused(xs, ws, bs, FB, "nhwc", True) if blocks is None else
                         rec.convlstm_fused_rec(xs, ws, bs, FB, "nhwc", True, blocks))[0]
                    torch.autograd.grad(y, (xs, ws, bs), dout)
                return step

            base_err = None
            base_ms = None
            for name, blocks in variants:
                tag = "" if blocks is None else ("*" if tuple(blocks) == tuple(default) else "")
                cfg = "cuDNN + cell kernel" if blocks is None else f"{tuple(blocks)}{tag}"
                try:
                    with torch.no_grad():
                        err = _rel(infer(blocks)(), oracle)
                except Exception as e:  # e.g. a block config over the shared-memory limit: report, go on
                    print(f"| {level} | {C} | {n} | {dname} | {name} | {cfg} | FAILED: "
                          f"{type(e).__name__}: {str(e).splitlines()[0][:80]} | - | - | - |", flush=True)
                    continue
                if base_err is None:
                    base_err = err
                ok = err <= 2 * base_err + slack
                if not ok:
                    print(f"| {level} | {C} | {n} | {dname} | {name} | {cfg} | {err:.2e} WRONG | - | - | - |")
                    continue
                with torch.no_grad():
                    ms = float(do_bench(infer(blocks), warmup=25, rep=200, return_mode="median"))
                if base_ms is None:
                    base_ms = ms
                # training only for the existing op, the default blocks and the one-dot variant: every timed
                # config compiles two more kernel variants (saving, with and without the padded h copy)
                timed_train = args.train and (blocks is None or tag == "*" or (len(blocks) > 4 and blocks[4]))
                tr = f"{float(do_bench(train(blocks), warmup=10, rep=100, return_mode='median')):.3f}" \
                    if timed_train else "-"
                print(f"| {level} | {C} | {n} | {dname} | {name} | {cfg} | {err:.2e} | {ms:.3f} | "
                      f"{base_ms / ms:.2f}x | {tr} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
