"""Dataset loaders on tiny fake directories in the SMD, SMAP/MSL, generic-table and TimeEval (Daphnet) layouts."""
import numpy as np
import pandas as pd
import pytest

from mscred.data import datasets
from mscred.data.datasets import DATASETS, intervals_from_labels, load_dataset
from mscred.errors import InputError


def _write_rows(path, array, fmt="%.4f"):
    path.parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(path, array, delimiter=",", fmt=fmt)


@pytest.fixture
def smd(tmp_path):
    rng = np.random.default_rng(0)
    root = tmp_path / "ServerMachineDataset"
    train, test = rng.random((40, 5)), rng.random((30, 5))
    labels = np.zeros(30, dtype=int)
    labels[4:8] = 1  # rows 5..8 1-based
    labels[20:21] = 1  # row 21
    _write_rows(root / "train" / "machine-1-1.txt", train)
    _write_rows(root / "test" / "machine-1-1.txt", test)
    _write_rows(root / "test_label" / "machine-1-1.txt", labels[:, None], fmt="%d")
    (root / "interpretation_label").mkdir()
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:1,3\n21-21:5\n")
    return root, train, test, labels


def test_smd(smd):
    root, train, test, labels = smd
    d = load_dataset("smd:machine-1-1", root)
    assert d.name == "smd:machine-1-1"
    assert d.sensors == ["dim_01", "dim_02", "dim_03", "dim_04", "dim_05"]
    np.testing.assert_allclose(d.train[d.sensors].to_numpy(), np.round(train, 4))
    np.testing.assert_allclose(d.test[d.sensors].to_numpy(), np.round(test, 4))
    np.testing.assert_array_equal(d.test["label"], labels)
    np.testing.assert_array_equal(d.test["timestamp"], np.arange(30))
    assert d.anomalies.to_dict("records") == [
        {"start": 4, "end": 8, "root_causes": "dim_01;dim_03", "duration": 4},
        {"start": 20, "end": 21, "root_causes": "dim_05", "duration": 1},
    ]
    # Interpretation spans agree with the point labels.
    for row in d.anomalies.itertuples():
        assert labels[row.start : row.end].all()
    # The only machine may be left unnamed.
    assert load_dataset("smd", root).name == "smd:machine-1-1"


def test_smd_without_interpretation(smd):
    root, _, _, labels = smd
    (root / "interpretation_label" / "machine-1-1.txt").unlink()
    d = load_dataset("smd:machine-1-1", root)
    assert list(d.anomalies["start"]) == [4, 20] and list(d.anomalies["end"]) == [8, 21]
    assert list(d.anomalies["root_causes"]) == ["", ""]


def _raises(*fragments, **kwargs):
    name = kwargs.pop("name")
    root = kwargs.pop("root", None)
    with pytest.raises(InputError) as info:
        load_dataset(name, root)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_smd_bad_layouts(smd):
    root, *_ = smd
    _raises("machine-9-9.txt", "not found", "Server Machine Dataset", name="smd:machine-9-9", root=root)
    (root / "test_label" / "machine-1-1.txt").write_text("0\n" * 29)
    _raises("29 labels for 30 test rows", name="smd:machine-1-1", root=root)
    (root / "test_label" / "machine-1-1.txt").write_text("0\n" * 10 + "2\n" + "0\n" * 19)
    _raises("row 11", "not 0 or 1", name="smd:machine-1-1", root=root)
    (root / "test_label" / "machine-1-1.txt").write_text("0\n" * 30)
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:1,3\nbroken line\n")
    _raises("line 2", "start-end", name="smd:machine-1-1", root=root)
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:1,9\n")
    _raises("line 1", "[9]", name="smd:machine-1-1", root=root)
    (root / "interpretation_label" / "machine-1-1.txt").write_text("25-31:1\n")
    _raises("line 1", "outside the test part", name="smd:machine-1-1", root=root)
    (root / "interpretation_label" / "machine-1-1.txt").unlink()
    text = (root / "test" / "machine-1-1.txt").read_text().splitlines()
    text[6] = text[6].replace(text[6].split(",")[2], "oops", 1)
    (root / "test" / "machine-1-1.txt").write_text("\n".join(text) + "\n")
    _raises("test/machine-1-1.txt", "column 3", "row 7", "'oops'", name="smd:machine-1-1", root=root)
    _write_rows(root / "train" / "machine-1-2.txt", np.ones((3, 5)))
    _raises("name a machine", "machine-1-1, machine-1-2", name="smd", root=root)


def test_smd_dimension_mismatch(smd):
    root, *_ = smd
    _write_rows(root / "test" / "machine-1-1.txt", np.ones((30, 4)))
    _raises("train has 5 dimensions, test has 4", name="smd:machine-1-1", root=root)


@pytest.fixture
def telemanom(tmp_path):
    rng = np.random.default_rng(1)
    root = tmp_path / "telemanom"
    (root / "data" / "train").mkdir(parents=True)
    (root / "data" / "test").mkdir(parents=True)
    arrays = {}
    for chan, n in (("P-1", 4), ("M-1", 6)):
        train, test = rng.random((50, n)), rng.random((40, n))
        np.save(root / "data" / "train" / f"{chan}.npy", train)
        np.save(root / "data" / "test" / f"{chan}.npy", test)
        arrays[chan] = (train, test)
    pd.DataFrame(
        {
            "chan_id": ["P-1", "M-1"],
            "spacecraft": ["SMAP", "MSL"],
            "anomaly_sequences": ["[[3, 5], [30, 39]]", "[[0, 0]]"],
            "class": ["[point, contextual]", "[point]"],
            "num_values": [40, 40],
        }
    ).to_csv(root / "labeled_anomalies.csv", index=False)
    return root, arrays


def test_smap_and_msl(telemanom):
    root, arrays = telemanom
    d = load_dataset("smap:P-1", root)
    assert d.sensors == ["telemetry", "command_01", "command_02", "command_03"]
    np.testing.assert_array_equal(d.train[d.sensors].to_numpy(), arrays["P-1"][0])
    np.testing.assert_array_equal(d.test[d.sensors].to_numpy(), arrays["P-1"][1])
    expected = np.zeros(40, dtype=int)
    expected[3:6] = 1
    expected[30:40] = 1
    np.testing.assert_array_equal(d.test["label"], expected)
    assert list(d.anomalies["start"]) == [3, 30] and list(d.anomalies["end"]) == [6, 40]
    assert list(d.anomalies["duration"]) == [3, 10]
    m = load_dataset("msl", root)  # the only MSL channel may be left unnamed
    assert m.name == "msl:M-1" and m.test["label"].sum() == 1 and len(m.sensors) == 6
    # The flat layout (train/, test/ and the table in one folder) loads the same.
    (root / "labeled_anomalies.csv").rename(root / "data" / "labeled_anomalies.csv")
    flat = load_dataset("smap:P-1", root / "data")
    pd.testing.assert_frame_equal(flat.test, d.test)


def test_telemanom_bad_layouts(telemanom):
    root, _ = telemanom
    _raises("no SMAP channel 'Z-9'", name="smap:Z-9", root=root)
    _raises("no MSL channel 'P-1'", name="msl:P-1", root=root)
    table = pd.read_csv(root / "labeled_anomalies.csv")
    table.loc[0, "anomaly_sequences"] = "[[3, 99]]"
    table.to_csv(root / "labeled_anomalies.csv", index=False)
    _raises("line 2", "[3, 99]", "outside the test part", name="smap:P-1", root=root)
    table.loc[0, "anomaly_sequences"] = "__import__('os')"
    table.to_csv(root / "labeled_anomalies.csv", index=False)
    _raises("line 2", "not a list", name="smap:P-1", root=root)
    table.drop(columns=["anomaly_sequences"]).to_csv(root / "labeled_anomalies.csv", index=False)
    _raises("missing column(s) anomaly_sequences", name="smap:P-1", root=root)
    (root / "labeled_anomalies.csv").unlink()
    _raises("labeled_anomalies.csv", "not found", name="smap:P-1", root=root)


def test_telemanom_bad_array(telemanom):
    root, _ = telemanom
    x = np.ones((40, 4))
    x[12, 0] = np.nan
    np.save(root / "data" / "test" / "P-1.npy", x)
    _raises("P-1.npy", "column 1", "row 13", "NaN", name="smap:P-1", root=root)
    np.save(root / "data" / "test" / "P-1.npy", np.ones((40, 3)))
    _raises("train has 4 columns, test has 3", name="smap:P-1", root=root)


def test_table_directory(tmp_path):
    from mscred.data.synthetic import write_synthetic

    data = write_synthetic(tmp_path / "syn", n_sensors=4, length=3_000, seed=5)
    d = load_dataset("table", tmp_path / "syn")
    assert d.sensors == data.sensors
    np.testing.assert_array_equal(d.test["label"], data.test["label"])
    np.testing.assert_array_equal(d.test["timestamp"], data.test["timestamp"])
    pd.testing.assert_frame_equal(d.anomalies, data.anomalies)
    (tmp_path / "syn" / "anomalies.csv").unlink()
    derived = load_dataset("table", tmp_path / "syn").anomalies
    assert list(derived["start"]) == list(data.anomalies["start"])
    assert list(derived["end"]) == list(data.anomalies["end"])


def test_table_single_file(tmp_path):
    pytest.importorskip("pyarrow")
    labels = np.zeros(20, dtype=int)
    labels[14:17] = 1
    frame = pd.DataFrame({"timestamp": np.arange(100, 120), "a": np.arange(20.0), "b": -np.arange(20.0), "label": labels})
    frame.to_parquet(tmp_path / "one.parquet", index=False)
    d = load_dataset("table", tmp_path / "one.parquet")
    assert list(d.train.columns) == ["timestamp", "a", "b"] and len(d.train) == 10
    assert list(d.test["timestamp"]) == list(range(110, 120))
    assert d.anomalies.to_dict("records") == [{"start": 114, "end": 117, "root_causes": "", "duration": 3}]


def test_table_bad_layouts(tmp_path):
    (tmp_path / "empty").mkdir()
    _raises("expected train.csv and test.csv", name="table", root=tmp_path / "empty")
    pd.DataFrame({"a": [1.0, 2.0, 3.0]}).to_csv(tmp_path / "nolabel.csv", index=False)
    _raises("no 'label' column", name="table", root=tmp_path / "nolabel.csv")
    _raises("not found", name="table", root=tmp_path / "missing")
    _raises("needs a folder (train.* + test.*) or one labelled table", name="table")


def test_daphnet_timeeval_format(tmp_path):
    rows = 20
    raw = pd.DataFrame(
        {
            "timestamp": pd.date_range("1970-01-01 00:04:40", periods=rows, freq="15ms").astype(str),
            "ankle_vert": np.arange(rows, dtype=float),
            "trunk_vert": np.arange(rows, dtype=float) * 2,
            "is_anomaly": [0] * 15 + [1, 1, 0, 0, 0],
        }
    )
    raw.to_csv(tmp_path / "S06R02E0.csv", index=False)
    d = load_dataset("daphnet", tmp_path)
    assert d.sensors == ["ankle_vert", "trunk_vert"]
    assert len(d.train) == 10 and len(d.test) == 10
    np.testing.assert_array_equal(d.test["trunk_vert"], np.arange(10, 20) * 2.0)
    assert d.anomalies.to_dict("records") == [{"start": 5, "end": 7, "root_causes": "", "duration": 2}]
    assert "NO labelled anomaly" in d.description


def test_daphnet_needs_aeon(monkeypatch):
    monkeypatch.setattr(datasets.importlib.util, "find_spec", lambda name: None)
    _raises("needs the aeon package", "mscred[datasets]", name="daphnet")


def test_daphnet_from_installed_aeon():
    # The real file, where aeon (the `datasets` extra) is installed; CI without the extra skips this one.
    if datasets.importlib.util.find_spec("aeon") is None:
        pytest.skip("aeon is not installed (pip install 'mscred[datasets]')")
    d = load_dataset("daphnet")
    assert len(d.sensors) == 9 and len(d.train) + len(d.test) == 7_040


def test_synthetic_and_names():
    assert set(DATASETS) == {"synthetic", "smd", "smap", "msl", "table", "daphnet", "tep"}
    d = load_dataset("synthetic")
    assert len(d.anomalies) == 5 and d.test["label"].sum() == 10 + 30 + 90 + 10 + 30
    _raises("unknown dataset 'nope'", name="nope")


def test_write(tmp_path, smd):
    root, *_ = smd
    d = load_dataset("smd:machine-1-1", root)
    d.write(tmp_path / "out")
    back = load_dataset("table", tmp_path / "out")
    np.testing.assert_allclose(back.test[d.sensors].to_numpy(), d.test[d.sensors].to_numpy())
    pd.testing.assert_frame_equal(back.anomalies, d.anomalies)


def test_intervals_from_labels():
    got = intervals_from_labels(np.array([1, 1, 0, 0, 1, 0, 1]), timestamps=np.arange(10, 17))
    assert got.to_dict("records") == [
        {"start": 10, "end": 12, "root_causes": "", "duration": 2},
        {"start": 14, "end": 15, "root_causes": "", "duration": 1},
        {"start": 16, "end": 17, "root_causes": "", "duration": 1},
    ]
    assert len(intervals_from_labels(np.zeros(5))) == 0


def test_smd_interpretation_not_utf8_is_bad_input(smd):
    """A non-UTF-8 interpretation_label file was an internal UnicodeDecodeError (demo exit 1, fleet "error:")."""
    root, *_ = smd
    (root / "interpretation_label" / "machine-1-1.txt").write_bytes(b"5-8:1,3\n\xff\xfe21-21:5\n")
    _raises("interpretation_label/machine-1-1.txt", "cannot read", name="smd:machine-1-1", root=root)


def test_smd_interpretation_interval_without_labelled_row_is_refused(smd):
    """Rows 10-12 are all 0 in test_label: the interval was kept, giving "anomalies found 0/1" silently."""
    root, *_ = smd
    (root / "interpretation_label" / "machine-1-1.txt").write_text("5-8:1,3\n10-12:2\n")
    _raises("interpretation_label/machine-1-1.txt", "interval 10-12", "covers no anomalous row",
            name="smd:machine-1-1", root=root)
    # Partly labelled intervals stay accepted (OmniAnomaly's own files are not always exact).
    (root / "interpretation_label" / "machine-1-1.txt").write_text("3-8:1,3\n21-21:5\n")
    assert len(load_dataset("smd:machine-1-1", root).anomalies) == 2


def test_table_anomalies_checked_at_load(tmp_path):
    """anomalies.csv was read unchecked: empty/non-UTF-8 files crashed (exit 1); text cells, ragged rows and
    intervals off the test timestamps loaded, the demo trained, then evaluation failed naming its own copy."""
    from mscred.data.synthetic import write_synthetic

    write_synthetic(tmp_path / "syn", n_sensors=3, length=3_000, seed=1)
    path = tmp_path / "syn" / "anomalies.csv"
    good = pd.read_csv(path, keep_default_na=False)
    first = int(load_dataset("table", tmp_path / "syn").test["timestamp"].iloc[0])
    header = "start,end,root_causes,duration\n"
    cases = [
        (b"", "the file is empty"),
        (header.encode() + b"\xff\xfe,1,x,1\n", "not UTF-8"),
        (f"{header}abc,def,x,1\n".encode(), "column 'start' row 1"),
        (f"{header}1,2,3,4,5,6\n".encode(), "more fields than the header"),
        (f"{header}{first + 9},{first + 5},x,1\n".encode(), "row 1: end"),
        (f"{header}99999,100000,x,1\n".encode(), "row 1: interval 99999..100000 covers none of the test part"),
        (f"{header}{first + 5},{first + 9},,4\n{first - 50},{first - 40},,10\n".encode(), "row 2: interval"),
        (f"{header}{first + 5},{first + 9},no_such_sensor,4\n".encode(), "row 1: root cause 'no_such_sensor' is not"),
    ]
    for content, fragment in cases:
        path.write_bytes(content)
        _raises(str(path), fragment, name="table", root=tmp_path / "syn")
    # A header-only file (a dataset with no anomaly writes one) and the original still load.
    path.write_text(header)
    assert load_dataset("table", tmp_path / "syn").anomalies.empty
    good.to_csv(path, index=False)
    assert len(load_dataset("table", tmp_path / "syn").anomalies) == len(good)


def test_missing_smd_and_telemanom_say_where_the_data_comes_from(smd, telemanom, tmp_path):
    """A missing SMD/SMAP/MSL file said only "not found": these are never shipped, so say where they come from."""
    root, *_ = smd
    _raises("machine-9-9.txt", "not found", "OmniAnomaly", "Evaluation you can trust", name="smd:machine-9-9",
            root=root)
    _raises("not found", "OmniAnomaly", name="smd", root=tmp_path / "nowhere")
    troot, _ = telemanom
    (troot / "labeled_anomalies.csv").unlink()
    _raises("labeled_anomalies.csv", "not found", "telemanom", "Evaluation you can trust", name="smap:P-1",
            root=troot)


def test_telemanom_fractional_sequence_is_refused(telemanom):
    """int() truncated [[1.5, 2.7]] to rows 1..2 silently."""
    root, _ = telemanom
    table = pd.read_csv(root / "labeled_anomalies.csv")
    for text in ("[[1.5, 2.7]]", "[[1, 2.0]]", "[[True, 3]]"):
        table.loc[0, "anomaly_sequences"] = text
        table.to_csv(root / "labeled_anomalies.csv", index=False)
        _raises("line 2", text, "whole numbers", name="smap:P-1", root=root)


def test_daphnet_bad_flag_names_is_anomaly(tmp_path):
    """The value was reported in column 'label', a name the file does not have (it is renamed on load)."""
    pd.DataFrame({"ankle_vert": np.arange(6.0), "is_anomaly": [0, 0, 0, 2, 0, 0]}).to_csv(
        tmp_path / "S06R02E0.csv", index=False)
    _raises("S06R02E0.csv", "column 'is_anomaly' row 4", "not 0 or 1", name="daphnet", root=tmp_path)


def test_table_anomalies_with_date_times(tmp_path):
    """A table dataset with date-time timestamps and an anomalies.csv of date-times was refused at load ("not a
    finite number"), though `mscred evaluate` places such start/end by instant: now the dataset loads them as
    evaluate reads them, and the events land on the labelled rows."""
    from mscred.evaluation import events_from_anomalies

    rng = np.random.default_rng(0)
    times = pd.date_range("2024-01-01", periods=300, freq="min").strftime("%Y-%m-%d %H:%M:%S")
    for part in ("train", "test"):
        frame = pd.DataFrame(rng.standard_normal((300, 3)), columns=["a", "b", "c"])
        frame.insert(0, "timestamp", times)
        if part == "test":
            frame["label"] = np.isin(np.arange(300), np.arange(120, 150)).astype(int)
        frame.to_csv(tmp_path / f"{part}.csv", index=False)
    header = "start,end,root_causes,duration\n"
    (tmp_path / "anomalies.csv").write_text(f"{header}{times[120]},{times[150]},b;c,30\n")
    data = load_dataset("table", tmp_path)
    assert list(data.anomalies["start"]) == [times[120]]
    stamps = pd.to_datetime(data.test["timestamp"]).to_numpy()
    events, causes, dropped, clipped = events_from_anomalies(data.anomalies, stamps, "x", dates_ok=True)
    assert events.tolist() == [[120, 150]] and causes == [{"b", "c"}] and dropped == clipped == 0
    # A date-time outside the test part, and a number on date-time timestamps, are still refused at load.
    (tmp_path / "anomalies.csv").write_text(f"{header}2030-01-01 00:00:00,2030-01-01 01:00:00,b,60\n")
    _raises("anomalies.csv", "row 1: interval", name="table", root=tmp_path)
    (tmp_path / "anomalies.csv").write_text(f"{header}120,150,b,30\n")
    with pytest.raises(InputError, match="anomalies.csv"):
        load_dataset("table", tmp_path)
