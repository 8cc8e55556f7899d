"""How far a resumed PackedAdam run's weights are from the uninterrupted run's after one more bf16 step, per model
size, on a CUDA device: tests/test_packed_adam.py's resume test at its CPU size (5 sensors, channels 4/8/8/8, batch
1) failed on an H100 at rtol 1e-5 / atol 1e-6 (results/gpu_suite_1206f/) where its GPU size (8 sensors,
8/16/16/32, batch 2) had passed; this prints, for each size and a few repeats, the largest difference of each
weight that differs and whether the two runs' losses and gradients at the resumed step were equal bit for bit.

Usage (CUDA machine): python3 benchmarks/packed_adam_resume_sizes.py [--repeats 3] [--out DIR]"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from mscred import packed_adam
from mscred.config import ModelConfig
from mscred.model import MSCREDNet

SIZES = {"cpu_size": (5, (4, 8, 8, 8), 1), "gpu_size": (8, (8, 16, 16, 32), 2)}


def one_run(n: int, channels: tuple, batch: int) -> dict:
    def model():
        torch.manual_seed(0)
        return MSCREDNet(ModelConfig(n_sensors=n, backend="fused", channels=channels)).cuda().train()

    x = torch.rand(batch, 5, 3, n, n, generator=torch.Generator().manual_seed(3)).cuda()

    def step(net, opt):
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = net(x)
        loss = ((out.float() - x[:, -1]) ** 2).mean()
        loss.backward()
        grads = {name: p.grad.detach().clone() for name, p in net.named_parameters()}
        opt.step()
        return loss.detach(), grads

    net = model()
    opt = packed_adam.PackedAdam(net.parameters(), lr=1e-3, fused=True)
    step(net, opt)
    again = model()
    again.load_state_dict(net.state_dict())
    resumed = packed_adam.PackedAdam(again.parameters(), lr=1e-3, fused=True)
    resumed.load_state_dict(opt.state_dict())
    loss_r, grads_r = step(again, resumed)
    loss_u, grads_u = step(net, opt)
    differ = {}
    for (name, p), q in zip(net.named_parameters(), again.parameters()):
        d = (p - q).abs().max().item()
        if d > 0:
            differ[name] = {"max_abs": d, "max_weight": p.abs().max().item(),
                            "grad_max_abs_diff": (grads_u[name] - grads_r[name]).abs().max().item()}
    return {"loss_equal": bool(torch.equal(loss_r, loss_u)),
            "grads_equal": all(torch.equal(grads_u[k], grads_r[k]) for k in grads_u), "weights_differ": differ}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    results = {name: [one_run(*size) for _ in range(args.repeats)] for name, size in SIZES.items()}
    text = json.dumps({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "results": results},
                      indent=1)
    print(text)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "packed_adam_resume_sizes.json").write_text(text + "\n")


if __name__ == "__main__":
    main()
