"""Training data in parts (``MSCRED.fit([a, b, ...])``, ``mscred train A.csv B.csv``): every window of every part
is trained on, none spans two parts (``mscred.data.parts``, ``WindowDataset``'s window starts)."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import mscred.train as train_module
from cli_helpers import bad_input, run_cli, sensor_frame
from mscred.data.parts import window_starts
from mscred.detector import MSCRED
from mscred.errors import InputError
from mscred.train import WindowDataset
from mscred.train_graphs import EagerInference

N = 5
TINY = dict(epochs=1, channels=(4, 8, 8, 8), device="cpu")


def test_window_starts_stay_inside_their_part():
    starts = window_starts([7, 5, 9], steps=5)
    np.testing.assert_array_equal(starts, [0, 1, 2, 7, 12, 13, 14, 15, 16])
    assert len(window_starts([4, 5], steps=5)) == 1


def test_window_dataset_with_starts_gathers_the_windows_it_names():
    seg = torch.randn(21, 3, 4, 4)
    starts = torch.as_tensor(window_starts([7, 5, 9], steps=5))
    data = WindowDataset(seg, 5, starts)
    assert len(data) == 9
    idx = torch.tensor([8, 0, 3, 4, 2])
    expect = torch.stack([seg[int(starts[i]):int(starts[i]) + 5] for i in idx])
    torch.testing.assert_close(data.batch(idx), expect, rtol=0, atol=0)
    out = torch.empty_like(expect)
    data.gather_into(idx, out)
    torch.testing.assert_close(out, expect, rtol=0, atol=0)
    torch.testing.assert_close(data[3], seg[7:12], rtol=0, atol=0)
    with pytest.raises(ValueError, match="window starts must lie in"):
        WindowDataset(seg, 5, [17])


def test_validation_from_shared_segments_only_within_a_part():
    """The CPU validation scores a run of consecutive windows from their shared segments; across a seam the
    windows are not consecutive segments, and it must gather them instead (same losses as the gathered path)."""
    from mscred.config import ModelConfig
    from mscred.model import MSCREDNet

    torch.manual_seed(0)
    net = MSCREDNet(ModelConfig(n_sensors=6, channels=(4, 8, 8, 8))).eval()
    seg = torch.rand(16, 3, 6, 6)
    data = WindowDataset(seg, 5, window_starts([8, 8], steps=5))   # windows 0-3 in part 1, 4-7 in part 2
    shared, gathered = EagerInference(net, data, windows=True), EagerInference(net, data, windows=False)
    for idx in (torch.arange(0, 4), torch.arange(4, 8), torch.arange(2, 6)):
        torch.testing.assert_close(shared(idx)[1], gathered(idx)[1], rtol=1e-5, atol=1e-7)


@pytest.fixture(scope="module")
def parts():
    """Three stretches of one process with stops between them (the clock jumps), of 300, 220 and 400 rows."""
    frame = sensor_frame(1200, N, seed=2)
    return [frame.iloc[:300], frame.iloc[400:620], frame.iloc[800:]]


def test_fit_on_parts_never_trains_across_a_seam(parts, monkeypatch):
    seen = {}
    original = train_module.Trainer.fit

    def recording(self, train_segments, val_segments=None, *args, **kwargs):
        seen.update(train=train_segments, val=val_segments, **kwargs)
        return original(self, train_segments, val_segments, *args, **kwargs)

    monkeypatch.setattr(train_module.Trainer, "fit", recording)
    model = MSCRED(**TINY).fit(parts)
    per_part = [model._segments(part[[f"s{j}" for j in range(N)]].to_numpy()) for part in parts]
    windows = [piece[k:k + 5] for piece in per_part for k in range(len(piece) - 4)]   # every window of every part
    got = [seen["train"][s:s + 5] for s in seen["train_starts"]] + [seen["val"][s:s + 5] for s in seen["val_starts"]]
    assert len(got) == len(windows) == 21 + 13 + 31
    for a, b in zip(got, windows):
        np.testing.assert_array_equal(a, b)
    assert len(seen["val_starts"]) == round(0.25 * len(windows))   # the last windows validate: the last part's


def test_fit_on_parts_scores_and_calibrates_each_part_alone(parts):
    model = MSCRED(**TINY).fit(parts)
    rows = [len(part) for part in parts]
    assert len(model.decision_scores_) == sum(rows) == len(model.validation_rows_)
    bounds = np.cumsum([0] + rows)
    for part, a, b in zip(parts, bounds[:-1], bounds[1:]):   # each part scored as a detect of it alone scores it
        np.testing.assert_allclose(model.decision_scores_[a:b], model.decision_function(part), rtol=1e-6, atol=1e-9)
    # the threshold: 1.5 x the largest score of the validation windows, the last 16 windows (of the last part)
    last = parts[-1]
    win = model.window_of_row(len(last))
    scores = model.decision_function(last)
    by_window = np.array([scores[win == k][0] for k in range(win.max() + 1)])
    assert model.threshold_ == pytest.approx(1.5 * by_window[-16:].max(), rel=1e-9)
    assert model.validation_rows_[bounds[2]:].sum() == (win >= len(by_window) - 16).sum()
    assert not model.validation_rows_[:bounds[2]].any()


def test_parts_in_other_column_orders_and_bad_parts(parts):
    reordered = [parts[0], parts[1][["timestamp"] + [f"s{j}" for j in reversed(range(N))]], parts[2]]
    a, b = MSCRED(**TINY).fit(parts), MSCRED(**TINY).fit(reordered)
    assert a.threshold_ == b.threshold_
    np.testing.assert_array_equal(a.decision_scores_, b.decision_scores_)
    with pytest.raises(InputError, match="training data part 2: other sensors than training data part 1"):
        MSCRED(**TINY).fit([parts[0], parts[1].rename(columns={"s1": "x"})])
    with pytest.raises(InputError, match="training data part 2: 50 rows is too few to train on as a part"):
        MSCRED(**TINY).fit([parts[0], parts[1].iloc[:50]])
    one = MSCRED(**TINY).fit([parts[0]])   # one part is the table itself
    np.testing.assert_array_equal(one.decision_scores_, MSCRED(**TINY).fit(parts[0]).decision_scores_)


def test_cli_train_on_parts(parts, tmp_path, capsys):
    paths = []
    for k, part in enumerate(parts):
        paths.append(tmp_path / f"run{k}.csv")
        part.to_csv(paths[-1], index=False)
    code, out, err = run_cli(capsys, "train", *paths, "--out", tmp_path / "m", "--epochs", 1, "--quiet",
                             "--set", "channels=4,8,8,8", "--device", "cpu")
    assert code == 0, err
    expect = MSCRED(**TINY).fit(parts)
    assert MSCRED.load(tmp_path / "m", device="cpu").threshold_ == pytest.approx(expect.threshold_, rel=1e-9)
    code, out, err = run_cli(capsys, "train", *paths, "--out", tmp_path / "m2", "--epochs", 1, "--quiet", "--set",
                             "channels=4,8,8,8", "--device", "cpu", "--val-scores", tmp_path / "v.csv")
    assert code == 0, err
    written = pd.read_csv(tmp_path / "v.csv")
    assert list(written.columns) == ["part", "timestamp", "score", "is_anomaly"]
    rows = expect.validation_rows_
    np.testing.assert_array_equal(written["part"], np.repeat([1, 2, 3], [len(p) for p in parts])[rows])
    np.testing.assert_array_equal(written["timestamp"], pd.concat(parts)["timestamp"].to_numpy()[rows])
    np.testing.assert_allclose(written["score"], expect.decision_scores_[rows], rtol=1e-9)
    assert set(written["part"]) == {3}   # the validation windows are the last part's
    pd.concat([parts[1].drop(columns="s2")]).to_csv(tmp_path / "other.csv", index=False)
    bad_input(capsys, "train", paths[0], tmp_path / "other.csv", "--out", tmp_path / "m3",
              names=[f"{tmp_path / 'other.csv'}: other sensors than {paths[0]}"])
    assert not (tmp_path / "m3").exists()


def test_cli_train_on_a_folder_of_parts(parts, tmp_path, capsys):
    """A folder as DATA: its tables in name order are the parts (hidden files and other types left out), the
    model the same as of the files given one by one; a folder without a table, and --val-scores inside the folder
    (the next run would train on it), are refused."""
    folder = tmp_path / "runs"
    folder.mkdir()
    for k, part in enumerate(parts):
        part.to_csv(folder / f"2026-12-0{k + 1}.csv", index=False)
    (folder / "notes.txt").write_text("not a part")
    parts[0].to_csv(folder / ".hidden.csv", index=False)
    code, out, err = run_cli(capsys, "train", folder, "--out", tmp_path / "m", "--epochs", 1, "--quiet",
                             "--set", "channels=4,8,8,8", "--device", "cpu")
    assert code == 0, err
    expect = MSCRED(**TINY).fit(parts)
    got = MSCRED.load(tmp_path / "m", device="cpu")
    assert got.threshold_ == pytest.approx(expect.threshold_, rel=1e-9)
    for name, value in got.net_.state_dict().items():
        torch.testing.assert_close(value, expect.net_.state_dict()[name], rtol=1e-6, atol=1e-7)
    (tmp_path / "empty").mkdir()
    bad_input(capsys, "train", tmp_path / "empty", "--out", tmp_path / "m2",
              names=[f"{tmp_path / 'empty'}: a folder without a table"])
    bad_input(capsys, "train", folder, "--out", tmp_path / "m3", "--val-scores", folder / "v.csv",
              names=[f"{folder / 'v.csv'}: is in the folder DATA"])
    assert not (tmp_path / "m2").exists() and not (tmp_path / "m3").exists()


def test_two_gloo_ranks_train_on_parts_as_one_process(parts, tmp_path):
    """`mscred train A.csv B.csv C.csv --nproc 2`: the ranks' windows are one process's (the same weights)."""
    from mscred.distributed import train_distributed

    paths = []
    for k, part in enumerate(parts):
        paths.append(tmp_path / f"run{k}.csv")
        part.to_csv(paths[-1], index=False)
    overrides = {"epochs": 1, "batch_size": 7, "device": "cpu", "channels": (4, 8, 8, 8), "progress": False}
    summary = train_distributed(paths, tmp_path / "model", overrides, nproc=2, timeout=240)
    ours = MSCRED.load(tmp_path / "model", device="cpu")
    ref = MSCRED(**overrides).fit(parts)
    assert summary["world_size"] == 2
    assert ours.history_[0]["train_loss"] == pytest.approx(ref.history_[0]["train_loss"], rel=1e-5)
    assert ours.threshold_ == pytest.approx(ref.threshold_, rel=1e-4)
    ref_state = ref.net_.state_dict()
    for name, value in ours.net_.state_dict().items():
        torch.testing.assert_close(value, ref_state[name], rtol=1e-5, atol=1e-6)


def test_a_resume_on_the_same_rows_cut_into_other_parts_is_refused(parts, tmp_path):
    MSCRED(**TINY).fit(parts, checkpoint_dir=tmp_path / "ck")
    recut = [parts[0], pd.concat([parts[1], parts[2].iloc[:100]]), parts[2].iloc[100:]]
    cut = r"cut the data into other windows \(parts \[300, 220, 400\] -> \[300, 320, 300\]\)"
    with pytest.raises(InputError, match=cut):
        MSCRED(**{**TINY, "epochs": 2}).fit(recut, checkpoint_dir=tmp_path / "ck", resume=True)
    resumed = MSCRED(**{**TINY, "epochs": 2}).fit(parts, checkpoint_dir=tmp_path / "ck", resume=True)
    assert len(resumed.history_) == 2


@pytest.mark.skipif(not torch.cuda.is_available(), reason="the graphed training step and its gather need a CUDA device")
def test_graphed_training_on_parts_gathers_the_eager_windows(parts):
    """On a GPU the graphed step gathers its windows eagerly (``gather_into``: the windows' first segments, then one
    index_select) before each replay: the windows of ``batch``, and the eager steps' losses."""
    seg = torch.randn(21, 3, 6, 6, device="cuda")
    data = WindowDataset(seg, 5, window_starts([7, 5, 9], steps=5))
    idx = torch.tensor([8, 0, 3, 4, 2], device="cuda")
    out = torch.empty(5, 5, 3, 6, 6, device="cuda")
    data.gather_into(idx, out)
    torch.testing.assert_close(out, data.batch(idx), rtol=0, atol=0)
    settings = {**TINY, "device": "cuda", "backend": "reference"}
    graphed = MSCRED(**settings, cuda_graphs=True).fit(parts)
    eager = MSCRED(**settings, cuda_graphs=False).fit(parts)
    assert graphed.history_[0]["train_loss"] == pytest.approx(eager.history_[0]["train_loss"], rel=1e-3)
    assert graphed.threshold_ == pytest.approx(eager.threshold_, rel=1e-2)
