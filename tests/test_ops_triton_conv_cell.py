"""The concatenated-gates ConvLSTM's forward as one conv + cell kernel a step (ops/triton/convlstm_conv_cell.py,
switched on by MSCRED_LSTM_CONV_CELL=1): the training op's outputs and every gradient against the float64
reference (CPU interpreter, float64), the border it writes, its eligibility rule, and on CUDA the full-size bf16
level against cuDNN's path."""
from __future__ import annotations

import pytest
import torch

from mscred.ops import reference as ref
from mscred.ops.triton import convlstm_concat
from mscred.ops.triton import convlstm_conv_cell as conv_cell
from test_ops_triton_convlstm import CUDA, _fwd_bwd, _inputs, _rel, _time_major_fwd_bwd, needs_cuda, pytestmark  # noqa: F401,E501


# On CUDA the kernel takes bf16 / fp16 only (``eligible``): the float64 rows run under the CPU interpreter (CI).
interpreter_only = pytest.mark.skipif(CUDA, reason="float64 rows: the kernel runs them under the CPU interpreter "
                                                   "only (on CUDA it takes bf16 / fp16)")


@pytest.fixture
def conv_cell_on(monkeypatch):
    """The concatenated path at every map size with the step kernel switched on; counts its launches."""
    monkeypatch.setenv("MSCRED_FUSED_LAYOUT", "nhwc")
    monkeypatch.setenv("MSCRED_LSTM_CONCAT_MIN_PIXELS", "0")
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "1")
    steps = []
    real = conv_cell.step
    monkeypatch.setattr(conv_cell, "step", lambda *a: steps.append(1) or real(*a))
    return steps


# (C, Ch): the model's level 1 (32, 32) and input / hidden counts that differ; maps of odd, even and prime sizes
# (the bordered rows of a tile then straddle images and the last tile runs past the buffer).
# tile "": one program a tile; "128/8/2/1": one persistent program (the interpreter's) looping over every tile with
# the weight loaded once.
@interpreter_only
@pytest.mark.parametrize("tile", ["", "128/8/2/1"])
@pytest.mark.parametrize("B, T, C, Ch, n", [(3, 5, 32, 32, 5), (2, 2, 16, 16, 7), (1, 1, 48, 16, 4),
                                            (5, 3, 16, 16, 3)])
def test_equals_float64_reference(B, T, C, Ch, n, tile, conv_cell_on, monkeypatch):
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL_TILE", tile)
    x, w, b, dout = _inputs(B, T, C, Ch, n, 2, seed=90 + B + T + n)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    got = _time_major_fwd_bwd(x, w, b, dout, 2)
    assert len(conv_cell_on) == T
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


@interpreter_only
def test_writes_every_element_of_xh_it_owns(conv_cell_on, monkeypatch):
    """xh filled with NaN first: the kernel's h_t and its zero border (with the x copy and h_{-1}) must cover
    everything the later steps and the weight gradient read."""
    real = convlstm_concat.buffers

    def poisoned(*args):
        out, cells, xh = real(*args)
        return out, cells, xh.fill_(float("nan"))
    monkeypatch.setattr(convlstm_concat, "buffers", poisoned)
    x, w, b, dout = _inputs(3, 4, 16, 16, 6, 2, seed=97)
    expect = _fwd_bwd(ref.convlstm, x, w, b, dout)
    got = _time_major_fwd_bwd(x, w, b, dout, 2)
    assert len(conv_cell_on) == 4
    for name, g, e in zip(("h", "dx", "dweight", "dbias"), got, expect):
        torch.testing.assert_close(g, e, rtol=1e-10, atol=1e-10, msg=name)


def test_eligibility(monkeypatch):
    """Switched on, 2 x 2 kernels with pads (0, 1, 0, 1), Ch and C + Ch powers of 2 from 16, 4Ch at most
    MAX_GATE_COLUMNS; a CPU tensor only under the interpreter."""
    xh = torch.zeros(2, 1, 64, 5, 5)
    monkeypatch.delenv("MSCRED_LSTM_CONV_CELL", raising=False)
    assert not conv_cell.eligible(xh, (0, 1, 0, 1), (2, 2), 32)  # off by default
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "1")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert conv_cell.eligible(xh, (0, 1, 0, 1), (2, 2), 32)
    assert not conv_cell.eligible(xh, (1, 1, 1, 1), (3, 3), 32)
    assert not conv_cell.eligible(torch.zeros(2, 1, 48, 5, 5), (0, 1, 0, 1), (2, 2), 16)  # C + Ch = 48
    assert not conv_cell.eligible(torch.zeros(2, 1, 16, 5, 5), (0, 1, 0, 1), (2, 2), 8)  # Ch = 8: dots need 16
    assert not conv_cell.eligible(torch.zeros(2, 1, 128, 5, 5), (0, 1, 0, 1), (2, 2), 64)  # 4Ch = 256
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    assert not conv_cell.eligible(xh, (0, 1, 0, 1), (2, 2), 32)


def test_gate_matrix_rows_are_taps_then_channels():
    w = torch.randn(8, 3, 2, 2, dtype=torch.float64)
    rows = conv_cell.gate_matrix(w)
    assert rows.shape == (12, 8)
    for dy in range(2):
        for dx in range(2):
            torch.testing.assert_close(rows[(dy * 2 + dx) * 3:(dy * 2 + dx + 1) * 3], w[:, :, dy, dx].T)


@needs_cuda
def test_full_size_bf16_level_one_tracks_cudnn_path(conv_cell_on, monkeypatch):
    """Level 1 at the training batch (128 windows, 5 steps, 30 x 30, 32 channels), bf16: h and every gradient
    against the float64 oracle within twice the cuDNN path's error (both round the gates once)."""
    x, w, b, dout = _inputs(128, 5, 32, 32, 30, 2, seed=99)
    oracle = _fwd_bwd(ref.convlstm, x, w, b, dout)
    low = [t.to(torch.bfloat16) for t in (x, w, b, dout)]
    ours = _time_major_fwd_bwd(*low, 2)
    assert len(conv_cell_on) == 5
    monkeypatch.setenv("MSCRED_LSTM_CONV_CELL", "0")
    cudnn = _time_major_fwd_bwd(*low, 2)
    assert len(conv_cell_on) == 5
    for name, o, c, e in zip(("h", "dx", "dweight", "dbias"), ours, cudnn, oracle):
        assert torch.isfinite(o).all(), name
        assert _rel(o, e) <= 2 * _rel(c, e) + 1e-3, f"{name}: {_rel(o, e):.3g} vs cuDNN path {_rel(c, e):.3g}"
