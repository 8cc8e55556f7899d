"""The public-dataset loaders on copies as users get them from mirrors: the folder one level too high or too low
(a GitHub checkout above ServerMachineDataset/, the Kaggle SMAP/MSL copy's data/data/, --data-root pointing at
train/), Windows line endings and byte-order marks, interpretation labels that leave a labelled anomaly out,
labeled_anomalies.csv rows that do not match the arrays, name typos, and `demo --dataset` refusals. Each case here
failed (or loaded wrong data) before the fix it names."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from cli_helpers import run_cli
from test_datasets import _raises
from mscred.data.datasets import intervals_from_labels, load_dataset, smd_folder, telemanom_layout
from mscred.errors import InputError


def _rows(path, array, fmt="%.4f", newline="\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, array, delimiter=",", fmt=fmt, newline=newline)


def _refused(name, root, *fragments):
    """``load_dataset(name, root)`` refused in one line holding every fragment; the message."""
    return _raises(*fragments, name=name, root=root)


@pytest.fixture
def checkout(tmp_path):
    return smd_checkout(tmp_path)


def smd_checkout(tmp_path):
    """OmniAnomaly's GitHub checkout: ServerMachineDataset/ one level below, one machine, two labelled runs."""
    rng = np.random.default_rng(3)
    repo = tmp_path / "OmniAnomaly-master"
    root = repo / "ServerMachineDataset"
    labels = np.zeros(30, dtype=int)
    labels[4:8] = 1
    labels[20] = 1
    _rows(root / "train" / "machine-1-1.txt", rng.random((40, 5)))
    _rows(root / "test" / "machine-1-1.txt", rng.random((30, 5)))
    _rows(root / "test_label" / "machine-1-1.txt", labels[:, None], fmt="%d")
    (root / "interpretation_label").mkdir()
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:1,3\n21-21:5\n")
    (repo / "README.md").write_text("OmniAnomaly\n")
    return repo, root, labels


# ------------------------------------------------------------------------------------------------------- SMD


def test_smd_folder_one_level_too_high_or_too_low(checkout):
    """--data-root the checkout (or ServerMachineDataset/train) read <root>/train/machine-1-1.txt: "not found ...
    SMD is the ServerMachineDataset folder of ...", as if the user had no data."""
    repo, root, labels = checkout
    expected = load_dataset("smd:machine-1-1", root)
    for where in (repo, root / "train", root / "test_label"):
        assert smd_folder(where) == root
        got = load_dataset("smd:machine-1-1", where)
        pd.testing.assert_frame_equal(got.test, expected.test)
        pd.testing.assert_frame_equal(got.anomalies, expected.anomalies)
    assert load_dataset("smd", repo).name == "smd:machine-1-1"   # the only machine, found below


def test_smd_two_layouts_below_are_refused_naming_them(checkout):
    repo, root, _ = checkout
    other = repo / "copy" / "ServerMachineDataset"
    for part in ("train", "test"):
        (other / part).mkdir(parents=True)
    _refused("smd:machine-1-1", repo, "more than one Server Machine Dataset", str(root), "--data-root")


def test_smd_machine_typo_suggests_the_nearest(checkout):
    """A typo said "not found ... SMD is the ServerMachineDataset folder of <url>", pointing at a download."""
    _, root, _ = checkout
    _refused("smd:machine-1-l", root, "train/machine-1-l.txt", "did you mean machine-1-1?")
    _refused("smd:Machine-1-1", root, "did you mean machine-1-1?")
    # A file name for a machine name is read as the machine (it read train/machine-1-1.txt.txt).
    assert load_dataset("smd:machine-1-1.txt", root).name == "smd:machine-1-1"


def test_smd_windows_line_endings_bom_and_trailing_blank_lines(checkout):
    """Notepad's byte-order mark made interpretation_label line 1 "expected 'start-end:dim,...'"."""
    _, root, _ = checkout
    expected = load_dataset("smd:machine-1-1", root)
    for part in ("train", "test", "test_label", "interpretation_label"):
        path = root / part / "machine-1-1.txt"
        text = path.read_text()
        path.write_bytes(b"\xef\xbb\xbf" + text.replace("\n", "\r\n").encode() + b"\r\n\r\n")
    got = load_dataset("smd:machine-1-1", root)
    pd.testing.assert_frame_equal(got.train, expected.train)
    pd.testing.assert_frame_equal(got.test, expected.test)
    pd.testing.assert_frame_equal(got.anomalies, expected.anomalies)


def test_smd_trailing_commas_are_no_dimension(checkout):
    """Lines ending in ',' were refused as a missing value of an extra dimension, suggesting --missing interpolate."""
    _, root, _ = checkout
    expected = load_dataset("smd:machine-1-1", root)
    for part in ("train", "test"):
        path = root / part / "machine-1-1.txt"
        path.write_text(path.read_text().replace("\n", ",\n"))
    got = load_dataset("smd:machine-1-1", root)
    assert got.sensors == expected.sensors
    pd.testing.assert_frame_equal(got.test, expected.test)


def test_smd_labelled_run_without_interpretation_line_is_an_event(checkout):
    """A test_label run no interpretation_label line touches was left out of the events: "anomalies found" counted
    1 anomaly where test_label has 2 (and 0 for an empty interpretation file), silently."""
    _, root, _ = checkout
    interpretation = root / "interpretation_label" / "machine-1-1.txt"
    interpretation.write_text("5-8:1,3\n")
    d = load_dataset("smd:machine-1-1", root)
    assert d.anomalies.to_dict("records") == [
        {"start": 4, "end": 8, "root_causes": "dim_01;dim_03", "duration": 4},
        {"start": 20, "end": 21, "root_causes": "", "duration": 1},
    ]
    assert "1 labelled anomaly" in d.description
    interpretation.write_text("")
    d = load_dataset("smd:machine-1-1", root)
    assert list(d.anomalies["start"]) == [4, 20] and list(d.anomalies["root_causes"]) == ["", ""]
    # Every run covered: nothing added, the interpretation's root causes kept.
    interpretation.write_text("21-21:5\n5-8:2\n")
    d = load_dataset("smd:machine-1-1", root)
    assert list(d.anomalies["root_causes"]) == ["dim_05", "dim_02"] and "interpretation_label line" not in d.description


def test_smd_missing_test_label_and_wrong_lengths_name_the_file(checkout):
    _, root, _ = checkout
    (root / "test_label" / "machine-1-1.txt").write_text("0\n" * 31)
    _refused("smd:machine-1-1", root, "test_label/machine-1-1.txt", "31 labels for 30 test rows")
    (root / "test_label" / "machine-1-1.txt").unlink()
    _refused("smd:machine-1-1", root, "test_label/machine-1-1.txt", "not found")
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:0\n")
    _write = root / "test_label" / "machine-1-1.txt"
    _write.write_text("0\n" * 4 + "1\n" * 4 + "0\n" * 22)
    _refused("smd:machine-1-1", root, "interpretation_label/machine-1-1.txt", "line 1", "[0]", "1..5")


def test_needs_a_root_says_where_the_data_comes_from():
    _refused("smd:machine-1-1", None, "--data-root", "OmniAnomaly")
    _refused("msl", None, "--data-root", "telemanom")


# ------------------------------------------------------------------------------------------------ SMAP / MSL


def _telemanom_files(data, table_dir, rows=None):
    rng = np.random.default_rng(4)
    for chan, n in (("P-1", 4), ("M-1", 6)):
        for part, length in (("train", 50), ("test", 40)):
            (data / part).mkdir(parents=True, exist_ok=True)
            np.save(data / part / f"{chan}.npy", rng.random((length, n)))
    table_dir.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows or {
        "chan_id": ["P-1", "M-1"],
        "spacecraft": ["SMAP", "MSL"],
        "anomaly_sequences": ["[[3, 5], [30, 39]]", "[[0, 0]]"],
        "class": ["[point, contextual]", "[point]"],
        "num_values": [40, 40],
    }).to_csv(table_dir / "labeled_anomalies.csv", index=False)


def test_kaggle_data_data_layout_and_table_above_the_arrays(tmp_path):
    """Kaggle's copy (table on top, arrays in data/data/) and --data-root at telemanom's data/ (the table beside it,
    one level up) or at train/ all failed: "train/P-1.npy: not found" / "labeled_anomalies.csv: not found"."""
    kaggle = tmp_path / "kaggle"
    _telemanom_files(kaggle / "data" / "data", kaggle)
    inner = kaggle / "data" / "data"
    for where in (kaggle, kaggle / "data", inner, inner / "train", inner / "test"):
        assert telemanom_layout(where) == (inner, kaggle / "labeled_anomalies.csv"), where
        d = load_dataset("smap:P-1", where)
        assert d.name == "smap:P-1" and d.test["label"].sum() == 3 + 10
    assert load_dataset("msl", kaggle).name == "msl:M-1"


def test_telemanom_channel_of_the_other_spacecraft_or_a_typo(tmp_path):
    _telemanom_files(tmp_path / "data", tmp_path)
    _refused("msl:P-1", tmp_path, "no MSL channel 'P-1'", "P-1 is a channel of SMAP: smap:P-1")
    _refused("smap:P-l", tmp_path, "no SMAP channel 'P-l'", "did you mean P-1?")
    assert load_dataset("smap:P-1.npy", tmp_path).name == "smap:P-1"


def test_telemanom_blanks_in_the_table_still_match(tmp_path):
    """" SMAP" / "P-1 " of a hand-edited table: "no SMAP channel 'P-1'"."""
    _telemanom_files(tmp_path / "data", tmp_path, rows={
        "chan_id": ["P-1 ", "M-1"], "spacecraft": [" SMAP", "MSL"], "anomaly_sequences": ["[[3, 5]]", "[[0, 0]]"]})
    assert load_dataset("smap:P-1", tmp_path).test["label"].sum() == 3


def test_telemanom_every_row_of_a_channel_is_read(tmp_path):
    """Two rows of one channel: only the first was read, the second's anomaly labelled normal, silently."""
    _telemanom_files(tmp_path / "data", tmp_path, rows={
        "chan_id": ["P-1", "M-1", "P-1"], "spacecraft": ["SMAP", "MSL", "SMAP"],
        "anomaly_sequences": ["[[30, 39]]", "[[0, 0]]", "[[3, 5]]"], "num_values": [40, 40, 40]})
    d = load_dataset("smap:P-1", tmp_path)
    assert d.test["label"].sum() == 13
    assert list(d.anomalies["start"]) == [3, 30] and list(d.anomalies["end"]) == [6, 40]
    table = pd.read_csv(tmp_path / "labeled_anomalies.csv")
    table.loc[2, "anomaly_sequences"] = "[[3, 5]"
    table.to_csv(tmp_path / "labeled_anomalies.csv", index=False)
    _refused("smap:P-1", tmp_path, "line 4", "[[3, 5]", "not a list")


def test_telemanom_num_values_must_be_the_test_length(tmp_path):
    """A table of another release (num_values 8505 for a 40-row test array) labelled rows 3..5 of the wrong data
    as long as its sequences fell inside the array, silently."""
    _telemanom_files(tmp_path / "data", tmp_path)
    table = pd.read_csv(tmp_path / "labeled_anomalies.csv")
    table.loc[0, "num_values"] = 8505
    table.to_csv(tmp_path / "labeled_anomalies.csv", index=False)
    _refused("smap:P-1", tmp_path, "line 2", "num_values 8505", "test/P-1.npy has 40 rows")
    assert load_dataset("msl:M-1", tmp_path).name == "msl:M-1"   # the other channel's row is right


def test_telemanom_malformed_sequences_and_missing_arrays(tmp_path):
    _telemanom_files(tmp_path / "data", tmp_path)
    table = pd.read_csv(tmp_path / "labeled_anomalies.csv")
    for text, fragment in (("[[9, 3]]", "ends before it starts"), ("[[3, 5], [30]]", "not a list"),
                           ("[3, 5]", "not a list"), ("", "not a list")):
        table.loc[0, "anomaly_sequences"] = text
        table.to_csv(tmp_path / "labeled_anomalies.csv", index=False)
        _refused("smap:P-1", tmp_path, "labeled_anomalies.csv", "line 2", fragment)
    (tmp_path / "data" / "test" / "M-1.npy").unlink()
    _refused("msl:M-1", tmp_path, "test/M-1.npy", "not found")
    # Unnamed, with no channel of that spacecraft having its arrays: say what was looked for and where.
    _refused("msl", tmp_path, "no MSL channel has its arrays in", "1 MSL row(s)")


def test_telemanom_arrays_of_another_dtype_or_shape(tmp_path):
    _telemanom_files(tmp_path / "data", tmp_path)
    test = tmp_path / "data" / "test" / "P-1.npy"
    # (a bool array reads as 0/1: test_telemanom_bool_arrays_read_as_0_1)
    for array, fragment in ((np.ones((40, 4, 2)), "shape"), (np.array([["a"] * 4] * 40), "dtype"),
                            (np.ones((40, 4)) + 1j, "complex"),
                            (np.zeros((40, 4), dtype="datetime64[s]"), "dtype datetime64")):
        np.save(test, array)
        _refused("smap:P-1", tmp_path, "test/P-1.npy", fragment)
    np.save(test, np.ones((40, 4), dtype=">f4"))   # big-endian float32 is numbers
    assert load_dataset("smap:P-1", tmp_path).test["telemetry"].sum() == 40



def test_telemanom_bool_arrays_read_as_0_1(tmp_path):
    """A bool array (one-hot commands saved from a comparison) was refused for its dtype, "expected numbers, got
    dtype bool", where the same 0/1 as integers loads."""
    _telemanom_files(tmp_path / "data", tmp_path)
    rng = np.random.default_rng(5)
    train, test = rng.random((50, 4)) > 0.5, rng.random((40, 4)) > 0.5
    np.save(tmp_path / "data" / "train" / "P-1.npy", train)
    np.save(tmp_path / "data" / "test" / "P-1.npy", test)
    d = load_dataset("smap:P-1", tmp_path)
    np.testing.assert_array_equal(d.train[d.sensors].to_numpy(), train.astype(np.float64))
    np.testing.assert_array_equal(d.test[d.sensors].to_numpy(), test.astype(np.float64))
    np.save(tmp_path / "data" / "test" / "P-1.npy", test.astype(np.int64))   # as the 0/1 integers load
    pd.testing.assert_frame_equal(load_dataset("smap:P-1", tmp_path).test, d.test)


def test_telemanom_overlapping_or_touching_sequences_are_one_event(tmp_path):
    """Sequences of one channel that overlap ([3, 5] and [5, 8]), touch ([5, 8] then [9, 12], on another row of the
    table) or lie inside another ([25, 30] and [27, 28]) were separate, overlapping events: one stretch of anomalous
    rows counted as two or three anomalies in "anomalies found"."""
    _telemanom_files(tmp_path / "data", tmp_path, rows={
        "chan_id": ["P-1", "M-1", "P-1"], "spacecraft": ["SMAP", "MSL", "SMAP"],
        "anomaly_sequences": ["[[25, 30], [3, 5], [5, 8], [27, 28]]", "[[0, 0]]", "[[9, 12], [20, 22]]"],
        "num_values": [40, 40, 40]})
    d = load_dataset("smap:P-1", tmp_path)
    assert d.anomalies.to_dict("records") == [
        {"start": 3, "end": 13, "root_causes": "", "duration": 10},
        {"start": 20, "end": 23, "root_causes": "", "duration": 3},
        {"start": 25, "end": 31, "root_causes": "", "duration": 6},
    ]
    # The events are the label's runs, as for a table or SMD file.
    pd.testing.assert_frame_equal(d.anomalies, intervals_from_labels(d.test["label"].to_numpy()))


def test_telemanom_line_numbers_past_blank_lines(tmp_path):
    """A bad row after blank lines (or a quoted cell over two lines) was reported at its row number + 2, a line too
    low past each of them: pandas skips blank lines."""
    _telemanom_files(tmp_path / "data", tmp_path)
    header = "chan_id,spacecraft,anomaly_sequences,num_values\n"
    table = tmp_path / "labeled_anomalies.csv"
    table.write_text(header + 'M-1,MSL,"[[0, 0]]",40\n\n   \nP-1,SMAP,"[[3, 99]]",40\n')
    _refused("smap:P-1", tmp_path, "labeled_anomalies.csv: line 5:", "[3, 99]", "outside the test part")
    table.write_text(header + '\nM-1,MSL,"[[0, 0],\n [1, 1]]",40\n\nP-1,SMAP,"[[3, 5]]",41\n')
    _refused("smap:P-1", tmp_path, "labeled_anomalies.csv: line 6:", "num_values 41")
    # (the rows before the bad one are read right: M-1's two-line cell)
    table.write_text(header + '\nM-1,MSL,"[[0, 0],\n [1, 1]]",40\n\nP-1,SMAP,"[[3, 5]]",40\n')
    assert load_dataset("msl:M-1", tmp_path).test["label"].sum() == 2


# ------------------------------------------------------------------------------------------------------- demo


def test_demo_data_root_without_dataset_is_refused(tmp_path, capsys):
    """--data-root alone was ignored: the synthetic demo ran for 10 minutes as if on the user's data."""
    (tmp_path / "smd").mkdir()
    code, out, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "o", "--data-root", tmp_path / "smd")
    assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert "--data-root" in err and "without --dataset" in err
    assert not (tmp_path / "o").exists()


def test_demo_dataset_names_as_load_dataset_reads_them(tmp_path, capsys, checkout):
    """"SMD:machine-1-1" was refused as unknown though load_dataset takes it; an unknown name suggests the nearest."""
    from mscred.cli.demo import _check_dataset

    _check_dataset("SMD:machine-1-1")
    _check_dataset(" smap:P-1")
    code, _, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "o", "--dataset", "smdd:machine-1-1")
    assert code == 2 and "did you mean smd?" in err and "--data-root" in err and "Traceback" not in err, err
    # Unavailable data says where to get them; nothing is written.
    code, _, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "o", "--dataset", "smap:P-1")
    assert code == 2 and "telemanom" in err and "--data-root" in err, err
    repo, _, _ = checkout
    code, _, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "o", "--dataset", "smd:machine-9-9",
                           "--data-root", repo)
    assert code == 2 and "machine-9-9" in err and "did you mean machine-1-1?" in err, err
    assert not (tmp_path / "o").exists()
