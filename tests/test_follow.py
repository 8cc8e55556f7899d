"""``data/follow.GrowingCsv``: the complete lines a CSV file gains, and a file rotated in place followed as
``tail -F`` follows it (renamed and created again, cut short, rewritten). No model: the rows each poll returns are
compared with the rows written."""
from __future__ import annotations

import os

import numpy as np
import pytest

from cli_helpers import sensor_frame
from mscred.data import follow
from mscred.data.follow import GrowingCsv
from mscred.data.io import coerce_float64

FEED = sensor_frame(60, 3, seed=2)


def _lines(a: int, b: int, header: bool = False) -> bytes:
    return FEED.iloc[a:b].to_csv(index=False, header=header).encode()


def _append(path, data: bytes) -> None:
    with open(path, "ab") as handle:
        handle.write(data)


def _rows(follower: GrowingCsv, a: int, b: int, final: bool = False) -> None:
    """The next poll returns FEED's rows a..b-1."""
    rows = follower.poll(final=final)
    assert rows is not None, f"no rows where {a}..{b - 1} were due"
    np.testing.assert_array_equal(rows["timestamp"].to_numpy(), FEED["timestamp"][a:b].to_numpy())
    np.testing.assert_allclose(rows[["s0", "s1", "s2"]].to_numpy(), FEED.iloc[a:b, 1:].to_numpy(), rtol=1e-15)


@pytest.fixture
def feed(tmp_path):
    path = tmp_path / "feed.csv"
    path.write_bytes(_lines(0, 10, header=True))
    follower = GrowingCsv(path)
    yield path, follower
    follower.close()


def test_complete_lines_only(feed):
    path, follower = feed
    _rows(follower, 0, 10)
    assert follower.where() == f"{path} lines 2-11" and follower.poll() is None
    _append(path, _lines(10, 13)[:-1])   # the third line without its newline yet
    _rows(follower, 10, 12)
    assert follower.poll() is None
    _rows(follower, 12, 13, final=True)   # the writer has stopped: taken whole
    assert follower.rotations == 0 and not follower.notes


def test_a_header_written_again_is_skipped_with_a_note(feed):
    """A logger that writes its header at each start, appending: the header again in the middle of a poll's lines
    (the lines before it come first, then the rest, the line numbers those of the file) and at a poll's start
    (with Windows line endings), skipped each time with a note naming its line."""
    path, follower = feed
    _rows(follower, 0, 10)
    _append(path, _lines(10, 14) + _lines(0, 0, header=True) + _lines(14, 20))
    _rows(follower, 10, 14)
    assert follower.where() == f"{path} lines 12-15" and not follower.notes
    _rows(follower, 14, 20)
    assert follower.where() == f"{path} lines 17-22"
    assert follower.notes == [f"note: {path} line 16: the header again (its writer started over?): skipped"]
    follower.notes.clear()
    _append(path, _lines(0, 0, header=True).replace(b"\n", b"\r\n") + _lines(20, 25))
    _rows(follower, 20, 25)
    assert follower.where() == f"{path} lines 24-28"
    assert follower.notes == [f"note: {path} line 23: the header again (its writer started over?): skipped"]
    assert follower.rotations == 0


def test_decimal_commas_in_appended_lines(tmp_path):
    """A ';'-separated export with decimal commas, followed: each poll's lines read as the whole file is read."""
    def lines(a: int, b: int, header: bool = False) -> bytes:
        return FEED.iloc[a:b].to_csv(index=False, header=header, sep=";", decimal=",").encode()

    path = tmp_path / "excel.csv"
    path.write_bytes(lines(0, 10, header=True))
    follower = GrowingCsv(path)
    for a, b in ((0, 10), (10, 25)):
        if a:
            _append(path, lines(a, b))
        rows = follower.poll()
        read = np.column_stack([coerce_float64(rows[c]) for c in ("s0", "s1", "s2")])   # (as load_table reads)
        np.testing.assert_array_equal(read, FEED.iloc[a:b, 1:].to_numpy())
    follower.close()


def test_renamed_and_created_again(feed):
    """logrotate's ``create``: the lines written to the old file after the last poll (its writer still holding it
    after the rename, the last line without its newline) come first, then the new file's, its header skipped."""
    path, follower = feed
    _rows(follower, 0, 10)
    with open(path, "ab") as writer:
        writer.write(_lines(10, 12))
        os.rename(path, path.with_name("feed.csv.1"))
        writer.write(_lines(12, 13)[:-1])
    _rows(follower, 10, 12)   # while the name is missing: the old file's complete lines
    path.write_bytes(_lines(13, 16, header=True))
    _rows(follower, 12, 13)   # the new file there: the old one's last line, whole
    assert not follower.notes
    _rows(follower, 13, 16)
    assert follower.notes == [f"note: {path} was renamed and created again (rotated): following it from its "
                              "first line"]
    assert follower.where() == f"{path} (after rotation 1) lines 2-4"


def test_new_file_without_a_header_is_read_under_the_old_one(feed):
    path, follower = feed
    _rows(follower, 0, 10)
    os.rename(path, path.with_name("feed.csv.1"))
    assert follower.poll() is None    # between the rename and the new file
    path.write_bytes(_lines(10, 12))
    _rows(follower, 10, 12)
    assert follower.where() == f"{path} (after rotation 1) lines 1-2"


@pytest.mark.parametrize("header", [True, False])
def test_cut_short_and_written_again(feed, header):
    """``copytruncate``: the same file cut to nothing, then written from its start (with a header or not)."""
    path, follower = feed
    _rows(follower, 0, 10)
    with open(path, "r+b") as handle:
        handle.truncate(0)
    assert follower.poll() is None
    _append(path, _lines(10, 14, header=header))
    _rows(follower, 10, 14)
    assert follower.rotations == 1 and "was cut short or rewritten" in follower.notes[0]


def test_rewritten_longer_than_before(feed):
    """A file rewritten in place with more bytes than were read: told by the bytes before the read position."""
    path, follower = feed
    _rows(follower, 0, 10)
    path.write_bytes(_lines(20, 50, header=True))
    _rows(follower, 20, 50)
    assert follower.rotations == 1


def test_not_kept_open_on_windows(feed, monkeypatch):
    """Without the open handle (Windows), a rename moves on to the new file; the old one's unread rest is lost."""
    monkeypatch.setattr(follow, "KEEP_OPEN", False)
    path, follower = feed
    _rows(follower, 0, 10)
    assert follower._handle is None
    _append(path, _lines(10, 12))
    os.rename(path, path.with_name("feed.csv.1"))
    path.write_bytes(_lines(12, 15, header=True))
    _rows(follower, 12, 15)
    assert follower.rotations == 1


def test_an_export_rewritten_whole_is_read_on(feed):
    """A file replaced (a temporary file renamed over it) by one holding the same rows and more: not a rotation;
    only the new rows come, under the same line numbers."""
    path, follower = feed
    _rows(follower, 0, 10)
    temporary = path.with_name("feed.csv.tmp")
    temporary.write_bytes(_lines(0, 14, header=True))
    os.replace(temporary, path)
    _rows(follower, 10, 14)
    assert follower.rotations == 0 and follower.where() == f"{path} lines 12-15"
    temporary.write_bytes(_lines(0, 16, header=True))
    os.replace(temporary, path)
    _rows(follower, 14, 16)
