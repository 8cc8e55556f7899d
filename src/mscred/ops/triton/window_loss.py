"""The training step's per-window reconstruction loss, forward and backward in one Triton kernel each.

MSCRED's loss is the mean squared error between the reconstruction (B, K, n, n) -- bf16 and channels-last under
the fused backend with autocast -- and the last step of each window. In PyTorch ops (``train_graphs``'s
reference path) that is a cast of the reconstruction to float32, a subtraction, a square and a mean, and in the
backward their adjoints and the cast back: 9 small kernels, 30 us of the fused bf16 training step on the H200
(benchmarks/results/train_layout/train_step_profile.txt; here 2, 8 us: ../train_housekeeping2/). The training
step's weight per window (1/b, or 0 for a padded row) is applied here too, so that only the sum over the windows
is left in PyTorch ops: its backward is a broadcast, not a kernel, where a separate multiplication was a kernel
each way. Here one program per window sums the squared
differences of its K*n*n values in the compute type (float32; float64 for float64) reading either tensor through
its strides, and the backward writes 2 * dloss_b * (r - t) / (K*n*n) in the reconstruction's dtype, in NCHW order:
deconv1's backward (``small_conv``, K = 3 output channels) reads that gradient as channel planes, and read in
channels-last order (6-byte pixels) its weight-gradient kernel took 117 us instead of 67 us on the H200
(benchmarks/results/train_housekeeping/).

``window_mse(recon, target, weight=None)`` -> (B,) per-window losses in dtype ``promote(recon, float32, target)``,
computed in it (``reference``), each times ``weight``'s (B,) if given: ``reference(recon, target) * weight``, the
same rounding in the same order. Its gradient reaches ``recon`` (and ``target`` and ``weight``, through PyTorch
ops, if they ever require one). Off CUDA without the interpreter it is the PyTorch ops.
"""
from __future__ import annotations

import torch

from mscred.ops.triton.runtime import interpreting, runs_fused, tl, triton

BLOCK = 1024  # elements per iteration (forward) / per program (backward)
INTERPRETER_BLOCK = 16384  # the CPU interpreter pays per program, not per element: fewer, larger programs


def reference(recon: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """The PyTorch-ops definition, for every device (the tests' oracle; the reference backend's loss)."""
    losses = (recon.to(_loss_dtype(recon, target)) - target).square().mean(dim=(1, 2, 3))
    return losses if weight is None else losses * weight


def window_mse(recon: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Per-window mean squared error of (B, K, n, n) ``recon`` against ``target`` (same shape, any strides), times
    ``weight`` (B,) if given."""
    if (not runs_fused(recon) or recon.dim() != 4 or recon.shape != target.shape
            or (weight is not None and (weight.shape != recon.shape[:1]
                                        or torch.promote_types(weight.dtype, _loss_dtype(recon, target))
                                        != _loss_dtype(recon, target)))):
        return reference(recon, target, weight)
    return window_mse_fused(recon, target, weight)


def _loss_dtype(recon: torch.Tensor, target: torch.Tensor) -> torch.dtype:
    return torch.promote_types(torch.promote_types(recon.dtype, torch.float32), target.dtype)


if triton is not None:

    @triton.jit
    def _at(ptr, b, e, s_b, s_c, s_y, s_x, HW, W):
        """Address of element e (in (channel, row, column) order) of sample b of a strided (B, K, n, n) tensor."""
        c = e // HW
        p = e % HW
        return ptr + b * s_b + c * s_c + (p // W) * s_y + (p % W) * s_x

    @triton.jit(do_not_specialize=["D", "HW", "W"])
    def _window_mse_fwd_kernel(r_ptr, r_sb, r_sc, r_sy, r_sx, t_ptr, t_sb, t_sc, t_sy, t_sx, w_ptr, w_s, loss_ptr,
                               D, HW, W, CDT: tl.constexpr, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        acc = tl.zeros([BLOCK], dtype=CDT)
        for e0 in range(0, D, BLOCK):
            e = e0 + tl.arange(0, BLOCK)
            m = e < D
            r = tl.load(_at(r_ptr, b, e, r_sb, r_sc, r_sy, r_sx, HW, W), mask=m, other=0.0).to(CDT)
            t = tl.load(_at(t_ptr, b, e, t_sb, t_sc, t_sy, t_sx, HW, W), mask=m, other=0.0).to(CDT)
            acc += (r - t) * (r - t)
        loss = tl.sum(acc, axis=0) / D
        if HAS_WEIGHT:  # as reference's losses * weight: one product in the losses' dtype (CDT)
            loss = loss * tl.load(w_ptr + b * w_s).to(CDT)
        tl.store(loss_ptr + b, loss.to(loss_ptr.dtype.element_ty))

    @triton.jit(do_not_specialize=["D", "HW", "W"])
    def _window_mse_bwd_kernel(r_ptr, r_sb, r_sc, r_sy, r_sx, t_ptr, t_sb, t_sc, t_sy, t_sx, dl_ptr, dl_s, w_ptr,
                               w_s, d_ptr, d_sb, d_sc, d_sy, d_sx, D, HW, W,
                               CDT: tl.constexpr, HAS_WEIGHT: tl.constexpr, BLOCK: tl.constexpr):
        b = tl.program_id(0).to(tl.int64)
        e = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
        m = e < D
        r = tl.load(_at(r_ptr, b, e, r_sb, r_sc, r_sy, r_sx, HW, W), mask=m, other=0.0).to(CDT)
        t = tl.load(_at(t_ptr, b, e, t_sb, t_sc, t_sy, t_sx, HW, W), mask=m, other=0.0).to(CDT)
        dl = tl.load(dl_ptr + b * dl_s).to(CDT)
        if HAS_WEIGHT:  # the product's adjoint, as autograd's dloss * weight: one product in CDT
            dl = dl * tl.load(w_ptr + b * w_s).to(CDT)
        g = dl * 2.0 / D
        tl.store(_at(d_ptr, b, e, d_sb, d_sc, d_sy, d_sx, HW, W), (g * (r - t)).to(d_ptr.dtype.element_ty), mask=m)


def _cdt(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _block() -> int:
    return INTERPRETER_BLOCK if interpreting() else BLOCK


def _weight_args(weight: torch.Tensor | None, like: torch.Tensor) -> tuple:
    """The kernels' (pointer, stride) of the optional weight; ``like`` stands in for the pointer when there is none
    (HAS_WEIGHT off: never read)."""
    return (like, 0) if weight is None else (weight, weight.stride(0))


@torch.library.custom_op("mscred::window_mse_fused", mutates_args=())
def window_mse_fused(recon: torch.Tensor, target: torch.Tensor, weight: torch.Tensor | None = None) -> torch.Tensor:
    """Fused forward (see ``window_mse``)."""
    B, K, H, W = recon.shape
    dtype = _loss_dtype(recon, target)
    losses = torch.empty(B, device=recon.device, dtype=dtype)
    if B:
        _window_mse_fwd_kernel[(B,)](recon, *recon.stride(), target, *target.stride(), *_weight_args(weight, losses),
                                     losses, K * H * W, H * W, W, CDT=_cdt(dtype), HAS_WEIGHT=weight is not None,
                                     BLOCK=_block())
    return losses


@window_mse_fused.register_fake
def _(recon, target, weight=None):
    return recon.new_empty(recon.shape[0], dtype=_loss_dtype(recon, target))


@torch.library.custom_op("mscred::window_mse_fused_backward", mutates_args=())
def window_mse_fused_backward(dloss: torch.Tensor, recon: torch.Tensor, target: torch.Tensor,
                              weight: torch.Tensor | None = None) -> torch.Tensor:
    """d recon (recon's dtype, contiguous NCHW: see the module docstring) of ``window_mse_fused`` given dloss
    (B,), any strides (the sum's broadcast gradient has stride 0)."""
    B, K, H, W = recon.shape
    drecon = torch.empty(recon.shape, device=recon.device, dtype=recon.dtype)
    D = K * H * W
    if B and D:
        block = _block()
        _window_mse_bwd_kernel[(B, triton.cdiv(D, block))](
            recon, *recon.stride(), target, *target.stride(), dloss, dloss.stride(0), *_weight_args(weight, dloss),
            drecon, *drecon.stride(), D, H * W, W, CDT=_cdt(_loss_dtype(recon, target)),
            HAS_WEIGHT=weight is not None, BLOCK=block)
    return drecon


@window_mse_fused_backward.register_fake
def _(dloss, recon, target, weight=None):
    return torch.empty(recon.shape, device=recon.device, dtype=recon.dtype)


def _setup_context(ctx, inputs, output):
    ctx.save_for_backward(*inputs)


def _backward(ctx, dloss):
    recon, target, *rest = ctx.saved_tensors  # the weight, where it was passed
    weight = rest[0] if rest else None
    drecon = window_mse_fused_backward(dloss, recon, target, weight)
    dtarget = dweight = None
    if ctx.needs_input_grad[1]:  # not in training (the target is data): the PyTorch ops' adjoint
        D = recon[0].numel()
        diff = recon.to(_loss_dtype(recon, target)) - target
        dl = dloss if weight is None else dloss * weight
        dtarget = (dl[:, None, None, None] * -2.0 / D * diff).to(target.dtype)
    if weight is None:
        return drecon, dtarget
    if ctx.needs_input_grad[2]:  # nor here (the weights are constants)
        dweight = (dloss * reference(recon.detach(), target.detach())).to(weight.dtype)
    return drecon, dtarget, dweight


window_mse_fused.register_autograd(_backward, setup_context=_setup_context)
