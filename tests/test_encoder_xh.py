"""The training encoder writing the large levels' inputs into their ConvLSTM's [x, h] buffers (``ops/encoder_xh.py``,
``ops/triton/convlstm_in_xh.py``, MSCRED_ENCODER_XH=1).

The epilogues' second store (bias + SELU, and conv1's small convolution) gives the values of their ordinary output
in xh's x half, border included, zeros in h_{-1} and nothing anywhere else; their gradients are those of the
ordinary shared output bit for bit; and the fused model trains to the same loss and gradients bit for bit with the
switch on and off, through the path that skips the copy. The kernels run under the Triton interpreter on the CPU
(conftest), float32; the bf16 model at full size on CUDA. On CUDA "bit for bit" reads "to rounding" where atomic adds
and cuDNN's choices make the same sums round differently (``model_runs.assert_same_step``)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from model_runs import assert_same_step, assert_same_tensors, fused_training_step, step_channels

from mscred.ops import encoder_xh
from mscred.ops.triton import bias_act as ba
from mscred.ops.triton import convlstm_concat, convlstm_in_xh
from mscred.ops.triton import small_conv as sc

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def _cl(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous(memory_format=torch.channels_last)


@pytest.fixture
def nan_buffers(monkeypatch):
    """New [x, h] buffers filled with NaN, so that a test sees every element the kernel left unwritten."""
    real = encoder_xh.new_buffer
    monkeypatch.setattr(encoder_xh, "new_buffer", lambda out: real(out).fill_(float("nan")))


def _check_xh(out: torch.Tensor, xh: torch.Tensor, h0: int) -> None:
    C = out.shape[1]
    assert xh.shape == (out.shape[0], 2 * C, *out.shape[2:]) and xh.is_contiguous(memory_format=torch.channels_last)
    assert torch.equal(xh[:, :C], out)                        # x, its zero border included
    assert torch.equal(xh[:h0, C:], torch.zeros_like(xh[:h0, C:]))  # h_{-1}
    assert torch.isnan(xh[h0:, C:]).all()                     # the ConvLSTM's: untouched


@pytest.mark.parametrize("setting, on", [(None, True), ("0", False), ("1", True)])
def test_switch(setting, on, set_env):
    set_env("MSCRED_ENCODER_XH", setting)
    assert encoder_xh.enabled() is on


@pytest.mark.parametrize("N, C, H, W, pads, h0", [(6, 32, 7, 7, (0, 1, 0, 1), 2), (4, 5, 4, 6, (1, 1, 1, 1), 3),
                                                  (3, 64, 5, 5, (0, 0, 0, 0), 1)])
def test_bias_act_writes_xh(N, C, H, W, pads, h0, nan_buffers):
    """Awkward channel counts (5: a partial channel block) and borders; out equal to ``bias_act_fused``'s, and to
    the float64 reference."""
    g = torch.Generator().manual_seed(N * C + H)
    y = _cl(torch.randn(N, C, H, W, generator=g, dtype=torch.float64)).to(DEVICE)
    b = torch.randn(C, generator=g, dtype=torch.float64).to(DEVICE)
    out, xh = ba.bias_act_fused_xh(y.float(), b.float(), True, list(pads), h0)
    assert torch.equal(out, ba.bias_act_fused(y.float(), b.float(), True, 0, 0, H, W, list(pads)))
    want = F.pad(ba.reference(y, b, True), (pads[2], pads[3], pads[0], pads[1]))
    torch.testing.assert_close(out.double(), want, rtol=1e-5, atol=1e-6)
    _check_xh(out, xh, h0)


@pytest.mark.parametrize("N, CI, CO, n, pads, h0", [(6, 3, 32, 7, (0, 1, 0, 1), 2), (4, 3, 5, 6, (1, 0, 2, 1), 3),
                                                     (2, 2, 20, 5, (0, 0, 0, 0), 1)])
def test_small_conv_writes_xh(N, CI, CO, n, pads, h0, nan_buffers):
    """conv1's kernel (3 -> 32 and awkward channel counts): out equal to ``small_conv_fused``'s and to the float64
    reference."""
    g = torch.Generator().manual_seed(N * CO + n)
    x = _cl(torch.randn(N, CI, n, n, generator=g, dtype=torch.float64)).to(DEVICE)
    w = (torch.randn(CO, CI, 3, 3, generator=g, dtype=torch.float64) * 0.3).to(DEVICE)
    b = torch.randn(CO, generator=g, dtype=torch.float64).to(DEVICE)
    out, xh = sc.small_conv_fused_xh(x.float(), w.float(), b.float(), True, list(pads), h0)
    assert torch.equal(out, sc.small_conv_fused(x.float(), w.float(), b.float(), True, list(pads)))
    want = F.pad(sc.reference(x, w, b, True), (pads[2], pads[3], pads[0], pads[1]))
    torch.testing.assert_close(out.double(), want, rtol=1e-4, atol=1e-5)
    _check_xh(out, xh, h0)


def _shared_grads(fn, inputs, g_out, g_second):
    """(out, second, every input's gradient) of ``fn(*inputs)`` -> (out, second) given both outputs' gradients."""
    leaves = [t.detach().clone().requires_grad_() for t in inputs]
    out, second = fn(*leaves)
    torch.autograd.backward([out, second], [g_out, g_second])
    return out.detach(), second.detach(), [t.grad for t in leaves]


@pytest.mark.parametrize("producer", ["bias_act", "small_conv"])
def test_the_epilogues_gradients_are_the_shared_outputs(producer):
    """The second output being xh's x half instead of a view of out changes no gradient: the two outputs'
    gradients reach the same backward kernel (``ops/shared_output.py``), bit for bit."""
    g = torch.Generator().manual_seed(11)
    pads, N, C = (0, 1, 0, 1), 6, 32
    if producer == "bias_act":
        inputs = (_cl(torch.randn(N, C, 7, 7, generator=g)).to(DEVICE), torch.randn(C, generator=g).to(DEVICE))

        def fn(xh_images):
            return lambda y, b: ba.bias_act_shared(y, b, True, pads, xh_images)
    else:
        inputs = (_cl(torch.randn(N, 3, 7, 7, generator=g)).to(DEVICE),
                  (torch.randn(C, 3, 3, 3, generator=g) * 0.3).to(DEVICE), torch.randn(C, generator=g).to(DEVICE))

        def fn(xh_images):
            return lambda x, w, b: sc.conv_act_shared(x, w, b, True, pads, xh_images)
    g_out, g_second = (_cl(torch.randn(N, C, 8, 8, generator=g)).to(DEVICE) for _ in range(2))
    out, view, plain = _shared_grads(fn(0), inputs, g_out, g_second)
    out_xh, half, ours = _shared_grads(fn(2), inputs, g_out, g_second)
    assert torch.equal(out_xh, out) and torch.equal(half, view)
    assert half.stride()[1:] == (1, 8 * 2 * C, 2 * C)  # a channel half of a (N, 2C, 8, 8) channels-last buffer
    assert_same_tensors(list(ours), list(plain), [f"gradient {i}" for i in range(len(plain))])


def test_the_reference_dtypes_write_no_buffer():
    """float64 runs PyTorch's ops, which write no [x, h] buffer: asking for one is a caller's error."""
    y = _cl(torch.randn(2, 4, 5, 5, dtype=torch.float64))
    with pytest.raises(ValueError, match="fused kernel only"):
        ba.bias_act_shared(y, torch.zeros(4, dtype=torch.float64), True, (0, 1, 0, 1), 1)
    with pytest.raises(ValueError, match="fused kernel only"):
        sc.conv_act_shared(y, torch.zeros(3, 4, 3, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.float64),
                           True, (0, 1, 0, 1), 1)


def test_recover_finds_the_buffer_and_only_it():
    T, B, C, HP, WP = 3, 2, 4, 6, 5
    xh = _cl(torch.randn(T * B, 2 * C, HP, WP))
    level = xh[:, :C].view(T, B, C, HP, WP).transpose(0, 1)  # as the encoder hands a level on
    found = encoder_xh.recover(level, C)
    assert found.shape == (T, B, 2 * C, HP, WP) and found.data_ptr() == xh.data_ptr()
    assert torch.equal(found, xh.view(T, B, 2 * C, HP, WP))
    assert encoder_xh.recover(level, C + 1) is None  # another hidden width
    plain = _cl(torch.randn(T * B, C, HP, WP)).view(T, B, C, HP, WP).transpose(0, 1)
    assert encoder_xh.recover(plain, C) is None  # its own buffer, no h half beside it
    wide = _cl(torch.randn(T * B, 3 * C, HP, WP))[:, :C].view(T, B, C, HP, WP).transpose(0, 1)
    assert encoder_xh.recover(wide, C) is None  # beside something else
    assert encoder_xh.recover(xh[B:, :C].view(T - 1, B, C, HP, WP).transpose(0, 1), C) is not None
    assert encoder_xh.recover(xh[:, :C][:B * 2].view(2, B, C, HP, WP).transpose(0, 1), C) is not None
    one = _cl(torch.randn(T, 2 * C, HP, WP))  # a batch of one: its dimension's stride is the view's arithmetic
    assert encoder_xh.recover(one[:, :C].view(T, 1, C, HP, WP).transpose(0, 1), C) is not None


def test_a_level_not_in_a_buffer_takes_the_copying_op(monkeypatch):
    """``convlstm_in_xh.train`` of an input that is no x half runs the functional op: the same values and
    gradients as ``convlstm.train``, and ``_InXh`` not at all."""
    from mscred.ops.triton import convlstm as lstm

    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    calls = []
    real = convlstm_in_xh._InXh.apply
    monkeypatch.setattr(convlstm_in_xh._InXh, "apply", lambda *a: calls.append(1) or real(*a))
    g = torch.Generator().manual_seed(5)
    T, B, C, n = 3, 2, 4, 5
    xp = _cl(torch.randn(T * B, C, n + 1, n + 1, generator=g)).view(T, B, C, n + 1, n + 1).transpose(0, 1)
    weight, bias = torch.randn(4 * C, 2 * C, 2, 2, generator=g) * 0.3, torch.randn(4 * C, generator=g)
    xp, weight, bias = (t.to(DEVICE) for t in (xp, weight, bias))
    results = []
    for fn in (lambda *a: convlstm_in_xh.train(*a, False), lambda *a: lstm.train(*a, padded=True)):
        leaves = [t.clone().requires_grad_() for t in (xp, weight, bias)]
        h = fn(leaves[0], leaves[1], leaves[2], 1.0)
        h.square().sum().backward()
        results.append((h.detach(), *(t.grad for t in leaves)))
    assert not calls
    assert_same_tensors(list(results[0]), list(results[1]), ["h", "dx", "dweight", "dbias"])


def _off_and_on(run, monkeypatch):
    """(``run()`` with MSCRED_ENCODER_XH=0, with =1, the levels ``_InXh`` ran, the copying forwards that ran)."""
    monkeypatch.setenv("MSCRED_ENCODER_XH", "0")
    ref = run()
    monkeypatch.setenv("MSCRED_ENCODER_XH", "1")
    calls, copies = [], []
    real, real_forward = convlstm_in_xh._InXh.apply, convlstm_concat.forward
    monkeypatch.setattr(convlstm_in_xh._InXh, "apply", lambda *a: calls.append(a[0].shape) or real(*a))
    monkeypatch.setattr(convlstm_concat, "forward", lambda *a: copies.append(a[0].shape) or real_forward(*a))
    return ref, run(), calls, copies


@pytest.mark.parametrize("fold, small_conv", [("0", "1"), ("1", "all")])
def test_the_fused_model_trains_the_same_with_it(fold, small_conv, monkeypatch, strict_float32):
    """The fused float32 model at n = 12 (every level's buffer shared with the next convolution) with every level
    on the concatenated path: MSCRED_ENCODER_XH on gives the loss and every gradient of off bit for bit (the same
    kernels on the same values), through ``_InXh`` at levels 1-3 (level 4 has one reader: its copy stays). With
    the attention folded into the ConvLSTM and not; conv1 as cuDNN + bias_act and as the small convolution."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", fold)
    monkeypatch.setenv("MSCRED_SMALL_CONV", small_conv)
    ref, ours, calls, copies = _off_and_on(
        fused_training_step(12, 2, torch.enable_grad, DEVICE), monkeypatch)
    c1, c2, c3, _ = step_channels(DEVICE)
    assert sorted(tuple(s[2:]) for s in calls) == [(c1, 13, 13), (c2, 7, 7), (c3, 4, 4)]  # any level order
    assert len(copies) == 1  # level 4
    assert_same_step(ours, ref)


def _both_copy_levers_off_and_on(run, monkeypatch):
    """(``run()`` with MSCRED_ENCODER_XH and MSCRED_ATTENTION_CAT off, ``run()`` with both on, the inputs' shapes
    of the ``_InXh`` calls in the second run)."""
    for name in ("MSCRED_ENCODER_XH", "MSCRED_ATTENTION_CAT"):
        monkeypatch.setenv(name, "0")
    ref = run()
    calls = []
    real = convlstm_in_xh._InXh.apply
    monkeypatch.setattr(convlstm_in_xh._InXh, "apply", lambda *a: calls.append(a[0].shape) or real(*a))
    for name in ("MSCRED_ENCODER_XH", "MSCRED_ATTENTION_CAT"):
        monkeypatch.setenv(name, "1")
    return ref, run(), calls


@pytest.mark.parametrize("n, B, fold", [(4, 1, "1"), (9, 3, "0")])
def test_awkward_sizes_train_the_same_with_both_copy_levers(n, B, fold, monkeypatch, strict_float32):
    """A batch of one (its size-1 dimension's strides are whatever the views make them), odd maps (9 -> 5 -> 3 -> 2)
    and 1 x 1 maps (n = 4: level 3, whose activation is stored NCHW and keeps its copying path): with
    MSCRED_ENCODER_XH and MSCRED_ATTENTION_CAT on, the loss and every gradient of both off, bit for bit."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_LSTM_ATTN_FOLD", fold)
    run = fused_training_step(n, B, torch.enable_grad, DEVICE)
    ref, ours, calls = _both_copy_levers_off_and_on(run, monkeypatch)
    # n = 4: levels 1-2 (level 3's map is 1 x 1); n = 9: levels 2-3 (conv2's TF padding of 9 x 9 starts a row
    # above the ConvLSTM's, so level 1's buffer is not shared and its ConvLSTM gets a padded copy)
    assert len(calls) == 2
    assert_same_step(ours, ref)


@pytest.mark.filterwarnings("ignore:overflow encountered in exp:RuntimeWarning")
def test_the_bf16_step_trains_the_same_with_both_copy_levers(monkeypatch):
    """bf16 under autocast, as the training step runs (small channel counts, n = 12, every level on the
    concatenated path; on the CPU the interpreter's bf16 is the GPU's since conftest's patch): with MSCRED_ENCODER_XH
    and MSCRED_ATTENTION_CAT on, the loss and every gradient of both off, bit for bit, through ``_InXh``."""
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    run = fused_training_step(12, 2, lambda: torch.autocast(DEVICE, dtype=torch.bfloat16), DEVICE,
                              channels=(4, 8, 8, 16))
    ref, ours, calls = _both_copy_levers_off_and_on(run, monkeypatch)
    assert len(calls) == 3  # levels 1-3 (level 4 has one reader: its copy stays)
    assert_same_step(ours, ref, bf16=True)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the bf16 training step as the H200 runs it: CUDA")
def test_the_bf16_training_model_takes_it_on_cuda(monkeypatch):
    """n = 30 under bf16 autocast, as the training step runs: levels 1-2 (the concatenated path's default levels)
    take ``_InXh`` and no copying forward runs; the same loss and gradients as with the switch off, up to the
    order of the bias gradients' atomic adds."""
    ref, ours, calls, copies = _off_and_on(
        fused_training_step(30, 4, lambda: torch.autocast("cuda", dtype=torch.bfloat16), "cuda"),
        monkeypatch)
    assert sorted(tuple(s[2:]) for s in calls) == [(32, 31, 31), (64, 16, 16)] and not copies  # any level order
    torch.testing.assert_close(ours[0], ref[0], rtol=1e-5, atol=0)
    for k in ref[1]:
        torch.testing.assert_close(ours[1][k], ref[1][k], rtol=2e-2, atol=1e-6, msg=lambda m, k=k: f"{k}: {m}")


@pytest.mark.parametrize("module", ["bias_act", "small_conv"])
def test_sm90_code_stores_the_second_output(module):
    """Compiled for the H200 here (tests/sm90_compile.py) at level 1's and level 2's shapes (bf16, bordered): the
    kernel with the second output has three times the stores of the default one (out, x's second copy, h_{-1}'s
    zeros). The default kernels keep their own arguments, so their code is what it was before."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    if module == "small_conv":
        kernels = ("_small_conv_fwd_kernel", "_small_conv_fwd_xh_kernel")
        constants = dict(x_sc=1, o_sc=1, SELU=True, HAS_BIAS=True, BORDER=True,
                         **sc.fwd_constants(3, 32, 3, torch.bfloat16))
        pointers = dict(x_ptr="*bf16", w_ptr="*bf16", o_ptr="*bf16", o2_ptr="*bf16")
        warps = sc.FWD_WARPS
    else:
        kernels = ("_bias_act_fwd_const_kernel", "_bias_act_fwd_xh_kernel")
        block_p, block_c, _ = ba._launch(640 * 16 * 16, 64, 1, ba.FWD_BLOCK)
        constants = dict(y_sc=1, o_sc=1, SELU=True, CDT="tl.float32", BLOCK_P=block_p, BLOCK_C=block_c,
                         SHUFFLE=1, BORDER=True, HWO=16 * 16, WO=16)
        pointers = dict(y_ptr="*bf16", o_ptr="*bf16", o2_ptr="*bf16", b_ptr="*fp32")
        warps = ba.FWD_WARPS
    stores = []
    for kernel in kernels:
        config = dict(constants=constants, pointers=pointers, num_warps=warps)
        listing = sm90_compile.sass(f"mscred.ops.triton.{module}", kernel, config)
        stores.append([ln for ln in listing.splitlines() if "STG" in ln])
    assert stores[0] and len(stores[1]) == 3 * len(stores[0]), [len(s) for s in stores]


def test_opcheck_schemas_and_fakes(monkeypatch):
    """torch.library.opcheck of the four ops: schema (the ConvLSTM ops mutate xh as declared, the epilogues nothing),
    fake kernels (their strides too). No autograd registration: autograd.Functions call them."""
    from mscred.ops.triton import convlstm as lstm

    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    utils = ("test_schema", "test_faketensor")
    g = torch.Generator().manual_seed(8)
    y = _cl(torch.randn(6, 4, 5, 5, generator=g)).to(DEVICE)
    torch.library.opcheck(ba.bias_act_fused_xh, (y, torch.randn(4, generator=g).to(DEVICE), True, [0, 1, 0, 1], 2),
                          test_utils=utils)
    x = _cl(torch.randn(6, 3, 5, 5, generator=g)).to(DEVICE)
    torch.library.opcheck(sc.small_conv_fused_xh, (x, torch.randn(4, 3, 3, 3, generator=g).to(DEVICE),
                                                   torch.randn(4, generator=g).to(DEVICE), True, [0, 1, 0, 1], 2),
                          test_utils=utils)
    T, B, C = 3, 2, 4
    xh = _cl(torch.randn(T * B, 2 * C, 6, 6, generator=g)).to(DEVICE).view(T, B, 2 * C, 6, 6)
    xh[0, :, C:] = 0
    w = torch.randn(4 * C, 2 * C, 2, 2, generator=g).to(DEVICE) * 0.3
    w_x, w_h = lstm.train_inputs(xh[:, :, :C].transpose(0, 1)[..., :5, :5], w)[1:]
    bias = torch.randn(4 * C, generator=g).to(DEVICE)
    torch.library.opcheck(convlstm_in_xh.convlstm_train_in_xh, (xh, w_x, w_h, bias, 1.0), test_utils=utils)
    for cat in (False, True):
        torch.library.opcheck(convlstm_in_xh.convlstm_attention_train_in_xh, (xh, w_x, w_h, bias, 1.0, cat),
                              test_utils=utils)
