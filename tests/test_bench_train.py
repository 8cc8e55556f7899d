"""bt.py's merge of its per-process parts into one table: speedups, correctness flags, missing parts.

The GPU run merges one JSON per part (eager, one per graphed variant, compile); a part that crashed must show up
as an error, a variant whose first loss differs from the reference eager's as WRONG, and every ratio must be
against the reference eager rows. Hand-made part files with round numbers make every expected value exact.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
bt = pytest.importorskip("bench_train")


def _e2e(variant, total):
    return {"variant": variant, "signature_s": 0.1, "train_s": total - 0.3, "score_s": 0.2, "total_s": total,
            "one_time_setup_s": 1.0, "first_run_s": 5.0, "score_batch": 1024, "epoch_losses": [0.1]}


def _write_parts(work: Path) -> None:
    eager = {"meta": {"gpu": "test"}, "windows": 3591, "batch": 128, "errors": {},
             "ceilings": {"copy_TBps": 4.0, "bf16_TFLOPs": 800.0, "tf32_TFLOPs": 400.0},
             "flops": {"reference_step_flops": 5e11, "forward_flops_per_window": 1e9},
             "train_step": [{"variant": "reference eager", "bf16": False, "step_ms": 20.0, "windows_per_s": 6400.0,
                             "one_time_s": 0.1, "first_loss": 0.1},
                            {"variant": "fused eager", "bf16": False, "step_ms": 10.0, "windows_per_s": 12800.0,
                             "one_time_s": 0.1, "first_loss": 0.1001}],
             "inference": [{"variant": "reference eager", "batch": 256, "windows_per_s": 20000.0, "ms": 1.0},
                           {"variant": "reference eager", "batch": 1024, "windows_per_s": 40000.0, "ms": 1.0}],
             "end_to_end": [_e2e("reference eager", 4.0)]}
    graphed = {"errors": {}, "windows": 3591,
               "train_step": [{"variant": "fused + CUDA graph + bf16", "bf16": True, "step_ms": 4.0,
                               "windows_per_s": 32000.0, "one_time_s": 1.0, "first_loss": 0.2}],
               "inference": [{"variant": "fused + CUDA graph + bf16", "batch": 3591, "windows_per_s": 100000.0,
                              "ms": 1.0}],
               "end_to_end": [_e2e("fused + CUDA graph + bf16", 0.8)]}
    cold = {"errors": {}, "elapsed_s": 9.5, "end_to_end_cold": [{
        **_e2e("fused + CUDA graph + bf16, fresh process", 1.5), "fit_wall_s": 6.0, "imports_s": 2.0,
        "process_to_scores_s": 9.5}]}
    (work / "train_eager.json").write_text(json.dumps(eager))
    (work / "train_e2e-cold.json").write_text(json.dumps(cold))
    (work / "train_g-fused-bf16.json").write_text(json.dumps(graphed))


def test_merge_computes_ratios_flags_and_missing_parts(tmp_path):
    _write_parts(tmp_path)
    r = bt.merge(tmp_path, tmp_path, parts=("eager", "g-fused-bf16", "g-fused", "e2e-cold"))
    steps = {t["variant"]: t for t in r["train_step"]}
    assert steps["fused eager"]["speedup_vs_eager"] == pytest.approx(2.0)
    assert steps["fused eager"]["check_ok"]  # 1e-3 relative, inside the fp32 tolerance 2e-3
    assert steps["fused + CUDA graph + bf16"]["speedup_vs_eager"] == pytest.approx(5.0)
    assert not steps["fused + CUDA graph + bf16"]["check_ok"]  # first loss 0.2 vs 0.1: wrong, whatever the speed
    best = {t["variant"]: t["batch"] for t in r["inference"] if t.get("best")}
    assert best == {"reference eager": 1024, "fused + CUDA graph + bf16": 3591}
    graphed = next(t for t in r["inference"] if t["variant"] == "fused + CUDA graph + bf16")
    assert graphed["speedup_vs_eager_best"] == pytest.approx(2.5)
    # 10x of 40,000 windows/s at 1 GFLOP each = 400 TFLOP/s = half the bf16 rate.
    assert r["flops"]["inference_10x_share_of_bf16_peak"] == pytest.approx(0.5)
    e2e = {t["variant"]: t for t in r["end_to_end"]}
    assert e2e["fused + CUDA graph + bf16"]["speedup_vs_eager"] == pytest.approx(5.0)
    assert "g-fused" in r["errors"] and "g-fused-bf16" not in r["errors"]
    md = (tmp_path / "train.md").read_text()
    assert "| fused + CUDA graph + bf16 | 4.00 | 32,000 | 5.00x | 1.0 | WRONG (1.0e+00) |" in md
    assert "50% of the measured bf16 matrix rate" in md
    assert "fresh process: 9.50 s from the start of the Python process" in md
    assert json.loads((tmp_path / "train.json").read_text())["parts"].keys() == {"eager", "g-fused-bf16", "e2e-cold"}


def test_every_graphed_variant_has_a_process_of_its_own():
    # The SIGSEGV this layout avoids came from several live training graphs in one process.
    graphed = [v[-1] for v in bt.TRAIN_VARIANTS.values() if v[1]]
    assert len(graphed) == len(set(graphed)) and set(graphed) == set(bt.GRAPH_PARTS) - {"e2e-cold"}
    for table in (bt.INFER_VARIANTS, bt.E2E_VARIANTS):
        for name, (_, graphs, _, part) in table.items():
            assert not graphs or bt.TRAIN_VARIANTS[name][-1] == part, name


@pytest.mark.parametrize("name, family", [
    ("_cell_bwd_kernel", "Triton ConvLSTM cell (fwd + bwd)"), ("cell_fwd_kernel", "Triton ConvLSTM cell (fwd + bwd)"),
    ("void mscred_conv_cell::(anonymous namespace)::conv_cell_kernel<32, 32>(mscred_conv_cell::ConvCellParams)",
     "CUDA ConvLSTM kernels (conv + cell step, resident)"),
    ("void mscred_conv_cell::(anonymous namespace)::conv_cell_bwd_kernel<32, 32>(mscred_conv_cell::ConvCellBwdParams)",
     "CUDA ConvLSTM kernels (conv + cell step, resident)"),
    ("void mscred_resident::(anonymous namespace)::window_lstm_resident<32>(mscred_resident::ResidentParams)",
     "CUDA ConvLSTM kernels (conv + cell step, resident)"),
    ("_bias_act_fwd_kernel", "Triton bias + SELU (fwd + bwd)"),
    ("_small_conv_wgrad_kernel", "Triton small-channel convolutions"),
    ("sm90_xmma_dgrad_implicit_gemm_indexed_bf16bf16_bf16f32_f32_nhwckrsc_nhwc", "cuDNN / cuBLAS convolutions and GEMMs"),
    ("void cudnn::engines_precompiled::nchwToNhwcKernel<float, float, float, false, true>",
     "layout conversions nchw <-> nhwc"),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_",
     "copies, casts, concatenation, gathers"),
    ("void at::native::vectorized_elementwise_kernel<8, at::native::FillFunctor<c10::BFloat16>", "zero fills"),
    ("void at::native::multi_tensor_apply_kernel<TensorListMetadata<4>, FusedAdamMathFunctor<float, 4>>", "Adam"),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>", "other elementwise"),
])
def test_kernel_families(name, family):
    assert bt.kernel_family(name) == family


@pytest.mark.parametrize("key, annotation", [
    ("Optimizer.step#Adam.step", True), ("Optimizer.zero_grad#Adam.zero_grad", True),
    ("void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_"
     "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda(c10::BFloat16)#1}>", False),
    ("cell_bwd_kernel", False),
])
def test_annotations_are_told_from_kernels_named_after_lambdas(key, annotation):
    assert bt.is_annotation(key) == annotation


def test_shared_segment_inference_timing_runs_on_cpu():
    """The shared-segment inference row (CUDA-only in the bench) times forward_windows; its function runs here."""
    import numpy as np
    import torch

    from mscred.train import WindowDataset
    seg = np.random.default_rng(0).random((12, 3, 8, 8)).astype(np.float32)
    old_channels = bt.CHANNELS
    bt.CHANNELS = (4, 6, 8, 8)
    try:
        ms, wps, setup = bt.time_inference_shared("reference", 8, WindowDataset(seg, 5), torch.device("cpu"),
                                                  8, False, False, 2)
    finally:
        bt.CHANNELS = old_channels
    assert ms > 0 and wps == pytest.approx(8 / ms * 1e3) and setup >= 0
