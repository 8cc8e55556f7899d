"""Day/month date text that reads increasing both ways (io._day_month_reading): pandas reads 01/02/2024 month first,
so hourly rows of 1-12 February written day first once read as 2 January, 2 February, ... (a month's step at every
day boundary). The reading whose steps are more regular is kept, and a note says which."""
import numpy as np
import pandas as pd
import pytest

from mscred.cli.train import report_time_gap
from mscred.data import io
from mscred.data.io import load_table

HOUR = 3600 * 10 ** 9
DAY = 24 * HOUR


def _load(tmp_path, texts, name="d.csv"):
    path = tmp_path / name
    pd.DataFrame({"timestamp": texts, "a": np.arange(len(texts), dtype=float)}).to_csv(path, index=False)
    return load_table(path)


def _steps(texts) -> np.ndarray:
    """The steps (ns) between the times the order check compared."""
    keys, tick = io.check_time_order(pd.Index(texts, dtype=object), "d.csv")[:2]
    return np.diff(keys.astype(np.int64)) * tick


def test_hourly_day_first_within_days_1_to_12_reads_day_first(tmp_path, capsys):
    texts = list(pd.date_range("2024-02-01", "2024-02-12 23:00", freq="h").strftime("%d/%m/%Y %H:%M"))
    assert texts[0] == "01/02/2024 00:00" and texts[-1] == "12/02/2024 23:00"
    table = _load(tmp_path, texts)
    assert (_steps(texts) == HOUR).all()
    assert table.time_gap is None   # (read month first: a jump of a month at every day boundary)
    note = table.time_note
    assert note.startswith(f"{tmp_path / 'd.csv'}: column 'timestamp': '01/02/2024 00:00' read day first "
                           "(1 February 2024): month first gave steps of up to 30 days 01:00:00")
    report_time_gap(table)
    err = capsys.readouterr().err
    assert err.splitlines() == [f"note: {note}"]


def test_daily_month_first_january_reads_month_first(tmp_path):
    texts = list(pd.date_range("2024-01-01", periods=12, freq="D").strftime("%m/%d/%Y"))
    assert texts[0] == "01/01/2024" and texts[-1] == "01/12/2024"
    table = _load(tmp_path, texts)
    assert (_steps(texts) == DAY).all()
    assert table.time_gap is None
    assert "'01/01/2024' read month first (1 January 2024): day first gave steps of up to 31 days" in table.time_note


@pytest.mark.parametrize("end, written", [("2024-02-14 23:00", "%d/%m/%Y %H:%M"),   # a day over 12: one reading
                                           ("2024-02-12 23:00", "%Y-%m-%d %H:%M")])  # ISO text
def test_unambiguous_text_is_unchanged(tmp_path, capsys, end, written):
    texts = list(pd.date_range("2024-02-01", end, freq="h").strftime(written))
    table = _load(tmp_path, texts)
    assert (_steps(texts) == HOUR).all()
    assert table.time_note is None and table.time_gap is None
    report_time_gap(table)
    assert capsys.readouterr().err == ""


def test_same_text_both_ways_gives_no_note(tmp_path):
    # 01/01/2024 hour by hour reads the same either way: nothing to say
    texts = [f"01/01/2024 {h:02d}:00" for h in range(5)]
    assert _load(tmp_path, texts).time_note is None
