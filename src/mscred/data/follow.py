"""The rows a CSV file gains while something appends to it (``mscred watch``): a historian's export, a logger's file.

``GrowingCsv.poll()`` returns the lines completed since the last poll as a DataFrame, read by the same CSV reader
as every other table of the package (separator, encoding, decimal commas, exact timestamps): the header and those
lines are put in a file of their own and read with ``read_frame``. A line still being written (no newline yet) is
left for a later poll; a file that shrinks (rotated, truncated, rewritten) is an InputError, since its rows can no
longer be told apart from the ones already scored. Lines are cut at their newline bytes, so a quoted cell holding a
line break (which no sensor export writes in its rows) would be cut in two.
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional

import pandas as pd

from mscred.data.io import csv_encoding, is_plain_text, read_frame
from mscred.errors import InputError


class GrowingCsv:
    """Polls ``path`` for complete new lines. ``lines`` says which lines of the file (1-based, the header line 1)
    the last poll returned, for messages."""

    def __init__(self, path: str | os.PathLike, encoding: Optional[str] = None):
        self.path, self.encoding = Path(path), encoding
        if not is_plain_text(self.path):
            raise InputError(f"{self.path}: watch follows a plain text table (.csv, .txt or .tsv) as it grows; a "
                             f"{self.path.suffix or 'suffix-less'} file is not appended to line by line")
        codec = csv_encoding(encoding)
        if _newline(codec) != b"\n":
            # (lines are cut at newline bytes before decoding: in UTF-16 or UTF-32 a newline is several bytes,
            # which a cut could split)
            raise InputError(f"{self.path}: watch reads a file line by line in an encoding where a newline is one "
                             f"byte (UTF-8, Latin-1, cp1252, ...), not {codec}: have it written in UTF-8")
        if not self.path.exists():
            raise InputError(f"{self.path}: file not found")
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a directory, expected a .csv file")
        self.header: Optional[bytes] = None
        self.offset = 0          # bytes read so far: the header and every complete line returned
        self.line = 1            # lines returned so far, the header's included
        self.lines = (0, 0)
        self._folder = None   # where each poll's lines are put to be read (made at the first poll with lines)

    def close(self) -> None:
        if self._folder is not None:
            self._folder.cleanup()

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The rows of the lines completed since the last poll, or None when there are none. ``final``: a last
        line without its newline counts as complete (the writer has stopped)."""
        size = self.path.stat().st_size
        if size < self.offset:
            raise InputError(f"{self.path}: the file shrank from {self.offset} to {size} bytes (rotated or "
                             "rewritten?); watch follows a file that is only appended to: start it again")
        with open(self.path, "rb") as handle:
            handle.seek(self.offset)
            new = handle.read(size - self.offset)
        taken = len(new)
        if final and new and not new.endswith(b"\n"):
            new += b"\n"
        end = new.rfind(b"\n") + 1          # complete lines only: the rest is still being written
        if end == 0:
            return None
        if self.header is None:
            first = new.find(b"\n") + 1
            self.header, self.offset, new, end, taken = new[:first], first, new[first:], end - first, taken - first
            if end == 0:
                return None
        lines = new[:end]
        count = lines.count(b"\n")
        self.lines = (self.line + 1, self.line + count)
        # Read before the offset moves: a poll that fails leaves the lines to be reported again, not skipped
        rows = self._read(lines)
        self.offset += min(end, taken)    # (a final line's added newline is not the file's)
        self.line += count
        return rows

    def _read(self, lines: bytes) -> pd.DataFrame:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="mscred-watch-")
        copy = Path(self._folder.name) / self.path.name
        copy.write_bytes(self.header + lines)
        try:
            return read_frame(copy, npy=False, encoding=self.encoding)
        except InputError as err:    # named as the watched file's lines, not the copy
            raise InputError(str(err).replace(str(copy), self.where())) from None

    def where(self, skip: int = 0) -> str:
        """The watched file and the lines of the last poll (after its first ``skip``), as messages name them."""
        first, last = self.lines
        first += skip
        return f"{self.path} line{'s' if last > first else ''} {first}" + (f"-{last}" if last > first else "")


def _newline(codec: str) -> bytes:
    """A newline's bytes in ``codec``, a byte-order mark aside (that of "\n\n" after that of "\n")."""
    return "\n\n".encode(codec)[len("\n".encode(codec)):]


class RollingCsvFolder:
    """A folder of plain text tables that a logger rolls (``feed-2026-12-05.csv``, then ``feed-2026-12-06.csv``),
    followed as one feed: the files in name order, each one's lines as they come. Once a file whose name sorts
    later appears, the rest of the current one is read (its last line taken whole: its writer has moved on) and the
    next is followed. Hidden files and files of other types (an archive of old ones) are not the feed's."""

    def __init__(self, folder: str | os.PathLike, encoding: Optional[str] = None):
        self.path, self.encoding = Path(folder), encoding
        self.current: Optional[GrowingCsv] = None

    def _files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir()
                      if p.is_file() and not p.name.startswith(".") and is_plain_text(p))

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The rows the feed gained since the last poll (those of one file), or None."""
        while True:
            files = self._files()
            if self.current is None:
                if not files:
                    return None
                self.current = GrowingCsv(files[0], self.encoding)
            later = [p for p in files if p.name > self.current.path.name]
            rows = self.current.poll(final=final or bool(later))
            if rows is not None or not later:
                return rows
            self.current.close()
            self.current = GrowingCsv(later[0], self.encoding)

    def where(self, skip: int = 0) -> str:
        return self.current.where(skip) if self.current is not None else str(self.path)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()
