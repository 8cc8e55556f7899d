"""The fused ConvLSTM (Triton cell kernels + hoisted convolutions) against the float64 reference, forward and backward.

On a CPU machine conftest.py switches on Triton's interpreter, so the same kernels run here at small sizes; on a
CUDA machine they compile for the GPU and the full-size rows run too. The oracle is ``mscred.ops.reference.convlstm``
in float64; the fused op's error in a given dtype must stay within 2x the reference's own error in that dtype.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from mscred import ops
from mscred.ops import reference as ref
from mscred.ops.triton import convlstm as fused
from mscred.ops.triton import convlstm_gemm as lstm_gemm

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import cell_kernel_sass  # noqa: E402 (the cell kernels' sm_90 configurations, benchmarks/cell_kernel_sass.py)

CUDA = torch.cuda.is_available()
DEVICE = "cuda" if CUDA else "cpu"
pytestmark = [pytest.mark.skipif(not fused.is_available()[0], reason=f"fused ConvLSTM unavailable: "
                                                  f"{fused.is_available()[1]}"),
              pytest.mark.usefixtures("strict_float32")]
needs_cuda = pytest.mark.skipif(not CUDA, reason="full-size and bf16 rows need a CUDA device")
FB = 1.0  # forget bias of TensorFlow's ConvLSTMCell


def _inputs(B, T, C, Ch, n, k, seed, dtype=torch.float64, device=DEVICE):
    """Random (never zero) inputs with gate pre-activations of order 1, as in a trained model."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(B, T, C, n, n, generator=g, dtype=torch.float64)
    w = torch.randn(4 * Ch, C + Ch, k, k, generator=g, dtype=torch.float64) / (k * (C + Ch) ** 0.5)
    b = torch.randn(4 * Ch, generator=g, dtype=torch.float64) * 0.5
    dout = torch.randn(B, T, Ch, n, n, generator=g, dtype=torch.float64)
    return [t.to(device=device, dtype=dtype) for t in (x, w, b, dout)]


def _fwd_bwd(fn, x, w, b, dout):
    x, w, b = (t.detach().clone().requires_grad_() for t in (x, w, b))
    y = fn(x, w, b, FB)
    grads = torch.autograd.grad(y, (x, w, b), dout.to(y.dtype))
    return [y.detach()] + [g_.detach() for g_ in grads]


def _rel(a, b):
    a, b = a.double().cpu(), b.double().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-300)).item()


def _check_against_oracle(B, T, C, Ch, n, k, dtype, seed, floor):
    """Fused in ``dtype`` vs the float64 oracle, with the reference in ``dtype`` as the yardstick."""
    x, w, b, dout = _inputs(B, T, C, Ch, n, k, seed)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(dtype) for t in (x, w, b, dout)]
    ours = _fwd_bwd(fused.convlstm, *low)
    theirs = _fwd_bwd(ref.convlstm, *low)
    for name, o, t, r in zip(("h", "dx", "dweight", "dbias"), ours, theirs, oracle):
        assert o.shape == r.shape and o.dtype == dtype, name
        assert torch.isfinite(o).all(), name
        err, ref_err = _rel(o, r), _rel(t, r)
        assert err <= 2 * ref_err + floor, f"{name}: fused error {err:.3g} vs reference error {ref_err:.3g}"


@pytest.fixture(params=["nhwc", "nchw"])
def layout(request, monkeypatch):
    """Both buffer orders of the fused op (channels-last is the default)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", request.param)
    return request.param


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
@pytest.mark.parametrize("k", [2, 3])
def test_float64_equals_reference(n, B, k, layout):
    """In float64 the fused op computes the same function as the reference to rounding: catches any index error."""
    if k == 3 and layout == "nchw" and B != 3:
        pytest.skip("kernel 3 in NCHW order: one batch size is enough (the kernel code is layout-independent)")
    if CUDA and n != 30:
        pytest.skip("on CUDA the small grid runs at n = 30 only (CI covers it on the interpreter; full size below)")
    x, w, b, dout = _inputs(B, 5, 3, 3, n, k, seed=100 * n + 10 * B + k)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
def test_float32_within_twice_reference_error(n, B):
    _check_against_oracle(B, 5, 4, 4, n, 2, torch.float32, seed=7 * n + B, floor=1e-6)


@pytest.mark.parametrize("T", [1, 2])
def test_short_sequences(T, layout):
    """T = 1 has no recurrent convolution at all, T = 2 exactly one: the edge cases of the step loop."""
    x, w, b, dout = _inputs(2, T, 3, 3, 5, 2, seed=T)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


def _stored_channels_last(t):
    """(B, T, C, H, W) with the storage order (B, T, H, W, C): what the channels-last encoder hands the op."""
    return t.permute(0, 1, 3, 4, 2).contiguous().permute(0, 1, 4, 2, 3)


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("Ch", [8, 16, 96])
def test_channels_last_input_and_in_kernel_bias_gradient(k, Ch, layout):
    """The bias gradient inside the cell kernel (nhwc; Ch = 96 > MAX_BLOCK_C: two column programs, the second half
    masked); a channels-last input and output gradient are read in place; h comes back in the op's storage order,
    dx channels-last too (the interior of the padded input's gradient, ``padding.pad_copy``). float64 vs the
    reference."""
    x, w, b, dout = _inputs(3, 5, 8, Ch, 6, k, seed=40 + Ch + k)
    x_cl, dout_cl = _stored_channels_last(x), _stored_channels_last(dout)
    got = _fwd_bwd(fused.convlstm, x_cl, w, b, dout_cl)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), got, _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name
    if layout == "nhwc":
        assert got[0].permute(0, 1, 3, 4, 2).is_contiguous() and got[1].stride(2) == 1


@pytest.mark.parametrize("tiles", [1, 2, 3])
def test_bias_gradient_over_many_programs(tiles, monkeypatch):
    """The bias gradient summed over many cell-kernel programs (atomic adds of per-program column sums; the last
    program's tile partly masked, with several row tiles per program whole tiles past the end too): float64 vs
    the reference. Small tiles force several programs under the interpreter too."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_CELL_BWD_TILES", f"*:256/{tiles}")
    monkeypatch.setattr(fused, "INTERPRETER_BLOCK", 256)
    monkeypatch.setattr(fused, "BLOCK", 256)
    x, w, b, dout = _inputs(3, 4, 5, 16, 6, 2, seed=77)  # 108 pixels, 16 per program: 7 programs
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


def test_backward_tiles_setting(monkeypatch):
    """(BLOCK, TILES) of the backward cell kernel: BWD_TILES per channel count, else the forward's BLOCK and one
    tile, MSCRED_CELL_BWD_TILES over both (one level or *); a malformed entry names the form. The
    interpreter keeps its BLOCK; NCHW buffers take one tile per program."""
    monkeypatch.delenv("MSCRED_CELL_BWD_TILES", raising=False)
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert fused.bwd_tiles(48, 1024) == (1024, 1)
    monkeypatch.setitem(fused.BWD_TILES, 32, (512, 4))
    monkeypatch.delitem(fused.BWD_TILES, 64)
    assert fused.bwd_tiles(32, 1024) == (512, 4) and fused.bwd_tiles(64, 1024) == (1024, 1)
    monkeypatch.setenv("MSCRED_CELL_BWD_TILES", "64:2048/2;*:256/8")
    assert fused.bwd_tiles(64, 1024) == (256, 8)
    monkeypatch.setenv("MSCRED_CELL_BWD_TILES", "64:2048/2")
    assert fused.bwd_tiles(64, 1024) == (2048, 2) and fused.bwd_tiles(32, 1024) == (512, 4)
    block, block_c, tiles, grid = fused._launch_bwd("nhwc", 100 * 64, 64)
    assert (block, block_c, tiles) == (2048, 64, 2) and grid == (100 * 64 // 32 // 2, 1)
    assert fused._launch_bwd("nchw", 100 * 64, 64)[2] == 1
    monkeypatch.setenv("MSCRED_CELL_BWD_TILES", "64:16/2")  # a tile narrower than the channels: 16 x 16, 4 columns
    assert fused._launch_bwd("nhwc", 100 * 64, 64) == (16, 16, 2, (100 * 64 // 2, 4))
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert fused.bwd_tiles(64, fused.INTERPRETER_BLOCK) == (fused.INTERPRETER_BLOCK, 2)
    for bad in ("64:2048", "64:a/2", "64:2048/0", "64:1000/2"):
        monkeypatch.setenv("MSCRED_CELL_BWD_TILES", bad)
        with pytest.raises(ValueError, match="CH:BLOCK/TILES"):
            fused.bwd_tiles(64, 1024)


def test_broadcast_output_gradient(layout):
    """y.sum().backward() hands the op an expanded (all-stride-0) gradient: it must be read as ones."""
    x, w, b, _ = _inputs(2, 3, 4, 4, 5, 2, seed=21)
    grads = []
    for fn in (fused.convlstm, ref.convlstm):
        xx, ww, bb = (t.detach().clone().requires_grad_() for t in (x, w, b))
        fn(xx, ww, bb, FB).sum().backward()
        grads.append((xx.grad, ww.grad, bb.grad))
    for name, o, r in zip(("dx", "dweight", "dbias"), *grads):
        assert _rel(o, r) < 1e-12, name


def test_hidden_size_differs_from_input_channels(layout):
    x, w, b, dout = _inputs(3, 4, 2, 5, 6, 3, seed=11)
    for name, o, r in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout),
                          _fwd_bwd(ref.convlstm, x, w, b, dout)):
        assert _rel(o, r) < 1e-12, name


def test_inference_without_autograd_gives_the_same_states(layout):
    """Under no_grad the op skips storing the gate pre-activations; the hidden states must not change."""
    x, w, b, _ = _inputs(3, 5, 3, 3, 7, 2, seed=12)
    with torch.no_grad():
        got = fused.convlstm(x, w, b, FB)
    torch.testing.assert_close(got, ref.convlstm(x, w, b, FB), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("B, C, n", [(3, 16, 5), (2, 32, 16)] + ([(128, 32, 30), (300, 64, 15), (7, 256, 4)]
                                                                   if CUDA else []))
def test_half_cell_state_in_bf16_inference(B, C, n, monkeypatch):
    """bf16 inference on the per-step path keeps c in float16, updated in place, the last step's not stored: its
    error against the float64 oracle stays within 1.25x that of a float32 cell (MSCRED_LSTM_HALF_CELL=0), and
    within twice the bf16 reference's."""
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "0")
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")  # its cell state lives on the SM, in float16 too
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x, w, b, _ = _inputs(B, 5, C, C, n, 2, seed=B + C + n)
    oracle = ref.convlstm(x, w, b, FB)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = _rel(ref.convlstm(*low, FB), oracle)
    with torch.no_grad():
        out, _, cells, _ = fused.convlstm_fused(*low, FB, "nhwc")
        assert cells.dtype == torch.float16 and cells.shape[0] == 1
        monkeypatch.setenv("MSCRED_LSTM_HALF_CELL", "0")
        out32, _, cells32, _ = fused.convlstm_fused(*low, FB, "nhwc")
        assert cells32.dtype == torch.float32
    assert _rel(out, oracle) <= 1.25 * _rel(out32, oracle)
    assert _rel(out, oracle) <= 2 * yardstick + 1e-3


@pytest.mark.parametrize("B, C, n", [(3, 16, 5), (2, 8, 16)])
def test_half_cell_state_in_bf16_training(B, C, n, monkeypatch):
    """bf16 training stores every c_t in float16 for the backward (the running dc and the bias gradient stay
    float32): h and every gradient against the float64 oracle within 1.25x the error with float32 cells
    (MSCRED_LSTM_HALF_CELL_TRAIN=0), and within twice the bf16 reference's."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x, w, b, dout = _inputs(B, 5, C, C, n, 2, seed=3 * B + C + n)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    yardstick = _fwd_bwd(ref.convlstm, *low)
    assert fused.convlstm_train(*fused.train_inputs(*low[:2]), low[2], FB, "nhwc")[2].dtype == torch.float16
    half = _fwd_bwd(fused.convlstm, *low)
    monkeypatch.setenv("MSCRED_LSTM_HALF_CELL_TRAIN", "0")
    assert fused.convlstm_train(*fused.train_inputs(*low[:2]), low[2], FB, "nhwc")[2].dtype == torch.float32
    full = _fwd_bwd(fused.convlstm, *low)
    for name, h, f, y, o in zip(("h", "dx", "dweight", "dbias"), half, full, yardstick, oracle):
        assert _rel(h, o) <= 1.25 * _rel(f, o) + 1e-4, name
        assert _rel(h, o) <= 2 * _rel(y, o) + 1e-3, name


def _cell_kernel_config(kernel: str, fast: bool) -> dict:
    """sm90_compile's configuration of a training cell kernel at level 1 in bf16, as launched
    (benchmarks/cell_kernel_sass.py's, which reports the same code for every level)."""
    return cell_kernel_sass.cell_kernel_config(kernel, fast, block=1024 if kernel == "cell_fwd_kernel" else 512)


@pytest.mark.parametrize("kernel", ["cell_fwd_kernel", "cell_bwd_kernel"])
def test_sfu_activations_compile_to_one_tanh_each(kernel):
    """FAST_ACT (bf16 / fp16 gates on CUDA) makes each sigmoid and tanh of the cell kernels one MUFU.TANH in the
    sm_90 code that Triton compiles here: no MUFU.EX2 left, and at least 20% fewer instructions than the exact
    forms' (an exp and a division each, with their range checks). The interpreter cannot run the inline PTX, so this
    is the CPU suite's check of that path; its accuracy is checked on the GPU
    (``test_sfu_activations_keep_bf16_training_accuracy``)."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    instructions = cell_kernel_sass.instructions
    module = "mscred.ops.triton.convlstm_kernels"
    fast = instructions(sm90_compile.sass(module, kernel, _cell_kernel_config(kernel, True)))
    exact = instructions(sm90_compile.sass(module, kernel, _cell_kernel_config(kernel, False)))
    assert any("MUFU.TANH" in i for i in fast) and not any("MUFU.EX2" in i for i in fast)
    assert any("MUFU.EX2" in i for i in exact) and not any("MUFU.TANH" in i for i in exact)
    assert len(fast) < 0.8 * len(exact), (len(fast), len(exact))


def test_bias_gradient_atomics_are_unfenced():
    """The backward cell kernel's bias-gradient atomic adds are relaxed: its sm_90 code makes them four REDG adds
    (fire and forget, no value returned) and has no MEMBAR.ALL.GPU; the default acq_rel compiles each to a fence,
    which waits for the program's stores to reach the GPU, and an ATOMG that returns the old value."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    listing = sm90_compile.sass("mscred.ops.triton.convlstm_kernels", "cell_bwd_kernel",
                                _cell_kernel_config("cell_bwd_kernel", True))
    assert listing.count("REDG.E.ADD") == 4 and "ATOMG" not in listing and "MEMBAR" not in listing


def test_recomputed_cell_state_is_one_load_less():
    """RECOMPUTE_C drops the backward's load of c_t from the compiled sm_90 code (one global load fewer per tile
    iteration), which is the point of it: the float64 tests cannot see it, both paths give the same numbers."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile

    def loads(recompute: bool) -> int:
        config = _cell_kernel_config("cell_bwd_kernel", True)
        config["constants"].update(RECOMPUTE_C=recompute, TILES=1)
        listing = sm90_compile.sass("mscred.ops.triton.convlstm_kernels", "cell_bwd_kernel", config)
        return listing.count("LDG.E")

    assert loads(True) == loads(False) - 1


def test_sfu_activations_only_for_half_gates_on_cuda(monkeypatch):
    """The SFU path is taken for bf16 / fp16 gates outside the interpreter, never for float32 / float64 (the
    oracle paths), and MSCRED_LSTM_FAST_ACT=0 turns it off."""
    assert not fused.fast_activations(torch.float32) and not fused.fast_activations(torch.float64)
    monkeypatch.setattr(fused, "_interpreting", lambda: False)
    assert fused.fast_activations(torch.bfloat16) and fused.fast_activations(torch.float16)
    monkeypatch.setenv("MSCRED_LSTM_FAST_ACT", "0")
    assert not fused.fast_activations(torch.bfloat16)
    monkeypatch.setattr(fused, "_interpreting", lambda: True)
    monkeypatch.delenv("MSCRED_LSTM_FAST_ACT")
    assert not fused.fast_activations(torch.bfloat16)


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(16, 32, 30), (16, 64, 15), (16, 128, 8), (7, 256, 4)])
@pytest.mark.parametrize("time_major", [False, True])
def test_sfu_activations_keep_bf16_training_accuracy(B, C, n, time_major, monkeypatch):
    """bf16 training with the SFU's tanh (the CUDA default) against the float64 oracle: h and every gradient
    within 1.25x the error of the exact forms (MSCRED_LSTM_FAST_ACT=0) plus 1e-4, on the default and (time-major
    input, levels 1-2) the concatenated path."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    x, w, b, dout = _inputs(B, 5, C, C, n, 2, seed=B + C + n + time_major)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    run = (lambda: _time_major_fwd_bwd(*low, 2)) if time_major else (lambda: _fwd_bwd(fused.convlstm, *low))
    assert fused.fast_activations(torch.bfloat16)
    fast = run()
    monkeypatch.setenv("MSCRED_LSTM_FAST_ACT", "0")
    exact = run()
    for name, f, e, o in zip(("h", "dx", "dweight", "dbias"), fast, exact, oracle):
        assert _rel(f, o) <= 1.25 * _rel(e, o) + 1e-4, f"{name}: SFU {_rel(f, o):.3g} vs exact {_rel(e, o):.3g}"


@pytest.mark.parametrize("time_major", [False, True])
def test_cell_state_recomputed_or_read_back_agree(time_major, monkeypatch):
    """The backward cell kernel recomputes c_t from the pre-activations and c_{t-1} (the default) or reads the
    stored c_t (MSCRED_LSTM_RECOMPUTE_C=0): in float64 both equal the reference's h and gradients, on the default
    path and (time-major input) the concatenated one. MSCRED_LSTM_BF16_DC=1 stores the running dc in bf16 for
    bf16 gates only."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "1")
    x, w, b, dout = _inputs(2, 4, 3, 5, 6, 2, seed=71 + time_major)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    run = (lambda: _time_major_fwd_bwd(x, w, b, dout, 2)) if time_major else (lambda: _fwd_bwd(fused.convlstm,
                                                                                                x, w, b, dout))
    for setting in ("1", "0"):
        monkeypatch.setenv("MSCRED_LSTM_RECOMPUTE_C", setting)
        assert fused.cell_backward_options(torch.float64) == (setting == "1", torch.float64)
        for name, g, e in zip(("h", "dx", "dweight", "dbias"), run(), expect):
            torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=f"{name}, MSCRED_LSTM_RECOMPUTE_C={setting}")
    monkeypatch.setenv("MSCRED_LSTM_BF16_DC", "1")
    assert fused.cell_backward_options(torch.bfloat16)[1] == torch.bfloat16
    assert fused.cell_backward_options(torch.float32)[1] == torch.float32


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("wave", ["2", "1", "0/64"])
def test_grid_stride_backward_cell_kernel_equals_reference(time_major, wave, monkeypatch):
    """MSCRED_CELL_WAVE: the backward cell kernel as one wave of grid-stride programs (each walking many row tiles
    here: small tiles, few programs; or more programs than tiles) gives the float64 reference's gradients, on the
    default and the concatenated path, the bias gradient summed per program across its tiles."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "1")
    monkeypatch.setattr(fused, "INTERPRETER_BLOCK", 64)  # 8 pixels x 8 channels a tile: 19 row tiles a step
    monkeypatch.setenv("MSCRED_CELL_WAVE", wave)
    x, w, b, dout = _inputs(3, 4, 3, 5, 7, 2, seed=80 + time_major)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    got = _time_major_fwd_bwd(x, w, b, dout, 2) if time_major else _fwd_bwd(fused.convlstm, x, w, b, dout)
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=f"{name}, MSCRED_CELL_WAVE={wave}")


@pytest.mark.parametrize("time_major", [False, True])
@pytest.mark.parametrize("B, T, C, Ch, n", [(3, 5, 3, 4, 5), (2, 3, 4, 6, 1), (1, 2, 2, 3, 7)])
def test_recurrent_gradient_by_gemm_equals_reference(time_major, B, T, C, Ch, n, monkeypatch):
    """The per-step path's recurrent data gradient as one GEMM into the four tap shares, summed by the backward
    cell kernel as it reads them (``convlstm_gemm.dgrad_by_gemm``, the default for 2 x 2 kernels; 0 turns it off),
    gives the float64 reference's h and gradients, at maps of 1, 5 and 7 pixels a side, with small tiles (many programs, ragged
    ends)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "100000")  # the per-step path at every size
    monkeypatch.setattr(fused, "INTERPRETER_BLOCK", 64)
    monkeypatch.setenv("MSCRED_LSTM_DGRAD_GEMM", "0")
    x, w, b, dout = _inputs(B, T, C, Ch, n, 2, seed=90 + n + time_major)
    two, three = fused._padding(2), fused._padding(3)
    assert not lstm_gemm.dgrad_by_gemm("nhwc", 2, two, x)
    monkeypatch.delenv("MSCRED_LSTM_DGRAD_GEMM")
    assert lstm_gemm.dgrad_by_gemm("nhwc", 2, two, x) and not lstm_gemm.dgrad_by_gemm("nhwc", 3, three, x)
    assert not lstm_gemm.dgrad_by_gemm("nchw", 2, two, x)
    # float32 on CUDA keeps cuDNN's TF32 convolution (the GEMM would run in full float32)
    assert lstm_gemm.dgrad_by_gemm("nhwc", 2, two, x.float()) == (not x.is_cuda)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    got = _time_major_fwd_bwd(x, w, b, dout, 2) if time_major else _fwd_bwd(fused.convlstm, x, w, b, dout)
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


def test_recurrent_dgrad_taps_equals_the_convolution_gradient():
    """``recurrent_dgrad_taps``'s four blocks, each added back at its shift, are cuDNN's / PyTorch's data gradient
    of the zero-bordered h (its interior), in float64."""
    g = torch.Generator().manual_seed(5)
    B, Ch, n = 2, 3, 4
    w = torch.randn(4 * Ch, Ch, 2, 2, generator=g, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    dpre = torch.randn(B, 4 * Ch, n, n, generator=g, dtype=torch.float64).contiguous(memory_format=torch.channels_last)
    hp = torch.zeros(B, Ch, n + 1, n + 1, dtype=torch.float64)
    expect = torch.ops.aten.convolution_backward(dpre, hp, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1,
                                                 [True, False, False])[0][:, :, :n, :n]
    taps = lstm_gemm.recurrent_dgrad_taps(dpre, w)
    got = torch.zeros(B, Ch, n, n, dtype=torch.float64)
    for k, (dy, dx) in enumerate(((0, 0), (0, 1), (1, 0), (1, 1))):
        got[:, :, dy:, dx:] += taps[:, k * Ch:(k + 1) * Ch, :n - dy, :n - dx]
    torch.testing.assert_close(got, expect, rtol=1e-12, atol=1e-12)


def test_wave_grid_setting(monkeypatch):
    """The backward's grid from ``wave_grid``: on CUDA by default, when it holds more programs than ``WAVE_PER_SM``
    per SM, one wave; without CUDA unchanged unless MSCRED_CELL_WAVE is set; set, for channels-last buffers, at
    most SMs x programs-per-SM programs split over the channel blocks (0: the default grid; the earlier "0/N" form
    still read); a malformed value, or a forward count (that path is gone), names itself."""
    grid = (1800, 2)
    sms = torch.cuda.get_device_properties(0).multi_processor_count if CUDA else 1
    per_sm = fused.WAVE_PER_SM
    assert fused.wave_grid(grid, "nhwc") == (((sms * per_sm // 2, 2), True) if CUDA else (grid, False))
    assert fused.wave_grid((5, 1), "nhwc") == ((5, 1), False)  # one wave already
    for off in ("0", "0/0"):
        monkeypatch.setenv("MSCRED_CELL_WAVE", off)
        assert fused.wave_grid(grid, "nhwc") == (grid, False)
    for six in ("6", "0/6"):
        monkeypatch.setenv("MSCRED_CELL_WAVE", six)
        assert fused.wave_grid(grid, "nchw") == (grid, False)
        assert fused.wave_grid(grid, "nhwc") == ((min(1800, sms * 6 // 2), 2), True)
        assert fused.wave_grid((5, 1), "nhwc") == ((5, 1), True)
    for bad in ("9/6", "a/b", "9-6", "-1", "0/-1", "1/2/3"):
        monkeypatch.setenv("MSCRED_CELL_WAVE", bad)
        with pytest.raises(ValueError, match="MSCRED_CELL_WAVE"):
            fused.wave_grid(grid, "nhwc")


def test_forget_bias_is_used():
    x, w, b, _ = _inputs(2, 3, 3, 3, 5, 2, seed=3)
    torch.testing.assert_close(fused.convlstm(x, w, b, 0.25), ref.convlstm(x, w, b, 0.25), rtol=1e-12, atol=1e-12)
    assert not torch.allclose(fused.convlstm(x, w, b, 0.25), fused.convlstm(x, w, b, 1.0))


def test_dispatcher_routes_fused_here(monkeypatch):
    """backend "fused" -> this module's convlstm (checked through which function is called)."""
    assert ops.get_impl("convlstm", "fused") is fused.convlstm
    calls, real = [], fused.run_cast
    monkeypatch.setattr(fused, "run_cast", lambda *a: calls.append(1) or real(*a))
    x, w, b, _ = _inputs(1, 2, 2, 2, 4, 2, seed=5)
    torch.testing.assert_close(ops.convlstm(x, w, b, FB, backend="fused"), ref.convlstm(x, w, b, FB))
    assert calls == [1]


def _time_major(x: torch.Tensor, layout: str) -> torch.Tensor:
    """x (B, T, C, H, W) stored as the encoder stores it while training: (T, B, H, W, C) for "nhwc", (T, B, C, H,
    W) for "nchw"."""
    if layout == "nhwc":
        return x.permute(1, 0, 3, 4, 2).contiguous().permute(1, 0, 4, 2, 3)
    return x.transpose(0, 1).contiguous().transpose(0, 1)


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("time_major", [False, True])
def test_opcheck_schema_fake_and_autograd(layout, time_major):
    """torch.library.opcheck of the training op and its backward: schema, fake (meta) kernel (the fakes' strides
    too: the gradient of a time-major input comes back time-major), autograd registration."""
    x, w, b, dout = _inputs(2, 3, 2, 2, 4, 2, seed=9)
    if time_major:
        x = _time_major(x, layout)
    xp, w_x, w_h = fused.train_inputs(x, w, layout)
    assert fused._images(xp, torch.channels_last if layout == "nhwc" else torch.contiguous_format)[1] == time_major
    for t in (xp, w_x, w_h, b):
        t.requires_grad_()
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(fused.convlstm_train, (xp, w_x, w_h, b, FB, layout), test_utils=utils)
    state = fused.convlstm_train(xp, w_x, w_h, b, FB, layout)[1:]
    torch.library.opcheck(fused.convlstm_train_backward, (dout, xp, w_x, w_h, b, *state, FB, layout),
                          test_utils=("test_schema", "test_faketensor"))


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("B, T", [(3, 5), (1, 4), (4, 1)])
def test_time_major_and_padded_input_equal_reference(k, B, T, layout):
    """The encoder's training layout: x stored time-major (T*B images) and handed over already zero-bordered
    (``train(..., padded=True)``). h and the gradients of x (through the padded copy's interior), the weight and
    the bias equal the float64 reference's; the gradient of the padded input keeps its time-major order, and
    the cell backward then writes the gate gradients once (no second, batch-major buffer)."""
    x, w, b, dout = _inputs(B, T, 3, 4, 7, k, seed=20 + k + B)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    fmt = torch.channels_last if layout == "nhwc" else torch.contiguous_format
    x_tm = _time_major(x, layout).detach().requires_grad_()
    w_, b_ = w.clone().requires_grad_(), b.clone().requires_grad_()
    xp = fused.pad_steps(x_tm, fused._padding(k), fmt)
    assert fused._images(xp, fmt)[1]  # still time-major
    y = fused.train(xp, w_, b_, FB, padded=True)
    dx, dw, db = torch.autograd.grad(y, (x_tm, w_, b_), dout)
    for name, got, want in zip(("h", "dx", "dweight", "dbias"), (y, dx, dw, db), expect):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("k", [2, 3])
def test_recurrent_buffer_border_is_written_by_the_cell_kernel(k, layout, monkeypatch):
    """The zero border of the recurrent convolutions' input (h_t inside ``hprev``) is written by the forward cell
    kernel with h_t (HP_BORDER: bottom / right for k = 2, every side for k = 3): with the buffer filled with NaN
    before the steps, h and every gradient still equal the float64 reference's -- a border cell left unwritten
    would spread NaN."""
    real = fused._buffers

    def poisoned(*args, **kwargs):
        out, pre, cells, hprev = real(*args, **kwargs)
        return out, pre, cells, hprev.fill_(float("nan"))
    monkeypatch.setattr(fused, "_buffers", poisoned)
    x, w, b, dout = _inputs(3, 4, 3, 4, 6, k, seed=40 + k)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    for name, got, want in zip(("h", "dx", "dweight", "dbias"), _fwd_bwd(fused.convlstm, x, w, b, dout), expect):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10, msg=name)


def test_split_weight_casts_once_and_merges_gradients():
    """_SplitWeight: (w_x, w_h) in the compute dtype and order from one float32 master; the gradient comes back
    as one float32 tensor of the master's order, also when only one half has a gradient."""
    w = torch.randn(8, 5, 2, 2, dtype=torch.float32, requires_grad=True)
    w_x, w_h = fused._SplitWeight.apply(w, 3, torch.float64, torch.channels_last)
    assert w_x.dtype == w_h.dtype == torch.float64 and w_x.shape == (8, 3, 2, 2) and w_h.shape == (8, 2, 2, 2)
    assert w_x.is_contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(torch.cat([w_x, w_h], 1), w.double())
    gx, gh = torch.randn_like(w_x), torch.randn_like(w_h)
    (g,) = torch.autograd.grad((w_x * gx).sum() + (w_h * gh).sum(), w)
    assert g.dtype == torch.float32 and g.is_contiguous()
    torch.testing.assert_close(g, torch.cat([gx, gh], 1).float())
    (g,) = torch.autograd.grad((w_h * gh).sum(), w)
    torch.testing.assert_close(g, torch.cat([torch.zeros_like(gx), gh], 1).float())


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (128, 128, 8), (128, 256, 4), (7, 32, 30),
                                     (3, 256, 4), (1, 64, 55)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_full_size_on_gpu(B, C, n, dtype):
    """The MSCRED levels at batch 128 (and awkward batches), float32 and bf16, kernel 2."""
    _check_against_oracle(B, 5, C, C, n, 2, dtype, seed=B + C + n, floor=1e-5 if dtype == torch.float32 else 1e-3)


@needs_cuda
def test_autocast_casts_inputs_and_keeps_fp32_master_grads():
    x, w, b, dout = _inputs(16, 5, 32, 32, 30, 2, seed=1, dtype=torch.float32)
    w.requires_grad_()
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = fused.convlstm(x, w, b, FB)
    assert y.dtype == torch.bfloat16
    (y.float() * dout).sum().backward()
    assert w.grad.dtype == torch.float32 and torch.isfinite(w.grad).all()
    oracle = _fwd_bwd(ref.convlstm, *(t.double() for t in (x, w.detach(), b, dout)))
    assert _rel(y, oracle[0]) < 2e-2
    assert _rel(w.grad, oracle[2]) < 5e-2


@needs_cuda
def test_cuda_graph_capture_replays_forward_and_backward():
    x, w, b, dout = _inputs(8, 5, 16, 16, 12, 2, seed=2, dtype=torch.float32)
    w.requires_grad_()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside the graph (Triton compiles, cuDNN picks algorithms)
        for _ in range(2):
            w.grad = None
            (fused.convlstm(x, w, b, FB) * dout).sum().backward()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    w.grad = None
    with torch.cuda.graph(graph):
        y = fused.convlstm(x, w, b, FB)
        (y * dout).sum().backward()
    x.copy_(torch.randn_like(x))  # replay on new data: the graph must read the static input
    graph.replay()
    torch.cuda.synchronize()
    expect = _fwd_bwd(fused.convlstm, x, w.detach(), b, dout)
    torch.testing.assert_close(y, expect[0])
    torch.testing.assert_close(w.grad, expect[2], rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------------------------------------------
# Inference with one program per window through every step (window_lstm_kernel, ops/triton/convlstm_window.py).
# ----------------------------------------------------------------------------------------------------------------
def _infer_counting(monkeypatch, x, w, b):
    """The op under no_grad, and how many levels went through the per-window kernel (the Triton one: the resident
    CUDA kernel, which bf16 inference of these levels takes first on a GPU, is switched off)."""
    from mscred.ops.triton import convlstm_window
    monkeypatch.setenv("MSCRED_RESIDENT_LSTM", "0")
    calls, real = [], convlstm_window.run
    monkeypatch.setattr(convlstm_window, "run", lambda *a: calls.append(1) or real(*a))
    with torch.no_grad():
        return fused.convlstm(x, w, b, FB), len(calls)


@pytest.mark.parametrize("n", [5, 16, 30])
@pytest.mark.parametrize("B", [1, 3, 7])
@pytest.mark.parametrize("k", [2, 3])
def test_window_inference_float32(n, B, k, monkeypatch):
    """MSCRED_WINDOW_LSTM=all: float32 inference through the per-window kernel (exact dots) is within twice the
    float32 reference's error of the float64 oracle; awkward batches and sizes (pixel tiles cut off mid-row and
    past the image), both kernel sizes (K = 64, 128, 144: padded to a power of two), 16 and 32 hidden channels, 3 and 5
    steps."""
    if CUDA and n != 30:
        pytest.skip("on CUDA the small grid runs at n = 30 only (CI covers it on the interpreter)")
    if not CUDA and n == 30 and B != 1:
        pytest.skip("the interpreter pays per program: n = 30 at batch 1 only (the GPU runs the rest)")
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all")
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    if not CUDA:
        monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", f"16/4/1/{B % 2}")  # both gate loads: prefetched or not
    Ch = 32 if B == 3 and k == 2 else 16  # float32 at 32 channels and k = 3: no tile fits (see the plan test)
    T = 3 if B == 3 else 5
    x, w, b, _ = _inputs(B, T, 8, Ch, n, k, seed=7 * n + B + k)
    got, window_levels = _infer_counting(monkeypatch, x.float(), w.float(), b.float())
    assert window_levels == 1
    oracle = ref.convlstm(x, w, b, FB)
    yardstick = ref.convlstm(x.float(), w.float(), b.float(), FB)
    assert _rel(got, oracle) <= 2 * _rel(yardstick, oracle) + 1e-6


def test_window_inference_on_sliding_windows(monkeypatch):
    """Scoring passes overlapping windows as one strided view (shared input gates): the kernel reads them through
    those strides, and each window's state stays its own."""
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all")
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    B, T, C, Ch, n = 6, 5, 8, 32, 7
    x, w, b, _ = _inputs(B + T - 1, 1, C, Ch, n, 2, seed=21)
    steps = x[:, 0].float().contiguous(memory_format=torch.channels_last)
    windows = steps.as_strided((B, T, C, n, n), (steps.stride(0), *steps.stride()), 0)
    got, window_levels = _infer_counting(monkeypatch, windows, w.float(), b.float())
    assert window_levels == 1
    oracle = ref.convlstm(windows.double().contiguous(), w, b, FB)
    assert _rel(got, oracle) < 1e-5


def test_window_kernel_conditions(monkeypatch):
    """Training (save), NCHW buffers, float64, channel counts off the powers of two or past MAX_CH, batches outside
    MIN_BATCH .. MAX_BATCH (32 channels: below MIN_BATCH) and MSCRED_WINDOW_LSTM=0 keep the per-step path; bf16
    inference of the small levels at those batches takes the kernel by default; =all takes any batch and float32
    too, =all:32 only the 32-channel levels."""
    from mscred.ops.triton import convlstm_window as window
    cpu = torch.device("cpu")

    def runs(dtype=torch.bfloat16, layout="nhwc", save=False, ch=32, k=2, batch=128):
        return window.runs(dtype, layout, save, ch, k, batch, cpu)

    monkeypatch.delenv("MSCRED_WINDOW_LSTM", raising=False)
    monkeypatch.delenv("MSCRED_WINDOW_LSTM_BLOCKS", raising=False)
    assert runs() and runs(torch.float16, ch=64) and runs(batch=window.MAX_BATCH) and runs(batch=window.MIN_BATCH)
    assert not runs(ch=64, batch=window.MAX_BATCH + 1) and not runs(batch=window.MIN_BATCH - 1)
    assert runs(batch=3591) and 32 in window.ANY_BATCH_CH  # the scoring batch: level 1 only
    assert not runs(batch=3591, k=3)  # measured with the default 2 x 2 kernel only
    assert not runs(ch=2 * window.MAX_CH)
    assert not runs(torch.float32)
    assert not runs(save=True)
    assert not runs(layout="nchw")
    assert not runs(ch=48) and not runs(ch=8)
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all")
    assert runs(torch.float32) and runs(batch=10 * window.MAX_BATCH)
    assert not runs(torch.float32, ch=2 * window.MAX_CH)
    assert not runs(torch.float64)
    assert not runs(torch.float32, k=3)  # its (512, 128) float32 weight alone is 256 KB: no tile fits
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all:32")
    assert runs(batch=10 * window.MAX_BATCH) and not runs(ch=64) and not runs(ch=64, batch=window.MIN_BATCH)
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all:32+64")
    assert runs(batch=10 * window.MAX_BATCH) and runs(ch=64, batch=10 * window.MAX_BATCH)
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "0")
    assert not runs()
    for bad in ("yes", "1:32", "all:", "all:x"):
        monkeypatch.setenv("MSCRED_WINDOW_LSTM", bad)
        with pytest.raises(ValueError, match="MSCRED_WINDOW_LSTM"):
            runs()


def test_window_tile_plan_fits_shared_memory(monkeypatch):
    """plan() shrinks the pixel tile, then the pipeline, until the tile's budgeted shared memory fits, or gives up.
    The budget covers what Triton asked for these tiles (80 / 213 KB for the 32- / 64-channel tiles when first
    measured, Triton 3.9's sm_90 compile; test_window_tiles_compiled_for_sm90_fit_their_bound compiles the tiles
    plan() picks by default)."""
    from mscred.ops.triton import convlstm_window as window
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "64/8/2/0")
    assert window.shared_bytes(32, 2, 2, 64, 2) >= 80 * 1024 and window.shared_bytes(64, 2, 2, 64, 2) >= 213 * 1024
    assert window.plan(32, 2, torch.bfloat16) == (64, 8, 2, 0, 0)
    assert window.plan(64, 2, torch.bfloat16) == (64, 8, 2, 0, 0)
    bm, _, stages, _, _ = window.plan(32, 3, torch.bfloat16)  # K = 9 x 32 -> 512: smaller tiles
    assert window.shared_bytes(32, 3, 2, bm, stages) <= window.HOPPER_SHARED_MEMORY and bm < 64
    assert window.plan(64, 2, torch.bfloat16, limit=100 * 1024) is None  # its weight alone is 128 KB
    assert window.plan(32, 3, torch.float32) is None


@pytest.mark.parametrize("ch,k,batch", [(32, 2, 128), (64, 2, 128), (32, 2, 3591), (64, 2, 3591), (32, 3, 128)])
def test_window_tiles_compiled_for_sm90_fit_their_bound(monkeypatch, ch, k, batch):
    """The tile plan() picks for a bf16 level, compiled for sm_90 with Triton's compiler (tests/sm90_compile.py; the
    interpreter checks no hardware limit): its shared memory is within the H200's 227 KB, and within what plan()
    budgets (shared_bytes) plus, for a prefetching tile, the one (BLOCK_M, K) tile Triton may add (level 1's
    large-batch tile asked for 57,344 bytes against a budget of 49,152)."""
    pytest.importorskip("triton.backends.nvidia")
    import sm90_compile
    from mscred.ops.triton import convlstm_window as window

    monkeypatch.setattr(window, "interpreting", lambda: False)  # the compiled path's tiles
    monkeypatch.delenv("MSCRED_WINDOW_LSTM_BLOCKS", raising=False)
    bm, warps, stages, prefetch, maxnreg = window.plan(ch, k, torch.bfloat16, batch=batch)
    constants = window.kernel_constants(ch, k, torch.bfloat16, bm, prefetch)
    config = dict(constants=dict(gx_sc=1, **constants),
                  pointers=dict(gx_ptr="*bf16", bias_ptr="*fp32", w_ptr="*bf16", c_ptr="*fp16", h_ptr="*bf16"),
                  floats=["forget_bias"], num_warps=warps, num_stages=stages, maxnreg=maxnreg)
    (shared,) = sm90_compile.shared_bytes("mscred.ops.triton.convlstm_kernels", "window_lstm_kernel", [config])
    prefetched_tile = 2 * bm * constants["BLOCK_K"] if prefetch else 0
    assert shared <= window.shared_bytes(ch, k, 2, bm, stages) + prefetched_tile, (shared, bm, stages, prefetch)
    assert shared <= sm90_compile.HOPPER_SHARED_MEMORY


def test_window_kernel_fake_matches(monkeypatch):
    """opcheck of the inference call (save False) with the per-window kernel: its smaller cell and bordered-h
    outputs are what the fake says."""
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all")
    x, w, b, _ = _inputs(2, 3, 2, 16, 4, 2, seed=9)
    x, w, b = x.float(), w.float(), b.float()
    out = fused.convlstm_fused(x, w, b, FB, "nhwc")
    assert out[2].shape[0] == 1 and out[3].shape[0] == 0
    torch.library.opcheck(fused.convlstm_fused, (x, w, b, FB, "nhwc"),
                          test_utils=("test_schema", "test_faketensor"))


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (7, 32, 30), (3, 16, 9), (1, 64, 55),
                                     (300, 32, 30)])
def test_window_inference_bf16_on_gpu(B, C, n, monkeypatch):
    """The MSCRED levels that take the per-window kernel (bf16 inference, the scoring path), with awkward batches
    and sizes: within twice the bf16 reference's error of the float64 oracle, as the per-step path
    (MSCRED_WINDOW_LSTM=0)."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "all")  # every batch, the awkward small ones too
    x, w, b, _ = _inputs(B, 5, C, C, n, 2, seed=B + C + n)
    oracle = ref.convlstm(x, w, b, FB)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    yardstick = _rel(ref.convlstm(*low, FB), oracle)
    got, window_levels = _infer_counting(monkeypatch, *low)
    assert window_levels == 1 and got.dtype == torch.bfloat16
    assert _rel(got, oracle) <= 2 * yardstick + 1e-3
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "0")
    with torch.no_grad():
        per_step = fused.convlstm(*low, FB)
    assert _rel(per_step, oracle) <= 2 * yardstick + 1e-3


def test_window_blocks_override(monkeypatch):
    """MSCRED_WINDOW_LSTM_BLOCKS: one tile for every level, or per channel count (the others keep theirs), with an
    optional register cap; a tile of another length is refused."""
    from mscred.ops.triton import convlstm_window as window
    monkeypatch.delenv("MSCRED_WINDOW_LSTM_BLOCKS", raising=False)  # a device script may set it for the others
    defaults = {ch: window.blocks(ch) for ch in (32, 64, 128)}
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "32/4/2/0")
    assert window.blocks(32) == (32, 4, 2, 0, 0) and window.blocks(128) == (32, 4, 2, 0, 0)
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "32:16/4/1/1;128:64/8/2/0")
    assert window.blocks(32) == (16, 4, 1, 1, 0) and window.blocks(128) == (64, 8, 2, 0, 0)
    assert window.blocks(64) == defaults[64]
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "32:32/8/1/1/96")  # with a register cap
    assert window.blocks(32) == (32, 8, 1, 1, 96)
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "32/8/1")
    with pytest.raises(ValueError, match="BM/warps/stages/prefetch"):
        window.blocks(32)


def test_window_tile_by_batch(monkeypatch):
    """Compiled (not interpreted), level 1 takes LARGE_BATCH_BLOCKS from LARGE_BATCH windows on, its BLOCKS tile
    below; other levels keep theirs; MSCRED_WINDOW_LSTM_BLOCKS overrides both."""
    from mscred.ops.triton import convlstm_window as window
    monkeypatch.setattr(window, "interpreting", lambda: False)
    monkeypatch.delenv("MSCRED_WINDOW_LSTM_BLOCKS", raising=False)
    large = window.LARGE_BATCH
    assert window.blocks(32, large) == window.blocks(32, 3591) == window.LARGE_BATCH_BLOCKS[32] == (32, 4, 1, 1, 128)
    assert window.blocks(32, large - 1) == window.blocks(32) == window.BLOCKS[32]
    assert window.blocks(64, 3591) == window.BLOCKS[64]
    assert window.plan(32, 2, torch.bfloat16, batch=3591) == (32, 4, 1, 1, 128)
    assert window.plan(32, 3, torch.bfloat16, batch=3591)[4] == 0  # a 3 x 3 kernel: the tiles measured for it
    monkeypatch.setenv("MSCRED_WINDOW_LSTM_BLOCKS", "32:64/8/1/1")
    assert window.blocks(32, 3591) == (64, 8, 1, 1, 0)


@needs_cuda
def test_window_kernel_batch_gate_eager_and_captured(monkeypatch):
    """By default (MSCRED_WINDOW_LSTM=1) bf16 inference of 128 windows takes the per-window kernel when run eagerly
    and the per-step path inside a CUDA-graph capture (MIN_BATCH_CAPTURED), both equal to the reference."""
    from mscred.ops.triton import convlstm_window as window
    monkeypatch.delenv("MSCRED_WINDOW_LSTM", raising=False)
    monkeypatch.delenv("MSCRED_WINDOW_LSTM_BLOCKS", raising=False)
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    assert window.MIN_BATCH <= 128 < window.MIN_BATCH_CAPTURED
    x, w, b, _ = _inputs(128, 5, 32, 32, 12, 2, seed=4)
    low = [t.to(torch.bfloat16) for t in (x, w, b)]
    eager, window_levels = _infer_counting(monkeypatch, *low)
    assert window_levels == 1
    calls = []
    monkeypatch.setattr(window, "run", lambda *a: calls.append(1))
    graph = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    monkeypatch.setenv("MSCRED_WINDOW_LSTM", "0")
    with torch.cuda.stream(s), torch.no_grad():
        fused.convlstm(*low, FB)  # the per-step path's warm-up outside the capture (cuDNN, Triton)
    torch.cuda.current_stream().wait_stream(s)
    monkeypatch.delenv("MSCRED_WINDOW_LSTM")
    with torch.no_grad(), torch.cuda.graph(graph):
        captured = fused.convlstm(*low, FB)
    graph.replay()
    torch.cuda.synchronize()
    assert calls == []
    assert _rel(captured, eager) < 1e-2


# ----------------------------------------------------------------------------------------------------------------
# Training on [x_t, h_{t-1}] concatenated (ops/triton/convlstm_concat.py): the large levels' path.
# ----------------------------------------------------------------------------------------------------------------
@pytest.fixture
def concat_everywhere(monkeypatch):
    """The concatenated path at every map size (by default only from convlstm_concat.MIN_PIXELS pixels), and a
    count of its forward and backward calls."""
    from mscred.ops.triton import convlstm_concat
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    calls = {"forward": 0, "backward": 0}
    for name in calls:
        real = getattr(convlstm_concat, name)

        def counted(*a, _real=real, _name=name):
            calls[_name] += 1
            return _real(*a)
        monkeypatch.setattr(convlstm_concat, name, counted)
    return calls


def _time_major_fwd_bwd(x, w, b, dout, k):
    """``train`` on x stored and padded as the encoder hands it over while training (time-major, zero-bordered):
    h and the gradients of x, the weight and the bias."""
    x_tm = _time_major(x, "nhwc").detach().requires_grad_()
    w_, b_ = w.detach().clone().requires_grad_(), b.detach().clone().requires_grad_()
    y = fused.train(fused.pad_steps(x_tm, fused._padding(k), torch.channels_last), w_, b_, FB, padded=True)
    return [y.detach()] + [g.detach() for g in torch.autograd.grad(y, (x_tm, w_, b_), dout.to(y.dtype))]


@pytest.mark.parametrize("k", [2, 3])
@pytest.mark.parametrize("B, T, C, Ch", [(3, 5, 3, 4), (1, 4, 4, 4), (4, 1, 2, 5), (2, 2, 5, 3)])
def test_concatenated_gates_equal_reference(k, B, T, C, Ch, concat_everywhere):
    """The concatenated path in float64: h and every gradient equal the float64 reference's, at one step, two, and
    more; input and hidden channel counts equal and different."""
    x, w, b, dout = _inputs(B, T, C, Ch, 7, k, seed=60 + k + B + T)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    got = _time_major_fwd_bwd(x, w, b, dout, k)
    assert concat_everywhere == {"forward": 1, "backward": 1}
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


@pytest.mark.parametrize("k", [2, 3])
def test_concatenated_buffer_is_written_everywhere_it_is_read(k, concat_everywhere, monkeypatch):
    """xh filled with NaN before the forward: the x copy (with its border), the zeroed h_{-1}, and the cell kernel's
    h_t with its zero border must cover every element the convolutions and the weight gradient read -- one left
    unwritten would spread NaN into h or a gradient."""
    from mscred.ops.triton import convlstm_concat
    real = convlstm_concat.buffers

    def poisoned(*args):
        out, cells, xh = real(*args)
        return out, cells, xh.fill_(float("nan"))
    monkeypatch.setattr(convlstm_concat, "buffers", poisoned)
    x, w, b, dout = _inputs(3, 4, 3, 4, 6, k, seed=70 + k)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), _time_major_fwd_bwd(x, w, b, dout, k), expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


def test_concatenated_backward_reads_gates_stored_with_the_bias(concat_everywhere, monkeypatch):
    """Where the forward kernel stores the gates WITH the bias (its MSCRED_CONV_CELL_PRE_WITH_BIAS build,
    ``conv_cell.stores_pre_with_bias``), the backward's Triton cell kernel must not add it again: gates made so by
    hand (the split forward's plus the bias), float64, every gradient equal to the reference's; without the switch
    the same gates would count the bias twice."""
    from mscred.ops import conv_cell
    from mscred.ops.triton import convlstm_concat
    real = convlstm_concat.forward

    def gates_with_bias(images, w_x, w_h, bias, *rest):
        return [(g + bias.to(g.dtype).view(1, -1, 1, 1)).contiguous(memory_format=torch.channels_last)
                for g in real(images, w_x, w_h, bias, *rest)]
    monkeypatch.setattr(convlstm_concat, "forward", gates_with_bias)
    x, w, b, dout = _inputs(2, 4, 3, 4, 6, 2, seed=83)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    monkeypatch.setattr(conv_cell, "stores_pre_with_bias", lambda *a: True)
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), _time_major_fwd_bwd(x, w, b, dout, 2), expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)
    monkeypatch.setattr(conv_cell, "stores_pre_with_bias", lambda *a: False)  # the bias added twice: wrong
    wrong = _time_major_fwd_bwd(x, w, b, dout, 2)
    assert not torch.allclose(wrong[1], expect[1], rtol=1e-6, atol=1e-6)


def test_concatenated_gates_in_bf16_track_the_default_path(concat_everywhere, monkeypatch):
    """bf16: the concatenated path (one convolution, one rounding of the gates) against the float64 oracle within
    twice the default path's error, for h and every gradient."""
    x, w, b, dout = _inputs(3, 5, 8, 8, 9, 2, seed=81)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    concat = _time_major_fwd_bwd(*low, 2)
    monkeypatch.setenv("MSCRED_LSTM_CONCAT", "0")
    default = _time_major_fwd_bwd(*low, 2)
    assert concat_everywhere == {"forward": 1, "backward": 1}
    for name, c, d, o in zip(("h", "dx", "dweight", "dbias"), concat, default, oracle):
        assert torch.isfinite(c).all(), name
        assert _rel(c, o) <= 2 * _rel(d, o) + 1e-3, f"{name}: {_rel(c, o):.3g} vs default {_rel(d, o):.3g}"


def test_concatenated_gates_opcheck(concat_everywhere):
    """torch.library.opcheck of the training op and its backward on this path: its fake gives xh's shape and
    strides (T steps of C + Ch channels), and the backward's fake the gradients'."""
    x, w, b, dout = _inputs(2, 3, 2, 3, 4, 2, seed=9)
    xp, w_x, w_h = fused.train_inputs(_time_major(x, "nhwc"), w, "nhwc")
    for t in (xp, w_x, w_h, b):
        t.requires_grad_()
    utils = ("test_schema", "test_autograd_registration", "test_faketensor")
    torch.library.opcheck(fused.convlstm_train, (xp, w_x, w_h, b, FB, "nhwc"), test_utils=utils)
    state = fused.convlstm_train(xp, w_x, w_h, b, FB, "nhwc")[1:]
    assert [g.shape for g in state[0]] == [(2, 12, 4, 4)] * 3  # the gates: one tensor per step
    assert state[2].shape == (3, 2, 5, 5, 5)  # xh: T steps, C + Ch channels, zero-bordered 5 x 5
    torch.library.opcheck(fused.convlstm_train_backward, (dout, xp, w_x, w_h, b, *state, FB, "nhwc"),
                          test_utils=("test_schema", "test_faketensor"))


def test_concatenated_gates_only_where_they_paid(monkeypatch):
    """The path's rule: channels-last, time-major, maps of at least MIN_PIXELS pixels (levels 1-2 of the default
    model, where the H200 timings favoured it); MSCRED_LSTM_CONCAT=0 never; the minimum is settable."""
    from mscred.ops.triton import convlstm_concat as cc
    monkeypatch.delenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", raising=False)
    assert cc.MIN_PIXELS == 225
    assert cc.runs(True, "nhwc", 30, 30) and cc.runs(True, "nhwc", 15, 15) and not cc.runs(True, "nhwc", 9, 9)
    assert not cc.runs(False, "nhwc", 30, 30) and not cc.runs(True, "nchw", 30, 30)
    monkeypatch.setenv("MSCRED_LSTM_CONCAT", "0")
    assert not cc.runs(True, "nhwc", 30, 30)
    monkeypatch.delenv("MSCRED_LSTM_CONCAT")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "900")
    assert cc.runs(True, "nhwc", 30, 30) and not cc.runs(True, "nhwc", 15, 15)
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "many")
    with pytest.raises(ValueError, match="MSCRED_LSTM_CONCAT_MIN_PIXELS"):
        cc.runs(True, "nhwc", 30, 30)


@needs_cuda
@pytest.mark.parametrize("B, C, n", [(128, 32, 30), (128, 64, 15), (7, 32, 30), (128, 128, 8), (3, 256, 4)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_concatenated_gates_full_size_on_gpu(B, C, n, dtype, concat_everywhere, monkeypatch):
    """The MSCRED levels on the concatenated path (cuDNN writing the gates in place), float32 and bf16, against
    the float64 oracle within twice the default path's error."""
    x, w, b, dout = _inputs(B, 5, C, C, n, 2, seed=B + C + n)
    oracle = _fwd_bwd(ref.convlstm, *(t.cpu() for t in (x, w, b, dout)))
    low = [t.to(dtype) for t in (x, w, b, dout)]
    concat = _time_major_fwd_bwd(*low, 2)
    monkeypatch.setenv("MSCRED_LSTM_CONCAT", "0")
    default = _time_major_fwd_bwd(*low, 2)
    assert concat_everywhere == {"forward": 1, "backward": 1}
    floor = 1e-5 if dtype == torch.float32 else 1e-3
    for name, c, d, o in zip(("h", "dx", "dweight", "dbias"), concat, default, oracle):
        assert _rel(c, o) <= 2 * _rel(d, o) + floor, f"{name}: {_rel(c, o):.3g} vs default {_rel(d, o):.3g}"
