"""packed_adam.PackedAdam and its kernel (ops/triton/adam.py): torch's Adam in float64 as the oracle, runs found
only where data, gradients, moments and step counts all lie back to back, the rest left to torch, checkpoints
that torch's Adam reads. On the CPU under Triton's interpreter (small runs: MIN_RUN_ELEMENTS lowered), on CUDA at
the default model's size with the Trainer."""
from __future__ import annotations

import copy

import pytest
import torch

from mscred import packed_adam
from mscred.ops.triton.runtime import runs_fused

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
pytestmark = pytest.mark.skipif(not runs_fused(torch.empty(0, device=DEVICE)),
                                reason="the kernel needs CUDA or Triton's CPU interpreter (TRITON_INTERPRET=1)")
# Awkward sizes: one element, a prime, one past a block (2,048), a block's worth minus one.
SHAPES = [(1,), (13, 7), (2049,), (3, 5, 2, 2), (2047,)]


@pytest.fixture(autouse=True)
def small_runs(monkeypatch):
    monkeypatch.setattr(packed_adam, "MIN_RUN_ELEMENTS", 64)


def _packed(shapes, seed: int, gap: int = 0) -> list[torch.nn.Parameter]:
    """Parameters of ``shapes`` as views of one float32 buffer (``gap`` elements between neighbours)."""
    sizes = [torch.Size(s).numel() for s in shapes]
    buf = torch.randn(sum(sizes) + gap * len(sizes), generator=torch.Generator().manual_seed(seed)).to(DEVICE)
    out, at = [], 0
    for shape, size in zip(shapes, sizes):
        out.append(torch.nn.Parameter(buf[at:at + size].view(shape)))
        at += size + gap
    return out


def _grads(params, seed: int, packed: bool = True, skip: int | None = None) -> list[torch.Tensor | None]:
    """Fresh gradients for ``params``: views of one buffer in their order (``packed``) or tensors of their own;
    parameter ``skip`` gets none."""
    gen = torch.Generator().manual_seed(seed)
    sizes = [p.numel() for p in params]
    flat = torch.randn(sum(sizes), generator=gen).to(DEVICE)
    out, at = [], 0
    for i, (p, size) in enumerate(zip(params, sizes)):
        g = flat[at:at + size].view(p.shape) if packed else flat[at:at + size].view(p.shape).clone()
        out.append(None if i == skip else g)
        at += size
    return out


def _oracle(params, **kwargs):
    twins = [torch.nn.Parameter(p.detach().double().cpu().clone()) for p in params]
    return twins, torch.optim.Adam(twins, **kwargs)


def _step_both(params, opt, twins, ref, grads) -> None:
    for p, t, g in zip(params, twins, grads):
        p.grad = g
        t.grad = None if g is None else g.double().cpu()
    opt.step()
    ref.step()


def _torch_float32_error(params, grads_per_step, **kwargs) -> float:
    """The worst error of torch's own float32 Adam against float64 over the same steps: the yardstick."""
    mine = [torch.nn.Parameter(p.detach().clone().cpu()) for p in params]
    twins, ref = _oracle(params, **kwargs)
    opt = torch.optim.Adam(mine, **kwargs)
    for grads in grads_per_step:
        _step_both(mine, opt, twins, ref, [None if g is None else g.cpu() for g in grads])
    return max((p.double() - t).abs().max().item() for p, t in zip(mine, twins))


@pytest.mark.parametrize("weight_decay", [0.0, 0.05])
def test_matches_float64_adam_within_torchs_own_error(weight_decay):
    kwargs = dict(lr=3e-2, betas=(0.8, 0.99), eps=1e-6, weight_decay=weight_decay)
    params = _packed(SHAPES, seed=1)
    start = [p.detach().clone() for p in params]
    opt = packed_adam.PackedAdam(params, fused=True, **kwargs)
    twins, ref = _oracle(params, **kwargs)
    steps = [_grads(params, seed=10 + i, skip=1 if i == 2 else None) for i in range(5)]  # one skips a tensor
    for grads in steps:
        _step_both(params, opt, twins, ref, grads)
        # without tensor 1's gradient the run splits: tensor 0 alone (1 element) goes to torch
        present = params if grads[1] is not None else params[2:]
        assert opt.kernel_elements == sum(p.numel() for p in present)
    err = max((p.double().cpu() - t).abs().max().item() for p, t in zip(params, twins))
    yardstick = _torch_float32_error(start, steps, **kwargs)
    assert err <= 2 * yardstick + 1e-7, (err, yardstick)
    # the skipped tensor's step count stayed behind, per tensor as torch keeps it
    assert opt.state[params[1]]["step"].item() == 4 and opt.state[params[0]]["step"].item() == 5


def test_gradients_elsewhere_go_to_torch():
    params = _packed(SHAPES, seed=2)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    twins, ref = _oracle(params, lr=1e-2)
    for i in range(3):
        _step_both(params, opt, twins, ref, _grads(params, seed=20 + i, packed=False))
        assert opt.kernel_elements == 0
    assert max((p.double().cpu() - t).abs().max().item() for p, t in zip(params, twins)) < 1e-6


def test_parameters_apart_go_to_torch_and_neighbours_stay_a_run():
    """The weights back to back (one run), the 'biases' apart (torch's): as the fused training step lays them."""
    weights = _packed([(40, 3), (17, 5), (9, 9)], seed=3)
    biases = _packed([(40,), (17,)], seed=4, gap=3)
    params = [weights[0], biases[0], weights[1], biases[1], weights[2]]  # the module's interleaved order
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    twins, ref = _oracle(params, lr=1e-2)
    for i in range(3):
        wg = _grads(weights, seed=30 + i)
        bg = _grads(biases, seed=40 + i, packed=False)
        _step_both(params, opt, twins, ref, [wg[0], bg[0], wg[1], bg[1], wg[2]])
        assert opt.kernel_elements == sum(w.numel() for w in weights)
        assert all(p.grad is not None for p in params)  # the run's gradients handed back after torch's step
    assert max((p.double().cpu() - t).abs().max().item() for p, t in zip(params, twins)) < 1e-6


def test_too_small_a_run_goes_to_torch(monkeypatch):
    monkeypatch.setattr(packed_adam, "MIN_RUN_ELEMENTS", 10**9)
    params = _packed(SHAPES, seed=5)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    for p, g in zip(params, _grads(params, seed=50)):
        p.grad = g
    opt.step()
    assert opt.kernel_elements == 0


@pytest.mark.parametrize("option", [{"amsgrad": True}, {"maximize": True}, {"decoupled_weight_decay": True,
                                                                             "weight_decay": 0.1}])
def test_rules_the_kernel_does_not_run_go_to_torch(option):
    if "decoupled_weight_decay" in option and "decoupled_weight_decay" not in \
            torch.optim.Adam.__init__.__code__.co_varnames:
        pytest.skip("this torch's Adam has no decoupled_weight_decay")
    params = _packed(SHAPES, seed=6)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True, **option)
    twins, ref = _oracle(params, lr=1e-2, **option)
    for i in range(2):
        _step_both(params, opt, twins, ref, _grads(params, seed=60 + i))
        assert opt.kernel_elements == 0
    assert max((p.double().cpu() - t).abs().max().item() for p, t in zip(params, twins)) < 1e-6


def test_state_dict_round_trip_continues_the_run_and_torch_reads_it():
    params = _packed(SHAPES, seed=7)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    for i in range(2):
        for p, g in zip(params, _grads(params, seed=70 + i)):
            p.grad = g
        opt.step()
    saved = copy.deepcopy(opt.state_dict())
    plain = torch.optim.Adam([torch.nn.Parameter(p.detach().clone()) for p in params], lr=1e-2, fused=True)
    plain.load_state_dict(copy.deepcopy(saved))  # the same keys and shapes torch's own Adam keeps
    assert set(saved["state"][0]) == {"step", "exp_avg", "exp_avg_sq"}
    # a second optimizer over the same parameters, loaded: its moments back to back again, the kernel runs them
    again = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    again.load_state_dict(saved)
    before = [p.detach().clone() for p in params]
    grads = _grads(params, seed=79)
    for p, g in zip(params, grads):
        p.grad = g
    again.step()
    assert again.kernel_elements == sum(p.numel() for p in params)
    twins = [torch.nn.Parameter(b.clone()) for b in before]
    for t, g in zip(twins, grads):
        t.grad = g.clone()
    plain_state = copy.deepcopy(saved)
    twin_opt = torch.optim.Adam(twins, lr=1e-2, fused=True)
    twin_opt.load_state_dict(plain_state)
    twin_opt.step()
    assert max((p - t).abs().max().item() for p, t in zip(params, twins)) < 1e-6


def test_closure_and_zero_grad_keep_working():
    params = _packed(SHAPES, seed=8)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    target = [torch.randn(p.shape, generator=torch.Generator().manual_seed(80)).to(DEVICE) for p in params]

    def closure():
        opt.zero_grad(set_to_none=False)
        loss = sum(((p - t) ** 2).sum() for p, t in zip(params, target))
        loss.backward()
        return loss

    losses = [opt.step(closure).item() for _ in range(3)]
    assert losses[-1] < losses[0]


def test_make_adam_picks_torchs_off_the_fused_cuda_path(monkeypatch):
    params = [torch.nn.Parameter(torch.zeros(3))]
    assert type(packed_adam.make_adam(params, torch.device("cpu"), "fused", lr=1e-3)) is torch.optim.Adam
    if torch.cuda.is_available():
        cuda = [torch.nn.Parameter(torch.zeros(3, device="cuda"))]
        assert type(packed_adam.make_adam(cuda, torch.device("cuda"), "reference", lr=1e-3)) is torch.optim.Adam
        assert type(packed_adam.make_adam(cuda, torch.device("cuda"), "fused", lr=1e-3)) is packed_adam.PackedAdam
        monkeypatch.setenv("MSCRED_PACKED_ADAM", "0")
        assert type(packed_adam.make_adam(cuda, torch.device("cuda"), "fused", lr=1e-3)) is torch.optim.Adam


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused bf16 training step (packed weights) needs CUDA")
@pytest.mark.parametrize("graphs", [False, True])
def test_fused_bf16_training_steps_the_weights_in_one_run_and_tracks_torchs_adam(monkeypatch, graphs):
    from mscred.config import ModelConfig, TrainConfig
    from mscred.model import MSCREDNet
    from mscred.train import Trainer

    monkeypatch.setattr(packed_adam, "MIN_RUN_ELEMENTS", 1 << 16)  # the product's threshold
    segments = torch.rand(30, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    runs = {}
    for variant in ("1", "0"):
        monkeypatch.setenv("MSCRED_PACKED_ADAM", variant)
        torch.manual_seed(0)
        net = MSCREDNet(ModelConfig(n_sensors=16, backend="fused"))
        trainer = Trainer(net, TrainConfig(epochs=3, batch_size=8, progress=False, device="cuda", bf16=True,
                                           cuda_graphs=graphs))
        runs[variant] = (trainer.fit(segments, segments[20:]), net, trainer.optimizer)
    history, net, opt = runs["1"]
    assert type(opt) is packed_adam.PackedAdam and type(runs["0"][2]) is torch.optim.Adam
    weights = sum(p.numel() for name, p in net.named_parameters() if name.endswith("weight"))
    assert opt.kernel_elements == weights  # every weight in one run, the biases torch's
    for mine, theirs in zip(history, runs["0"][0]):
        assert mine["train_loss"] == pytest.approx(theirs["train_loss"], rel=2e-2)
    theirs = runs["0"][1].state_dict()
    for name, value in net.state_dict().items():  # as tests/test_train.py's graphed-vs-eager bf16 comparison
        torch.testing.assert_close(value, theirs[name], rtol=0.2, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the fused bf16 training step (packed weights) needs CUDA")
def test_fused_bf16_graphed_resume_repacks_the_moments_and_finishes_as_a_straight_run(tmp_path, monkeypatch):
    """Checkpoint after one epoch, resume in a fresh Trainer (load_state_dict: the moments packed again): the
    kernel still covers every weight, and the weights end where a straight two-epoch run's do (bf16's atomics make
    the runs differ by rounding, as tests/test_train.py's graphed-vs-eager comparison allows)."""
    from mscred.config import ModelConfig, TrainConfig
    from mscred.errors import NoteWarning
    from mscred.model import MSCREDNet
    from mscred.train import Trainer

    monkeypatch.setattr(packed_adam, "MIN_RUN_ELEMENTS", 1 << 16)
    segments = torch.rand(30, 3, 16, 16, generator=torch.Generator().manual_seed(1))

    def run(epochs, seed=0, **fit):
        torch.manual_seed(seed)
        net = MSCREDNet(ModelConfig(n_sensors=16, backend="fused"))
        trainer = Trainer(net, TrainConfig(epochs=epochs, batch_size=8, progress=False, device="cuda", bf16=True,
                                           cuda_graphs=True))
        trainer.fit(segments, **fit)
        return net, trainer.optimizer

    straight, _ = run(2)
    run(1, checkpoint_dir=tmp_path)
    with pytest.warns(NoteWarning, match="after epoch 1 of 2"):
        resumed, opt = run(2, seed=7, checkpoint_dir=tmp_path, resume=True)
    weights = sum(p.numel() for name, p in resumed.named_parameters() if name.endswith("weight"))
    assert type(opt) is packed_adam.PackedAdam and opt.kernel_elements == weights
    theirs = straight.state_dict()
    for name, value in resumed.state_dict().items():
        torch.testing.assert_close(value, theirs[name], rtol=0.2, atol=2e-3)


def test_state_made_before_the_parameters_were_packed_is_packed_again():
    """As on a resume: the checkpoint's moments loaded while the parameters were tensors of their own, then the
    weight cache's first forward packs the parameters into one buffer (``m.data = view``). The next step packs the
    moments again (outside a capture) and the kernel takes the run; the values go on as torch's Adam's."""
    shapes = [(40, 3), (17, 5), (9, 9)]
    params = [torch.nn.Parameter(torch.randn(s, generator=torch.Generator().manual_seed(i)).to(DEVICE))
              for i, s in enumerate(shapes)]
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    twins, ref = _oracle(params, lr=1e-2)
    _step_both(params, opt, twins, ref, _grads(params, seed=90, packed=False))
    assert opt.kernel_elements == 0  # nothing back to back yet
    packed = torch.empty(sum(p.numel() for p in params), device=DEVICE)
    at = 0
    for p in params:  # what weight_cache._pack does
        view = packed[at:at + p.numel()].view(p.shape)
        view.copy_(p.detach())
        p.data = view
        at += p.numel()
    for i in range(2):
        _step_both(params, opt, twins, ref, _grads(params, seed=91 + i))
        assert opt.kernel_elements == packed.numel()
    assert max((p.double().cpu() - t).abs().max().item() for p, t in zip(params, twins)) < 1e-6
    first = opt.state[params[0]]["exp_avg"]
    assert all(opt.state[p]["exp_avg"].untyped_storage().data_ptr() == first.untyped_storage().data_ptr()
               for p in params)


def test_the_fused_models_weights_are_one_run_also_after_a_resume():
    """The product's layout end to end, small: a fused-backend model's bf16 training step (the weight cache packs
    the weights at its first forward, the cast's backward writes their gradients into one buffer) gives the kernel
    every weight; an optimizer loaded from its state dict before the new model's first forward (a resume) packs
    the moments again at its first step and gives the kernel every weight too."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    # (the CPU interpreter's run at a small size, 20 s instead of 60; the GPU's at the size it was first tested at:
    # at the CPU's size one conv1 weight of the resumed run differed on an H100, results/gpu_suite_1206f/)
    n, channels, batch = (5, (4, 8, 8, 8), 1) if DEVICE == "cpu" else (8, (8, 16, 16, 32), 2)

    def model():
        torch.manual_seed(0)
        return MSCREDNet(ModelConfig(n_sensors=n, backend="fused", channels=channels)).to(DEVICE).train()

    x = torch.rand(batch, 5, 3, n, n, generator=torch.Generator().manual_seed(3)).to(DEVICE)

    def step(net, opt):
        opt.zero_grad(set_to_none=True)
        with torch.autocast(x.device.type, dtype=torch.bfloat16):
            out = net(x)
        ((out.float() - x[:, -1]) ** 2).mean().backward()
        opt.step()

    net = model()
    opt = packed_adam.PackedAdam(net.parameters(), lr=1e-3, fused=True)
    step(net, opt)
    weights = sum(p.numel() for name, p in net.named_parameters() if name.endswith("weight"))
    assert net._weight_plan is not None and opt.kernel_elements == weights
    again = model()
    again.load_state_dict(net.state_dict())
    resumed = packed_adam.PackedAdam(again.parameters(), lr=1e-3, fused=True)
    resumed.load_state_dict(opt.state_dict())
    step(again, resumed)
    assert resumed.kernel_elements == weights
    step(net, opt)  # the uninterrupted run's second step: the same arithmetic
    for (name, p), q in zip(net.named_parameters(), again.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=lambda m: f"{name}: {m}")


def test_is_available_says_why_not(monkeypatch):
    ok, why = packed_adam.is_available()
    assert ok == torch.cuda.is_available() and (ok or why.startswith("no CUDA device"))
    monkeypatch.setenv("MSCRED_PACKED_ADAM", "0")
    assert packed_adam.is_available() == (False, "MSCRED_PACKED_ADAM=0")


def test_step_hooks_run_once_a_step():
    """torch wraps a class's step for the optimizer hooks (Adam's once any Adam exists): PackedAdam's step calls
    torch's underneath the wrapper, so a hook does not run twice."""
    torch.optim.Adam([torch.nn.Parameter(torch.zeros(2))])  # an Adam made first: torch.optim.Adam.step hooked
    params = _packed(SHAPES, seed=11)
    opt = packed_adam.PackedAdam(params, lr=1e-2, fused=True)
    calls = []
    opt.register_step_pre_hook(lambda *a: calls.append("pre"))
    opt.register_step_post_hook(lambda *a: calls.append("post"))
    for p, g in zip(params, _grads(params, seed=12)):
        p.grad = g
    opt.step()
    assert calls == ["pre", "post"]


def test_kernel_compiles_for_sm90_without_spilling():
    """The update kernel at its default tile compiled for the H200 here (tests/sm90_compile.py): a register count
    that leaves room for several programs an SM (106 on Triton 3.9 at 1024/4; 16 elements a thread took 218) and
    no local memory in its code (float64 bias corrections included)."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    from mscred.ops.triton import adam

    block, warps = adam.BLOCK, adam.WARPS
    config = dict(constants=dict(HAS_WEIGHT_DECAY=False, BLOCK=block),
                  pointers=dict(param_ptr="*fp32", grad_ptr="*fp32", exp_avg_ptr="*fp32", exp_avg_sq_ptr="*fp32",
                                steps_ptr="*fp32", table_ptr="*i64"),
                  floats=["lr", "beta1", "beta2", "log_beta1", "log_beta2", "eps", "weight_decay"], num_warps=warps)
    code = sm90_compile.compiled_code("mscred.ops.triton.adam", "_adam_kernel", config)
    assert code["registers"] <= 128, code["registers"]
    assert "STL" not in code["listing"] and "LDL" not in code["listing"]  # no spills to local memory
