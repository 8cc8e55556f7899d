"""load_table on CSV / Parquet / .npy, one test per bad input of SPEC.md, and the Normalizer."""
import json

import numpy as np
import pandas as pd
import pytest

from mscred.data.io import Normalizer, load_table, table_from_frame
from mscred.errors import InputError


def _frame():
    return pd.DataFrame(
        {
            "timestamp": [100, 101, 102, 103],
            "a": [1.0, 2.0, 3.0, 4.0],
            "b": [0.5, -0.5, 0.25, 0.0],
            "label": [0, 0, 1, 0],
        }
    )


def _check(table, path):
    assert table.sensors == ["a", "b"]
    assert table.values.dtype == np.float64 and table.values.shape == (4, 2)
    np.testing.assert_array_equal(table.values[:, 0], [1, 2, 3, 4])
    np.testing.assert_array_equal(table.values[:, 1], [0.5, -0.5, 0.25, 0.0])
    assert list(table.index) == [100, 101, 102, 103] and table.index.name == "timestamp"
    np.testing.assert_array_equal(table.labels, [0, 0, 1, 0])
    assert table.source == str(path)


def test_csv(tmp_path):
    path = tmp_path / "d.csv"
    _frame().to_csv(path, index=False)
    _check(load_table(path), path)


def test_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    path = tmp_path / "d.parquet"
    _frame().to_parquet(path, index=False)
    _check(load_table(path), path)


def test_npy_plain_and_structured(tmp_path):
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    np.save(tmp_path / "x.npy", x)
    t = load_table(tmp_path / "x.npy")
    assert t.sensors == ["sensor_0", "sensor_1"] and t.labels is None
    assert list(t.index) == list(range(6))
    np.testing.assert_array_equal(t.values, x)
    rec = np.zeros(4, dtype=[("timestamp", "i8"), ("a", "f8"), ("b", "f8"), ("label", "i8")])
    f = _frame()
    for name in rec.dtype.names:
        rec[name] = f[name]
    np.save(tmp_path / "rec.npy", rec)
    _check(load_table(tmp_path / "rec.npy"), tmp_path / "rec.npy")


def test_no_timestamp_no_label(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("x,y\n1,2\n3,4\n5,6\n")
    t = load_table(path)
    assert isinstance(t.index, pd.RangeIndex) and list(t.index) == [0, 1, 2]
    assert t.labels is None and t.sensors == ["x", "y"]


def _raises(path, *fragments):
    with pytest.raises(InputError) as info:
        load_table(path)
    message = str(info.value)
    assert "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    return message


def test_missing_file(tmp_path):
    _raises(tmp_path / "nope.csv", "nope.csv", "not found")


def test_directory(tmp_path):
    _raises(tmp_path, "directory")


def test_unknown_type(tmp_path):
    (tmp_path / "d.xlsx").write_text("x")
    _raises(tmp_path / "d.xlsx", "d.xlsx", "unknown file type")


def test_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("")
    _raises(tmp_path / "e.csv", "e.csv", "empty")


def test_header_only(tmp_path):
    (tmp_path / "h.csv").write_text("a,b\n")
    _raises(tmp_path / "h.csv", "h.csv", "no data rows")


def test_unreadable_csv(tmp_path):
    (tmp_path / "r.csv").write_text("a,b\n1,2\n3,4,5,6\n")
    _raises(tmp_path / "r.csv", "r.csv", "cannot read as CSV")


def test_binary_garbage_csv(tmp_path):
    (tmp_path / "g.csv").write_bytes(b"\xff\xfe\x00\x81\x82\n\x00\x00\xc3\x28")
    _raises(tmp_path / "g.csv", "g.csv")


def test_unreadable_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    (tmp_path / "r.parquet").write_bytes(b"this is not parquet")
    _raises(tmp_path / "r.parquet", "r.parquet", "cannot read as Parquet")


def test_unreadable_npy(tmp_path):
    (tmp_path / "r.npy").write_bytes(b"\x93NUMPY garbage")
    _raises(tmp_path / "r.npy", "r.npy", "cannot read as .npy")


def test_npy_object_array_is_not_unpickled(tmp_path):
    np.save(tmp_path / "o.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    _raises(tmp_path / "o.npy", "o.npy", "cannot read")


def test_npy_3d(tmp_path):
    np.save(tmp_path / "c.npy", np.zeros((2, 3, 4)))
    _raises(tmp_path / "c.npy", "c.npy", "2-D", "(2, 3, 4)")


def test_non_numeric_value(tmp_path):
    (tmp_path / "d.csv").write_text("a,pump_3\n1,2\n3,4\n5,abc\n")
    _raises(tmp_path / "d.csv", "d.csv", "column 'pump_3'", "row 3", "'abc'", "not a number")


def test_non_numeric_parquet(tmp_path):
    pytest.importorskip("pyarrow")
    pd.DataFrame({"a": [1.0, 2.0], "s": ["1.5", "x"]}).to_parquet(tmp_path / "d.parquet")
    _raises(tmp_path / "d.parquet", "d.parquet", "column 's'", "row 2", "'x'")


def test_missing_value(tmp_path):
    (tmp_path / "d.csv").write_text("a,b\n1,2\n3,\n5,6\n")
    _raises(tmp_path / "d.csv", "column 'b'", "row 2", "NaN")


@pytest.mark.parametrize("token, shown", [("inf", "inf"), ("-inf", "-inf")])
def test_infinite_value(tmp_path, token, shown):
    (tmp_path / "d.csv").write_text(f"a,b\n1,2\n3,4\n5,6\n{token},1\n")
    _raises(tmp_path / "d.csv", "column 'a'", "row 4", shown, "not finite")


def test_nan_in_npy(tmp_path):
    x = np.ones((5, 3))
    x[3, 2] = np.nan
    np.save(tmp_path / "n.npy", x)
    _raises(tmp_path / "n.npy", "column 'sensor_2'", "row 4", "NaN")


def test_only_timestamp_and_label(tmp_path):
    (tmp_path / "d.csv").write_text("timestamp,label\n1,0\n2,1\n")
    _raises(tmp_path / "d.csv", "no sensor columns")


def test_bad_label(tmp_path):
    (tmp_path / "d.csv").write_text("a,label\n1,0\n2,2\n")
    _raises(tmp_path / "d.csv", "column 'label'", "row 2", "not 0 or 1")


def test_missing_timestamp(tmp_path):
    (tmp_path / "d.csv").write_text("timestamp,a\n1,0\n,2\n")
    _raises(tmp_path / "d.csv", "column 'timestamp'", "row 2")


def test_duplicate_columns():
    df = pd.DataFrame([[1.0, 2.0]], columns=["a", "a"])
    with pytest.raises(InputError, match="duplicate"):
        table_from_frame(df)


def test_frame_round_trip():
    t = table_from_frame(_frame())
    back = t.frame()
    assert list(back.columns) == ["a", "b", "label"]
    np.testing.assert_array_equal(back[["a", "b"]].to_numpy(), _frame()[["a", "b"]].to_numpy())


def test_normalizer_min_max_and_constant_sensor():
    train = np.array([[0.0, 5.0, 2.0], [10.0, 5.0, 4.0], [5.0, 5.0, 3.0]])
    norm = Normalizer().fit(train)
    out = norm.transform(train)
    np.testing.assert_allclose(out[:, 0], [0.0, 1.0, 0.5])
    np.testing.assert_allclose(out[:, 1], [0.0, 0.0, 0.0])  # constant sensor: no NaN
    np.testing.assert_allclose(out[:, 2], [0.0, 1.0, 0.5])
    test = np.array([[20.0, 6.0, 1.0]])  # outside the training range: extrapolates, stays finite
    np.testing.assert_allclose(norm.transform(test), [[2.0, 1.0, -0.5]])


def test_normalizer_json_round_trip():
    rng = np.random.default_rng(0)
    train = rng.normal(size=(50, 4))
    norm = Normalizer().fit(train)
    again = Normalizer.from_dict(json.loads(json.dumps(norm.to_dict())))
    x = rng.normal(size=(7, 4))
    np.testing.assert_array_equal(again.transform(x), norm.transform(x))


def test_normalizer_errors():
    norm = Normalizer().fit(np.ones((3, 2)))
    with pytest.raises(InputError, match="expected 2 sensors"):
        norm.transform(np.ones((3, 3)))
    with pytest.raises(InputError, match="damaged"):
        Normalizer.from_dict({"min": [0.0]})
    with pytest.raises(InputError, match="damaged"):
        Normalizer.from_dict({"min": [0.0, 1.0], "scale": [1.0]})
    with pytest.raises(InputError, match="damaged"):
        Normalizer.from_dict({"min": [0.0], "scale": [0.0]})


# --------------------------------------------------------------------------------- missing values: --missing
def test_missing_value_error_names_the_option(tmp_path):
    (tmp_path / "d.csv").write_text("a,b\n1,2\n3,\n5,6\n")
    _raises(tmp_path / "d.csv", "column 'b'", "row 2", "--missing interpolate")


def test_missing_values_interpolated_linearly_in_rows_and_held_at_the_ends(tmp_path):
    # b: a gap of two rows between 2 and 8 -> 4, 6; a: missing first row -> the first present value; c: last row
    (tmp_path / "d.csv").write_text("a,b,c\n,2,1\n1,,2\n2,,3\n3,8,\n")
    table = load_table(tmp_path / "d.csv", missing="interpolate")
    np.testing.assert_array_equal(table.values, [[1, 2, 1], [1, 4, 2], [2, 6, 3], [3, 8, 3]])
    assert table.filled == {"a": 1, "b": 2, "c": 1}
    np.testing.assert_array_equal(table.gaps, [[1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1]])
    assert load_table(tmp_path / "d.csv", missing="interpolate").values.dtype == np.float64


def test_interpolation_leaves_complete_tables_alone_and_refuses_what_it_cannot_fill(tmp_path):
    (tmp_path / "ok.csv").write_text("a,b\n1,2\n3,4\n")
    complete = load_table(tmp_path / "ok.csv", missing="interpolate")
    assert complete.filled == {} and complete.gaps is None
    (tmp_path / "empty_col.csv").write_text("a,b\n1,\n3,\n")
    with pytest.raises(InputError, match="column 'b': every value is missing"):
        load_table(tmp_path / "empty_col.csv", missing="interpolate")
    (tmp_path / "inf.csv").write_text("a,b\n1,2\n3,inf\n4,\n")  # a glitch is not a gap
    with pytest.raises(InputError, match=r"column 'b' row 2: value inf is not finite"):
        load_table(tmp_path / "inf.csv", missing="interpolate")
    (tmp_path / "text.csv").write_text("a,b\n1,2\n3,x\n")
    with pytest.raises(InputError, match="'x' is not a number"):
        load_table(tmp_path / "text.csv", missing="interpolate")
    with pytest.raises(InputError, match="missing='drop': choose one of error, interpolate"):
        load_table(tmp_path / "ok.csv", missing="drop")


def test_estimator_interpolates_dataframes_when_configured():
    from mscred.detector import MSCRED

    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.standard_normal((200, 4)), columns=list("abcd"))   # (200 rows: 3 validation windows)
    df.iloc[20:25, 1] = np.nan
    with pytest.raises(InputError, match="missing value"):
        MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(df)
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False, missing="interpolate").fit(df)
    assert len(model.detect(df)) == len(df)


def test_blank_separated_csv_reads_as_the_same_bytes_named_txt(tmp_path):
    """A blank-separated table (numpy.savetxt, a printout) named .csv was one column 'timestamp a b' and a
    "'0 1.0 0.5' is not a number" error, while the same bytes named .txt trained; aligned columns (runs of
    blanks) failed both."""
    single = "timestamp a b label\n100 1 0.5 0\n101 2 -0.5 0\n102 3 0.25 1\n103 4 0 0\n"
    aligned = ("  timestamp      a      b  label\n" + "".join(
        f"{t:>11d} {a:>6g} {b:>6g} {lab:>6d}\n" for t, a, b, lab in
        zip([100, 101, 102, 103], [1, 2, 3, 4], [0.5, -0.5, 0.25, 0.0], [0, 0, 1, 0])))
    for name, text in (("single", single), ("aligned", aligned)):
        for suffix in (".csv", ".txt"):
            path = tmp_path / f"{name}{suffix}"
            path.write_text(text)
            _check(load_table(path), path)


def test_comma_csv_with_one_blank_named_column_is_not_split(tmp_path):
    """Only a name AND rows that split into as many blank-separated fields are re-read: a one-sensor CSV named
    'sensor a' keeps its column, and rows that do not split alike keep the plain reading (and its error)."""
    path = tmp_path / "one.csv"
    path.write_text("sensor a\n1.5\n2.5\n3.5\n")
    table = load_table(path)
    assert table.sensors == ["sensor a"] and table.values[:, 0].tolist() == [1.5, 2.5, 3.5]
    ragged = tmp_path / "ragged.csv"
    ragged.write_text("a b c\n1 2\n3 4\n")
    with pytest.raises(InputError, match=r"column 'a b c' row 1: value '1 2' is not a number"):
        load_table(ragged)


# ------------------------------------------------------------------------------- float timestamps as text
@pytest.mark.parametrize("written", ["repr", "%.6f"])
def test_float_times_keep_their_text_wherever_float64_changes_one(tmp_path, written):
    """Epoch seconds as pandas writes time.time() (17 digits, each its float's shortest repr) or to the microsecond
    stay float64; one time finer than float64 far down the file (past the check's first block of rows) keeps the
    column's text, as written."""
    seconds = (1_700_000_000 + np.cumsum(np.random.default_rng(0).uniform(0.0009, 0.0011, 3000))).tolist()
    times = [repr(t) if written == "repr" else f"{t:.6f}" for t in seconds]
    path = tmp_path / "t.csv"
    pd.DataFrame({"timestamp": times, "a": np.arange(3000) % 7}).to_csv(path, index=False)
    table = load_table(path)
    assert table.index.dtype == np.float64 and table.index.tolist() == [float(t) for t in times]
    times[2500] = f"{seconds[2500]:.6f}00001"
    pd.DataFrame({"timestamp": times, "a": np.arange(3000) % 7}).to_csv(path, index=False)
    assert load_table(path).index.tolist() == times
