"""benchmarks/graph_timeline.py's arithmetic, on hand-made traces: a replay's span, busy time (some kernel running),
time with two or more at once, idle time and its gaps (with the kernels on either side), and the split of a trace
into replays at the separator kernels. The script itself needs a GPU; this is what its table rests on."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import graph_timeline as gt  # noqa: E402


def _k(name: str, ts: float, dur: float) -> dict:
    return {"name": name, "ts": ts, "dur": dur}


def test_busy_idle_and_overlap_of_a_chain_with_a_side_kernel():
    # a 0-10, side 5-25 (beside a and b), b 12-17, c 30-32: idle 25-30 only; a->b's 2 us gap is covered by side
    s = gt.timeline([_k("a", 0, 10), _k("side", 5, 20), _k("b", 12, 5), _k("c", 30, 2)])
    assert (s["span"], s["busy"], s["idle"], s["overlap"], s["kernels"]) == (32, 27, 5, 10, 4)
    assert s["gaps"] == [(5, "side", "c")]


def test_gaps_are_listed_largest_first_with_their_neighbours():
    s = gt.timeline([_k("a", 0, 1), _k("b", 2, 1), _k("c", 7, 1), _k("d", 8.5, 1)])
    assert [g[0] for g in s["gaps"]] == [4, 1, 0.5]
    assert s["gaps"][0][1:] == ("b", "c")
    assert s["idle"] == 5.5 and s["overlap"] == 0


def test_a_kernel_inside_a_longer_one_does_not_end_the_busy_stretch():
    s = gt.timeline([_k("long", 0, 20), _k("short", 2, 3), _k("next", 21, 1)])
    assert s["gaps"] == [(1, "long", "next")]
    assert s["busy"] == 21 and s["overlap"] == 3


def test_trace_is_split_at_the_separators_and_filtered_to_device_work():
    trace = {"traceEvents": [
        {"cat": "kernel", "ph": "X", "name": "spin_kernel", "ts": 0, "dur": 100},
        {"cat": "kernel", "ph": "X", "name": "k1", "ts": 101, "dur": 1},
        {"cat": "gpu_memset", "ph": "X", "name": "Memset (Device)", "ts": 103, "dur": 1},
        {"cat": "cuda_runtime", "ph": "X", "name": "cudaGraphLaunch", "ts": 102, "dur": 5},
        {"cat": "kernel", "ph": "X", "name": "spin_kernel", "ts": 200, "dur": 100},
        {"cat": "gpu_memcpy", "ph": "X", "name": "Memcpy DtoD", "ts": 301, "dur": 1},
    ]}
    replays = gt._replays(gt._kernels(trace))
    assert [[k["name"] for k in r] for r in replays] == [["k1", "Memset (Device)"], ["Memcpy DtoD"]]


def test_alone_counts_only_the_time_a_kernel_runs_with_nothing_beside_it():
    # a 0-10, side 5-25, b 12-17, c 30-32: a alone 0-5, side alone 10-12 and 17-25, b never, c all of it
    ks = [_k("a", 0, 10), _k("side", 5, 20), _k("b", 12, 5), _k("c", 30, 2)]
    assert gt.alone(ks) == [5, 10, 0, 2]


def test_families_group_cudnn_by_direction_and_strip_templates():
    assert gt.family("sm90_xmma_wgrad_implicit_gemm_bf16") == "cuDNN weight gradient"
    assert gt.family("sm90_xmma_dgrad_implicit_gemm_indexed") == "cuDNN data gradient"
    assert gt.family("_small_conv_wgrad_kernel") == "_small_conv_wgrad_kernel"  # ours, not cuDNN's
    assert gt.family("Memset (Unknown)") == "fill"
    assert gt.family("void mscred_conv_cell::(anonymous namespace)::conv_cell_kernel<32, 32>(P)") == \
        "mscred_conv_cell::conv_cell_kernel"


def test_alone_lines_list_a_weight_gradient_alone_with_the_next_kernel_and_its_shape():
    ks = [_k("chain", 0, 10), {**_k("sm90_xmma_wgrad_x", 10, 40), "args": {"grid": [132, 1, 1]}},
          _k("Memset (Unknown)", 13, 1), _k("dgrad", 50, 5)]
    lines = gt.alone_lines(ks)
    row = next(line for line in lines if line.startswith("- at 10.0 us"))
    assert "39.0 of 40.0 us" in row and "Memset (Unknown) at +3.0 us" in row and "grid [132, 1, 1]" in row
    assert "| cuDNN weight gradient | 1 | 40.0 | 39.0 |" in lines
