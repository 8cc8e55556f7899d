"""The CLI contract: every bad input of SPEC.md ends with exit 2, one line on stderr and no output file left behind.

Commands run in-process through ``mscred.cli.main.main([...])``. Models are tiny (n = 5 sensors, 1 epoch).
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from cli_helpers import run_cli, sensor_frame, tiny_model
from mscred.cli.main import main
from mscred.errors import NoteWarning

N_SENSORS = 5
ROWS = 400  # 35 segments, 31 windows: enough to train and validate




def _frame(rows: int = ROWS, n: int = N_SENSORS, seed: int = 0, names=None) -> pd.DataFrame:
    return sensor_frame(rows, n, seed, names)


def _run(capsys, *argv) -> tuple[int, str, str]:
    return run_cli(capsys, *argv)


def _bad(capsys, *argv, match: str, usage: bool = False) -> str:
    """Run a command expected to fail on bad input: exit 2, exactly one stderr line containing ``match``.

    ``usage``: a bad option or argument, which click detects; cli/main.py prints it as one line too.
    """
    code, _, err = _run(capsys, *argv)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mscred: error:"), lines[0]
    assert "Traceback" not in err
    assert match.lower() in lines[0].lower(), lines[0]
    return lines[0]


def _leftovers(directory: Path) -> list[str]:
    """Temporary files or directories that atomic writes leave only when they fail to clean up."""
    return [p.name for p in directory.iterdir() if p.name.startswith(".") and p.name.endswith(".tmp")]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    """A tiny trained model directory (5 sensors, small channels, 1 epoch), built through the Python API."""
    return tiny_model(tmp_path_factory.mktemp("model") / "model", _frame())


# ------------------------------------------------------------------------------------------------- happy paths
def test_generate_writes_three_files(tmp_path, capsys):
    code, out, err = _run(capsys, "generate", tmp_path / "d", "--sensors", 6, "--length", 3000, "--seed", 1)
    assert code == 0, err
    train = pd.read_csv(tmp_path / "d" / "train.csv")
    test = pd.read_csv(tmp_path / "d" / "test.csv")
    anomalies = pd.read_csv(tmp_path / "d" / "anomalies.csv")
    assert len(train) == 1200 and len(test) == 1500 and train.shape[1] == 7
    assert list(anomalies.columns) == ["start", "end", "root_causes", "duration"]
    assert test["label"].sum() == anomalies["duration"].sum()
    assert "test.csv" in out


def test_train_then_detect(tmp_path, capsys):
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    code, out, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu",
                          "--quiet", "--theta", "auto")
    assert code == 0, err
    meta = json.loads((tmp_path / "m" / "config.json").read_text())
    assert meta["sensors"] == [f"s{i}" for i in range(N_SENSORS)]
    # --theta alone selects the count score it belongs to
    assert meta["config"]["score"]["method"] == "count"
    assert meta["config"]["score"]["theta"] is None and len(meta["calibration"]["theta"]) == 3
    assert (tmp_path / "m" / "model.safetensors").stat().st_size > 0
    assert not (tmp_path / "m.checkpoints").exists()

    test = _frame(seed=1)
    test.to_csv(tmp_path / "test.csv", index=False)
    code, out, err = _run(capsys, "detect", tmp_path / "m", tmp_path / "test.csv", "--out", tmp_path / "s.csv")
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "s.csv", keep_default_na=False)
    assert list(scores.columns)[:4] == ["timestamp", "score", "is_anomaly", "root_causes"]
    assert len(scores) == ROWS
    assert (scores["timestamp"] == np.arange(ROWS)).all()
    assert set(scores["is_anomaly"]) <= {0, 1}
    # Root causes only on anomalous rows, and then exactly top_k known sensor names.
    normal = scores["is_anomaly"] == 0
    assert (scores.loc[normal, "root_causes"] == "").all()
    for text in scores.loc[~normal, "root_causes"]:
        names = text.split(";")
        assert len(names) == 3 and set(names) <= set(meta["sensors"])
    assert _leftovers(tmp_path) == []


def test_env_lists_backends(capsys):
    code, out, err = _run(capsys, "env", "--json")
    assert code == 0, err
    info = json.loads(out)
    assert info["backends"]["conv2d"]["torch"] == "ok"
    assert info["backends"]["convlstm"]["reference"] == "ok"
    resident = info["kernels"]["resident ConvLSTM (bf16 scoring, levels 1-2)"]
    if torch.cuda.is_available():  # ok on an H100/H200; elsewhere it may say why not (shared memory, the build)
        assert resident == "ok" or resident.startswith("unavailable: ")
    else:
        assert resident.startswith("unavailable: no CUDA device")
    step = info["kernels"]["conv + cell step (bf16 training, level 1)"]
    step_bwd = info["kernels"]["conv + cell backward step (bf16 training, level 1)"]
    if torch.cuda.is_available() and torch.cuda.get_device_capability() == (9, 0):  # Hopper: they build and run
        assert step == "ok", step
        assert step_bwd == "ok", step_bwd
    elif not torch.cuda.is_available():  # one reason, not the forward's wrapped in the backward's
        assert step.startswith("unavailable: no CUDA device")
        assert step_bwd.startswith("unavailable: no CUDA device") and "forward" not in step_bwd
    else:  # another GPU: the forward says why, the backward points at it
        assert step.startswith("unavailable: ")
        assert step_bwd.startswith("unavailable: needs the forward kernel, which is unavailable: ")
    adam = info["kernels"]["packed Adam (fused-backend training, Triton)"]
    assert adam == "ok" if torch.cuda.is_available() else adam.startswith("unavailable: no CUDA device")
    memsets = info["kernels"]["graph memsets as kernel nodes (CUDA graphs)"]
    assert memsets == "ok" if torch.cuda.is_available() else memsets == "unavailable: no CUDA device"
    assert "torch" in info["packages"]
    cuda = info["cuda_available"]
    assert info["defaults"]["cuda_graphs"] == cuda and (cuda or info["defaults"]["backend"] == "reference")
    from mscred.train_graphs import bf16_native
    assert info["cpu_bf16_native"] == bf16_native(torch.device("cpu"))  # whether --bf16 applies on the CPU


def test_env_names_the_sass_tools_it_found(capsys, monkeypatch):
    """Each CUDA tool `mscred sass` runs: its release and path, or "not found"; one the user pointed at that does
    not run (MSCRED_NVCC) is named with its release unknown, not taken for a working one."""
    from mscred.sass.toolchain import find_tool

    code, out, err = _run(capsys, "env", "--json")
    assert code == 0, err
    tools = json.loads(out)["sass_tools"]
    assert set(tools) == {"nvcc", "nvdisasm", "cuobjdump", "ptxas12"}
    for name, state in tools.items():
        path = find_tool(name)
        assert state == "not found" if path is None else state.endswith(f" at {path}"), (name, state)
    monkeypatch.setenv("MSCRED_NVCC", "/nonexistent/nvcc")
    find_tool.cache_clear()   # (find_tool reads the variable once a process)
    try:
        code, out, err = _run(capsys, "env")
    finally:   # the bogus path must not stay in the cache for the tests after this one
        monkeypatch.delenv("MSCRED_NVCC")
        find_tool.cache_clear()
    assert code == 0 and "sass tools: nvcc release unknown at /nonexistent/nvcc" in out, err


def test_env_names_the_mscred_variables_set(capsys, monkeypatch):
    # a forced kernel (MSCRED_CONV2_KERNEL) changes what runs: a bug report from `mscred env` must show it
    for name in [k for k in os.environ if k.startswith("MSCRED_")]:
        monkeypatch.delenv(name)
    code, out, _ = _run(capsys, "env")
    assert code == 0 and "environment:" not in out
    monkeypatch.setenv("MSCRED_CONV2_KERNEL", "generic")
    code, out, _ = _run(capsys, "env", "--json")
    assert code == 0 and json.loads(out)["environment"] == {"MSCRED_CONV2_KERNEL": "generic"}
    code, out, _ = _run(capsys, "env")
    assert "environment: MSCRED_CONV2_KERNEL=generic" in out


# ------------------------------------------------------------------------------------------------- bad input
@pytest.fixture()
def bad_files(tmp_path) -> dict[str, Path]:
    files = {}
    files["empty"] = tmp_path / "empty.csv"
    files["empty"].write_text("")
    files["header_only"] = tmp_path / "header_only.csv"
    files["header_only"].write_text("a,b,c,d,e\n")
    files["garbage_parquet"] = tmp_path / "garbage.parquet"
    files["garbage_parquet"].write_bytes(b"this is not parquet at all")
    frame = _frame().astype(object)
    frame.loc[16, "s3"] = "abc"
    files["text"] = tmp_path / "text.csv"
    frame.to_csv(files["text"], index=False)
    frame = _frame()
    frame.loc[5, "s1"] = np.nan
    files["nan"] = tmp_path / "nan.csv"
    frame.to_csv(files["nan"], index=False)
    frame = _frame()
    frame.loc[7, "s2"] = np.inf
    files["inf"] = tmp_path / "inf.csv"
    frame.to_csv(files["inf"], index=False)
    files["short"] = tmp_path / "short.csv"
    _frame(rows=99).to_csv(files["short"], index=False)
    files["other_sensors"] = tmp_path / "other.csv"
    _frame(names=["s0", "s1", "s2", "s3", "pump"]).to_csv(files["other_sensors"], index=False)
    return files


@pytest.mark.parametrize("case, match", [
    ("missing", "not found"),
    ("empty", "empty"),
    ("header_only", "no data rows"),
    ("garbage_parquet", "cannot read"),
    ("text", "column 's3' row 17"),
    ("nan", "column 's1' row 6"),
    ("inf", "column 's2' row 8"),
    ("short", "99 rows is too few"),
])
def test_train_bad_data(tmp_path, capsys, bad_files, case, match):
    data = bad_files.get(case, tmp_path / "nowhere.csv")
    _bad(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--quiet", match=match)
    assert not (tmp_path / "m").exists()
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize("case, match", [
    ("missing", "not found"),
    ("nan", "column 's1' row 6"),
    ("short", "99 rows is too few"),
    ("other_sensors", "missing sensor(s) s4; unknown sensor(s) pump"),
])
def test_detect_bad_data(tmp_path, capsys, bad_files, model_dir, case, match):
    data = bad_files.get(case, tmp_path / "nowhere.csv")
    _bad(capsys, "detect", model_dir, data, "--out", tmp_path / "s.csv", match=match)
    assert not (tmp_path / "s.csv").exists()
    assert _leftovers(tmp_path) == []


def _copy_model(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("damage, match", [
    ("no_dir", "model directory not found"),
    ("a_file", "is a file"),
    ("no_config", "config.json: missing"),
    ("no_weights", "model.safetensors: missing"),
    ("config_not_json", "damaged model config"),
    ("config_wrong_setting", "damaged model config"),
    ("weights_truncated", "damaged weights"),
    ("weights_wrong_shape", "damaged weights"),
])
def test_detect_damaged_model(tmp_path, capsys, model_dir, damage, match):
    model = tmp_path / "model"
    if damage == "a_file":
        model.write_text("notes")
    elif damage != "no_dir":
        _copy_model(model_dir, model)
    if damage == "no_config":
        (model / "config.json").unlink()
    elif damage == "no_weights":
        (model / "model.safetensors").unlink()
    elif damage == "config_not_json":
        (model / "config.json").write_text("{ not json")
    elif damage == "config_wrong_setting":
        meta = json.loads((model / "config.json").read_text())
        meta["config"]["model"]["no_such_setting"] = 1
        (model / "config.json").write_text(json.dumps(meta))
    elif damage == "weights_truncated":
        blob = (model / "model.safetensors").read_bytes()
        (model / "model.safetensors").write_bytes(blob[: len(blob) // 2])
    elif damage == "weights_wrong_shape":
        meta = json.loads((model / "config.json").read_text())
        meta["config"]["model"]["channels"] = [4, 8, 8, 16]
        (model / "config.json").write_text(json.dumps(meta))
    data = tmp_path / "data.csv"
    _frame().to_csv(data, index=False)
    _bad(capsys, "detect", model, data, "--out", tmp_path / "s.csv", match=match)
    assert not (tmp_path / "s.csv").exists()


@pytest.mark.parametrize("argv, match, usage", [
    (["generate", "{tmp}/d", "--sensors", "2"], "--sensors", True),
    (["train", "{tmp}/x.csv"], "--out", True),
    (["train", "{data}", "--out", "{tmp}/m", "--theta", "often"], "--theta", True),
    (["train", "{data}", "--out", "{tmp}/m", "--theta", "-1"], "--theta", True),
    (["train", "{data}", "--out", "{tmp}/m", "--theta", "inf"], "--theta", True),   # a model that never flags
    (["train", "{data}", "--out", "{tmp}/m", "--seed", "99999999999999999999"], "--seed", True),  # was exit 1
    (["fleet", "{tmp}", "--out", "{tmp}/f", "--seed", "-1"], "--seed", True),
    (["train", "{data}", "--out", "{tmp}/m", "--device", "tpu"], "--device", True),
    (["train", "{data}", "--out", "{tmp}/m", "--conv-backend", "magic"], "--conv-backend", True),
    (["demo", "--dataset", "no-such-dataset", "--out", "{tmp}/demo"], "no-such-dataset", False),
])
def test_bad_options(tmp_path, capsys, argv, match, usage):
    data = tmp_path / "data.csv"
    _frame().to_csv(data, index=False)
    argv = [a.format(tmp=tmp_path, data=data) for a in argv]
    line = _bad(capsys, *argv, match=match, usage=usage)
    assert line
    assert not (tmp_path / "m").exists() and not (tmp_path / "demo").exists()


def test_train_cuda_without_cuda_is_bad_input(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here: --device cuda is valid")
    data = tmp_path / "data.csv"
    _frame().to_csv(data, index=False)
    _bad(capsys, "train", data, "--out", tmp_path / "m", "--device", "cuda", match="no CUDA device")
    assert not (tmp_path / "m").exists()


def test_debug_env_shows_traceback(tmp_path, monkeypatch):
    monkeypatch.setenv("MSCRED_DEBUG", "1")
    from mscred.errors import InputError

    with pytest.raises(InputError):
        main(["detect", str(tmp_path / "nope"), str(tmp_path / "x.csv"), "--out", str(tmp_path / "s.csv")])
    assert os.environ["MSCRED_DEBUG"] == "1"


def test_train_resume_continues_from_checkpoint(tmp_path, capsys):
    """An interrupted run leaves MODEL_DIR.checkpoints/; --resume continues after its last epoch."""
    from mscred.data.io import load_table
    from mscred.detector import MSCRED

    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    ckpt = tmp_path / "m.checkpoints"
    # "Interrupted" after epoch 1: what a 2-epoch run had written when it was stopped.
    # (from the table as train reads it: the checkpoint's data record hashes the values read, and a float's CSV
    # round trip may differ in its last bit from the frame written -- it did with the GPU host's pandas)
    first = MSCRED(epochs=1, device="cpu", progress=False).fit(load_table(data), checkpoint_dir=ckpt)
    assert ckpt.is_dir()
    code, out, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 2, "--device", "cpu",
                          "--resume", "--quiet")
    assert code == 0, err
    history = json.loads((tmp_path / "m" / "config.json").read_text())["history"]
    assert [h["epoch"] for h in history] == [1, 2]
    assert history[0]["train_loss"] == pytest.approx(first.history_[0]["train_loss"])
    assert not ckpt.exists()


def test_resume_refuses_a_checkpoint_of_other_data_or_settings(tmp_path, capsys):
    """A checkpoint continued with other settings, or another table with the same sensor names, made a model of
    neither run with exit 0; a fresh run now also removes an earlier run's checkpoint instead of leaving it under
    its own data record (which a later --resume then continued)."""
    from mscred.data.io import load_table
    from mscred.detector import MSCRED
    from mscred.train_checkpoint import CHECKPOINT_NAME, match_checkpoint_data

    def _record(ckpt, table):   # what the CLI records before training starts (saying what it drops, if anything)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoteWarning)
            match_checkpoint_data(ckpt, table.sensors, table.values, table.source, resume=False)

    data, other = tmp_path / "train.csv", tmp_path / "other.csv"
    _frame().to_csv(data, index=False)
    _frame(seed=5).to_csv(other, index=False)
    ckpt = tmp_path / "m.checkpoints"
    # what an interrupted `train data.csv --out m --epochs 2 --batch-size 16` leaves after epoch 1
    _record(ckpt, load_table(data))
    MSCRED(epochs=1, batch_size=16, device="cpu", progress=False).fit(load_table(data), checkpoint_dir=ckpt)
    base = ["train", data, "--out", tmp_path / "m", "--device", "cpu", "--resume", "--quiet"]
    _bad(capsys, *base, "--epochs", 2, match="batch_size 16 -> 32")
    _bad(capsys, *base, "--epochs", 2, "--batch-size", 16, "--seed", 4, match="seed 0 -> 4")
    code, _, err = _run(capsys, "train", other, *base[2:], "--epochs", 2, "--batch-size", 16)
    assert code == 2 and "other data than the checkpoint" in err, err
    assert not (tmp_path / "m").exists() and (ckpt / CHECKPOINT_NAME).exists()
    # a fresh run (no --resume) that stops before its first epoch leaves no checkpoint of the earlier run behind
    _record(ckpt, load_table(other))
    assert not (ckpt / CHECKPOINT_NAME).exists()


def test_npy_and_parquet_inputs(tmp_path, capsys):
    """.npy has no names (sensor_0..) and no timestamp: SCORES.csv numbers the rows; Parquet keeps the names."""
    values = _frame().drop(columns=["timestamp"]).to_numpy()
    np.save(tmp_path / "train.npy", values)
    code, _, err = _run(capsys, "train", tmp_path / "train.npy", "--out", tmp_path / "m", "--epochs", 1,
                        "--device", "cpu", "--quiet")
    assert code == 0, err
    np.save(tmp_path / "test.npy", values[:150])
    code, _, err = _run(capsys, "detect", tmp_path / "m", tmp_path / "test.npy", "--out", tmp_path / "s.csv")
    assert code == 0, err
    scores = pd.read_csv(tmp_path / "s.csv")
    assert list(scores.columns[:2]) == ["row", "score"] and (scores["row"] == np.arange(150)).all()
    # A Parquet table with other column names than the .npy model's: the mismatch is named.
    _frame().to_parquet(tmp_path / "test.parquet")
    _bad(capsys, "detect", tmp_path / "m", tmp_path / "test.parquet", "--out", tmp_path / "p.csv",
         match="missing sensor(s) sensor_0, sensor_1")


def test_bare_mscred_prints_help_and_usage_errors_point_at_it(capsys):
    """`mscred` alone once printed its whole help as one escaped error line (exit 2): now the help itself, exit 0.
    A usage error names the command's --help."""
    from tests.cli_helpers import run_cli

    code, out, err = run_cli(capsys)
    assert code == 0 and out.startswith("Usage: mscred") and "Commands:" in out and not err
    code, _, err = run_cli(capsys, "train")
    assert code == 2 and err.strip() == "mscred: error: Missing argument 'DATA...'. (see `mscred train --help`)"


def test_train_writes_its_validation_scores_for_evaluate(tmp_path, capsys):
    """--val-scores: the rows scored by the validation windows (the threshold's data), as a SCORES file that
    evaluate --threshold beta_max --val-scores takes; refitting the paper's rule on them gives the model's own
    threshold back. With --nproc it is refused before any work."""
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    val = tmp_path / "val.csv"
    code, _, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", 1, "--device", "cpu", "--quiet",
                        "--val-scores", val)
    assert code == 0, err
    frame = pd.read_csv(val)
    assert list(frame.columns) == ["timestamp", "score", "is_anomaly"] and 0 < len(frame) < ROWS
    assert (np.diff(frame["timestamp"]) == 1).all() and frame["timestamp"].iloc[-1] < ROWS  # one block of rows
    threshold = json.loads((tmp_path / "m" / "config.json").read_text())["calibration"]["threshold"]
    assert frame["score"].max() * 1.5 == pytest.approx(threshold, rel=1e-6)   # beta_max of the model's own rule
    test = _frame(seed=1).assign(label=0)
    test.to_csv(tmp_path / "test.csv", index=False)
    assert _run(capsys, "detect", tmp_path / "m", tmp_path / "test.csv", "--out", tmp_path / "s.csv")[0] == 0
    code, out, err = _run(capsys, "evaluate", tmp_path / "s.csv", "--labels", tmp_path / "test.csv", "--threshold",
                          "beta_max", "--val-scores", val, "--json")
    assert code == 0, err
    assert "--nproc" in _bad(capsys, "train", data, "--out", tmp_path / "m2", "--nproc", 2, "--val-scores",
                             tmp_path / "v2.csv", match="--val-scores")
    assert not (tmp_path / "m2").exists()


def test_out_of_gpu_memory_is_one_line_with_advice(tmp_path, capsys, monkeypatch):
    """torch's OutOfMemoryError was an "internal error" with torch's paragraph about allocator settings."""
    from mscred.detector import MSCRED

    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    out_of_memory = type("OutOfMemoryError", (RuntimeError,), {})

    def fit(self, *args, **kwargs):
        raise out_of_memory("CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139 GiB")
    monkeypatch.setattr(MSCRED, "fit", fit)
    code, _, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--quiet")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("mscred: error: out of GPU memory: try --micro-batch") and "20.00 GiB" in err

    def ranks_fail(*args, **kwargs):   # a --nproc rank's error, as the launcher re-raises it
        raise RuntimeError("rank 1 failed: OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB")
    import mscred.distributed as distributed

    monkeypatch.setattr(distributed, "train_distributed", ranks_fail)
    code, _, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--quiet", "--nproc", "2")
    assert code == 1 and err.count("\n") == 1, err
    assert err.startswith("mscred: error: out of GPU memory: try --micro-batch") and "20.00 GiB" in err


def test_detect_reads_a_npy_array_by_position(model_dir, tmp_path, capsys):
    """A .npy array has no column names: its columns are the model's sensors in training order, as an array is in
    Python (the CLI once named them sensor_0.. and refused a model of CSV names: 'missing sensor(s) ...')."""
    frame = _frame(seed=3).drop(columns="timestamp")
    frame.to_csv(tmp_path / "new.csv", index=False)
    np.save(tmp_path / "new.npy", frame.to_numpy())
    assert _run(capsys, "detect", model_dir, tmp_path / "new.csv", "--out", tmp_path / "csv.csv")[0] == 0
    assert _run(capsys, "detect", model_dir, tmp_path / "new.npy", "--out", tmp_path / "npy.csv")[0] == 0
    by_name, by_position = pd.read_csv(tmp_path / "csv.csv"), pd.read_csv(tmp_path / "npy.csv")
    pd.testing.assert_frame_equal(by_position, by_name)
    assert by_name["score"].gt(0).any()
    np.save(tmp_path / "narrow.npy", frame.to_numpy()[:, :4])
    _bad(capsys, "detect", model_dir, tmp_path / "narrow.npy", "--out", tmp_path / "x.csv",
         match="narrow.npy: an array of 4 column(s); the model was trained on 5 sensors")


def test_train_refuses_a_sensor_name_holding_the_root_cause_separator(tmp_path, capsys):
    """detect lists root causes as 'a;b;c': a sensor named 'temp;inlet' read back as two sensors, neither real."""
    data = tmp_path / "train.csv"
    _frame(names=["temp;inlet", "flow", "p1", "p2", "p3"]).to_csv(data, index=False)
    _bad(capsys, "train", data, "--out", tmp_path / "m", "--epochs", "1",
         match="train.csv: column 'temp;inlet': a sensor name cannot hold ';'")
    assert not (tmp_path / "m").exists()


def test_train_notes_a_sensor_whose_range_a_glitch_sets(tmp_path, capsys):
    """One 1e30 in a training column made its min-max scale 1e30: the sensor read as constant, silently."""
    frame = _frame()
    frame.loc[17, "s2"] = 1e30
    data = tmp_path / "train.csv"
    frame.to_csv(data, index=False)
    code, _, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", "1", "--quiet")
    assert code == 0
    assert ("note: sensor 's2' of " in err and "(e.g. 1e+30 at row 18)" in err
            and "reads as constant to the model" in err), err
    clean = tmp_path / "clean.csv"
    _frame().to_csv(clean, index=False)
    code, _, err = _run(capsys, "train", clean, "--out", tmp_path / "m2", "--epochs", "1", "--quiet")
    assert code == 0 and "extreme values" not in err, err


def test_backend_fused_on_a_cpu_is_a_note(tmp_path, capsys, monkeypatch):
    """--backend fused without CUDA ran the reference ops silently (--cuda-graphs there says so): now a note."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    code, _, err = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", "1", "--device", "cpu",
                        "--backend", "fused")
    assert code == 0
    assert "note: --backend fused (backend='fused') ignored: its Triton kernels run on CUDA devices" in err, err


def test_weights_of_another_size_are_said_once(tmp_path, capsys, model_dir):
    """The mismatch's InputError (a ValueError) was caught and wrapped again: 'damaged weights (InputError: ...:
    damaged weights (...))'."""
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    meta = json.loads((model / "config.json").read_text())
    meta["config"]["model"]["channels"] = [4, 8, 8, 16]
    (model / "config.json").write_text(json.dumps(meta))
    data = tmp_path / "data.csv"
    _frame().to_csv(data, index=False)
    err = _bad(capsys, "detect", model, data, "--out", tmp_path / "s.csv", match="weights of another model size")
    assert err.count("damaged weights") == 1 and "InputError" not in err, err


def test_train_summary_names_the_score_or_its_theta(tmp_path, capsys):
    """The default z_sensor score has no theta: the summary said 'theta -', which told a reader nothing."""
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    code, out, _ = _run(capsys, "train", data, "--out", tmp_path / "m", "--epochs", "1", "--quiet")
    assert code == 0 and "; score z_sensor; threshold " in out and "theta" not in out, out
    code, out, _ = _run(capsys, "train", data, "--out", tmp_path / "m2", "--epochs", "1", "--quiet",
                        "--theta", "0.005")
    assert code == 0 and "; theta 0.005, 0.005, 0.005; threshold " in out, out


def test_theta_beside_another_score_is_refused(tmp_path, capsys):
    """--theta acts on the count score only: with --score mse it was dropped without a word."""
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    _bad(capsys, "train", data, "--out", tmp_path / "m", "--theta", "0.005", "--score", "mse",
         match="--theta: is read by --score count only; --score is 'mse'", usage=True)
    assert not (tmp_path / "m").exists()


def test_detect_summary_counts_the_rows_no_window_covers(model_dir, tmp_path, capsys):
    """The first rows (before the first full window) always score 0: 'scored 400 rows' read as if each was judged."""
    data = tmp_path / "new.csv"
    _frame(seed=4).to_csv(data, index=False)
    code, out, _ = _run(capsys, "detect", model_dir, data, "--out", tmp_path / "s.csv")
    scores = pd.read_csv(tmp_path / "s.csv")
    lead = int(np.argmax(scores["score"].to_numpy() != 0))   # the first row a window covers (its score > 0)
    assert code == 0 and lead > 0
    assert f"scored {ROWS - lead} of {ROWS} rows ({lead} before the first full window" in out, out


def test_a_decimal_comma_in_one_cell_gets_a_hint(tmp_path, capsys):
    """One '1,5' in a comma-separated file: pandas' 'Expected 6 fields in line 21, saw 7' alone left the cause to
    guess."""
    data = tmp_path / "train.csv"
    _frame().to_csv(data, index=False)
    lines = data.read_text().splitlines()
    lines[20] = lines[20].rsplit(",", 1)[0] + ",1,5"
    data.write_text("\n".join(lines) + "\n")
    _bad(capsys, "train", data, "--out", tmp_path / "m",
         match="Expected 6 fields in line 21, saw 7: a value with a decimal comma (1,5 for 1.5)")
