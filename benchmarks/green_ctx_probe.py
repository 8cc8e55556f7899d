"""Can the training step's side stream be a CUDA green context's, and does it keep its kernels to its SMs?

Questions, in order (each printed, all written to DIR/green_ctx_probe.md):
1. torch's green-context API here (``torch.cuda.green_contexts``) and a stream of a context of N SMs
   (``ops/green_stream.stream``);
2. the SMs it runs on: a bf16 GEMM of 8192^3 on it against the same GEMM on an ordinary stream (the ratio of
   times should approach the SM counts');
3. sharing: a long GEMM on the green stream and a train of small kernels on the ordinary stream at once, against
   the small kernels alone (what the chain's kernels would see);
4. CUDA graphs: a capture that forks from the capture stream to the green stream and joins it back by events
   (as ``wgrad_stream.run`` and ``join`` do), replayed, the result checked.
Usage (CUDA machine): PYTHONPATH=src python3 benchmarks/green_ctx_probe.py [--sms 66] [--out DIR]
"""
from __future__ import annotations

import argparse
import traceback

import torch

import step_alternation  # noqa: E402 (benchmarks/ is the script's own folder)
import sweep_report  # noqa: E402
from mscred.ops import green_stream


def _ms(fn, stream, reps: int = 10) -> float:
    """Mean ms of ``fn()`` on ``stream`` (``step_alternation.median_ms``'s CUDA events, recorded on the current
    stream: this one), after one warm-up call."""
    with torch.cuda.stream(stream):
        fn()
        return step_alternation.median_ms(fn, reps, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sms", type=int, default=66)
    ap.add_argument("--out", default="benchmarks/results/green_ctx_probe")
    args = ap.parse_args()
    lines = [f"# Green-context side stream probe, {args.sms} SMs (green_ctx_probe.py)", "",
             f"{sweep_report.machine_line()}.", ""]

    def say(text: str) -> None:
        print(text, flush=True)
        lines.append(text)

    from torch.cuda import green_contexts
    say(f"- torch.cuda.green_contexts.GreenContext: "
        f"{sorted(m for m in dir(green_contexts.GreenContext) if not m.startswith('_'))}")
    device = torch.device("cuda")
    total = torch.cuda.get_device_properties(0).multi_processor_count
    green = green_stream.stream(device, args.sms)
    say(f"- a stream of a green context of {args.sms} SMs (the device has {total}): {green}")
    if green is None:
        step_alternation.report(args.out, "green_ctx_probe.md", lines)
        return
    plain = torch.cuda.Stream()
    a = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=device, dtype=torch.bfloat16)
    whole, part = _ms(lambda: a @ b, plain), _ms(lambda: a @ b, green)
    say(f"- 8192^3 bf16 GEMM: {whole:.3f} ms on an ordinary stream, {part:.3f} ms on the green one "
        f"(ratio {part / whole:.2f}; SMs {total / args.sms:.2f})")

    small = torch.randn(128, 4096, device=device, dtype=torch.bfloat16)
    w = torch.randn(4096, 4096, device=device, dtype=torch.bfloat16)
    train = lambda: [small @ w for _ in range(20)]  # noqa: E731 - a chain of small GEMMs
    alone = _ms(train, plain, reps=5)
    big = [torch.empty(0)]
    with torch.cuda.stream(green):
        for _ in range(6):
            big[0] = a @ b
    beside = _ms(train, plain, reps=5)
    torch.cuda.synchronize()
    ordinary = torch.cuda.Stream()
    with torch.cuda.stream(ordinary):
        for _ in range(6):
            big[0] = a @ b
    beside_plain = _ms(train, plain, reps=5)
    torch.cuda.synchronize()
    say(f"- 20 small GEMMs: {alone:.3f} ms alone, {beside:.3f} ms beside big GEMMs on the green stream, "
        f"{beside_plain:.3f} ms beside them on an ordinary stream")

    try:
        x = torch.randn(2048, 2048, device=device)
        out = torch.empty_like(x)
        capture = torch.cuda.Stream()
        capture.wait_stream(torch.cuda.current_stream())
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=capture):
            y = x * 2
            green.wait_stream(capture)
            with torch.cuda.stream(green):
                z = y @ y
            capture.wait_stream(green)
            out.copy_(z + 1)
        x.copy_(torch.randn_like(x))
        graph.replay()
        torch.cuda.synchronize()
        want = (x * 2) @ (x * 2) + 1
        err = ((out - want).abs().max() / want.abs().max()).item()
        say(f"- CUDA graph with a fork to the green stream and a join: captured and replayed, max rel. err "
            f"{err:.1e}")
    except Exception as exc:  # noqa: BLE001 - the probe's answer is the failure itself
        say(f"- CUDA graph with a fork to the green stream: failed: {type(exc).__name__}: {exc}")
        lines.append("```\n" + traceback.format_exc() + "```")
    step_alternation.report(args.out, "green_ctx_probe.md", lines)


if __name__ == "__main__":
    main()
