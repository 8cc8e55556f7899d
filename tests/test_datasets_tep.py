"""The Tennessee Eastman loader (``tep:<fault>``) on tiny files in the Braatz layout, and on bibmon's files."""
import numpy as np
import pytest

from mscred.data import datasets
from mscred.data.datasets import TEP_FAULT_START, TEP_SENSORS, load_dataset
from mscred.errors import InputError


def _write(path, array):
    # The Braatz files: whitespace-separated, leading spaces, exponent notation (as `d01_te.dat` in bibmon).
    np.savetxt(path, array, fmt="%15.7e", delimiter=" ")


@pytest.fixture
def tep(tmp_path):
    rng = np.random.default_rng(0)
    d00, d00_te = rng.random((120, 52)), rng.random((200, 52))
    d03_te = rng.random((TEP_FAULT_START + 40, 52))
    _write(tmp_path / "d00.dat", d00.T)  # d00.dat is stored transposed: one line per variable
    _write(tmp_path / "d00_te.dat", d00_te)
    _write(tmp_path / "d03_te.dat", d03_te)
    return tmp_path, d00, d00_te, d03_te


def test_tep_layout(tep):
    root, d00, d00_te, d03_te = tep
    d = load_dataset("tep:3", root)
    assert d.name == "tep:3" and d.sensors == TEP_SENSORS
    assert d.sensors[:2] == ["xmeas_01", "xmeas_02"] and d.sensors[-1] == "xmv_11" and len(d.sensors) == 52
    # training = the two fault-free runs one after the other, d00.dat transposed back to (samples, variables)
    np.testing.assert_allclose(d.train[TEP_SENSORS].to_numpy(), np.concatenate([d00, d00_te]), rtol=1e-7)
    np.testing.assert_allclose(d.test[TEP_SENSORS].to_numpy(), d03_te, rtol=1e-7)
    np.testing.assert_array_equal(d.test["timestamp"], np.arange(200))
    assert d.test["label"].tolist() == [0] * 160 + [1] * 40
    assert d.anomalies.to_dict("records") == [{"start": 160, "end": 200, "root_causes": "", "duration": 40}]
    assert "SIMULATED" in d.description


def test_tep_errors(tep, tmp_path):
    root, *_ = tep
    with pytest.raises(InputError, match="fault must be one of 1..21"):
        load_dataset("tep:0", root)
    with pytest.raises(InputError, match="fault must be one of 1..21"):
        load_dataset("tep:x", root)
    with pytest.raises(InputError, match=r"d05_te.dat: not found"):
        load_dataset("tep:5", root)
    (root / "d07_te.dat").write_text("1.0 2.0 3.0\n4.0 5.0 6.0\n")
    with pytest.raises(InputError, match=r"d07_te.dat: expected 52 variables per sample, got shape \(2, 3\)"):
        load_dataset("tep:7", root)
    _write(root / "d08_te.dat", np.ones((100, 52)))
    with pytest.raises(InputError, match="100 samples; the fault starts after 160"):
        load_dataset("tep:8", root)
    with pytest.raises(InputError, match="no d00.dat"):
        load_dataset("tep", tmp_path / "elsewhere")


def test_tep_needs_bibmon(monkeypatch):
    monkeypatch.setattr(datasets.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(InputError, match=r"needs the bibmon package.*mscred\[datasets\]"):
        load_dataset("tep")


def test_tep_from_installed_bibmon():
    # bibmon's own files, where it is installed (the `datasets` extra); CI without the extra skips this one.
    if datasets.importlib.util.find_spec("bibmon") is None:
        pytest.skip("bibmon is not installed (pip install 'mscred[datasets]')")
    d = load_dataset("tep")  # fault 1 by default
    assert d.name == "tep:1" and len(d.train) == 500 + 960 and len(d.test) == 960
    assert int(d.test["label"].sum()) == 800
    # first sample of d01_te.dat, read off the file: 2.5025000e-01 3.6572000e+03 ...
    assert d.test.loc[0, "xmeas_01"] == pytest.approx(0.25025) and d.test.loc[0, "xmeas_02"] == pytest.approx(3657.2)
    # d00.dat is transposed on disk: its first line holds xmeas_01 of every sample (2.4987000e-01 2.5118000e-01 ...)
    assert d.train.loc[:1, "xmeas_01"].tolist() == pytest.approx([0.24987, 0.25118])


def test_demo_on_tep_layout(tep, tmp_path):
    # `mscred demo --dataset tep:3 --data-root DIR` end to end on the tiny files: 52 sensors, 200 test rows.
    from mscred.cli.demo import run_demo

    root, *_ = tep
    result = run_demo(tmp_path / "demo", dataset="tep:3", data_root=root, progress=False, report=False, epochs=1,
                      channels=(4, 8, 8, 8), device="cpu")
    assert result["dataset"] == "tep:3" and result["events_total"] == 1
    written = (tmp_path / "demo" / "data" / "test.csv").read_text().splitlines()
    assert written[0].split(",")[:3] == ["timestamp", "xmeas_01", "xmeas_02"] and len(written) == 201


@pytest.mark.parametrize("name", ["d03_te.dat", "d00.dat"])
def test_tep_text_cell_names_sample_and_variable(tep, name):
    """A text cell was "cannot read: could not convert string to float: 'abc'", with no place in the file."""
    root = tep[0]
    lines = (root / name).read_text().splitlines()
    fields = lines[5].split()
    fields[3] = "abc"  # line 6, field 4: sample 6 variable 4, or in the transposed d00.dat variable 6 sample 4
    lines[5] = " ".join(fields)
    (root / name).write_text("\n".join(lines) + "\n")
    sample, variable = (6, 4) if name == "d03_te.dat" else (4, 6)
    with pytest.raises(InputError, match=f"{name}: line 6: sample {sample}, variable {variable}: value 'abc'"):
        load_dataset("tep:3", root)


def test_tep_text_cell_line_counts_blank_lines(tep):
    """Past a blank line in the middle of the file the line named was one too low (pandas skips blank lines, and
    the line was counted as its row + 1); the sample is still the data row."""
    root = tep[0]
    lines = (root / "d03_te.dat").read_text().splitlines()
    fields = lines[5].split()
    fields[3] = "abc"
    lines[5] = " ".join(fields)
    lines[2:2] = ["", "   "]   # sample 6 is now on line 8
    (root / "d03_te.dat").write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match="d03_te.dat: line 8: sample 6, variable 4: value 'abc'"):
        load_dataset("tep:3", root)
