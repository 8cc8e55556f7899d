"""The rows a CSV file gains while something appends to it (``mscred watch``): a historian's export, a logger's file.

``GrowingCsv.poll()`` returns the lines completed since the last poll as a DataFrame, read by the same CSV reader
as every other table of the package (separator, encoding, decimal commas, exact timestamps): the header and those
lines are put in a file of their own and read with ``read_frame``. A line still being written (no newline yet) is
left for a later poll. Lines are cut at their newline bytes, so a quoted cell holding a line break (which no sensor
export writes in its rows) would be cut in two. Standard input (``watch -``) is followed the same way, a pipe's
lines as they arrive (``StdinLines``; the lines' reading is ``CsvLines``', shared).

A file rotated in place is followed as ``tail -F`` follows it, since that is what logrotate and most loggers do:
- renamed away and created again under the name (logrotate's ``create``): the rest of the renamed file is read
  first, through the handle kept open on it (its last line taken whole: its writer has moved on), then the new file
  from its first line;
- cut to nothing and written again (``copytruncate``), or rewritten (the bytes before the read position changed):
  read again from its first line.
The new file's first line is skipped when it repeats the header; otherwise it is a row, read under the old header.
A line that repeats the header anywhere else (a logger that writes its header at each start, appending) is skipped
too, with a note.
A file replaced by one that holds the same bytes up to the read position and more (an export rewritten whole, through
a temporary file renamed over it) is not a rotation: it is read on from that position. Lines written between the last
poll and a ``copytruncate`` are in the copy only, and not read (as with ``tail -F``).
Each rotation leaves a line in ``notes``. Rows that a rewrite repeats are refused downstream where they have
timestamps (times that go back); without timestamps nothing can tell them from new rows. On Windows the file is not
kept open (that would stop a logger renaming it), so what its writer added after the last poll and before a
rename is not read.
"""
from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Optional

import pandas as pd

from mscred.data.io import csv_encoding, is_parquet, is_plain_text, read_frame
from mscred.data.reading import PLAIN, Reading
from mscred.errors import InputError

# Whether the followed file is kept open between polls, to read the rest of it after it is renamed (see above)
KEEP_OPEN = os.name != "nt"
# Whether standard input is read without blocking at each poll (POSIX pipes), else by a thread (``StdinLines``)
NONBLOCKING_PIPES = os.name != "nt"


class CsvLines:
    """The rows of a CSV text's complete lines, a batch at a time as the text grows: the header kept from its first
    line, each batch read by the package's CSV reader (``read_frame``: separator, encoding, decimal commas, exact
    timestamps) from a file of the header and those lines. ``lines`` says which lines (1-based, the header line 1)
    the last batch held, for messages; a line still being written (no newline yet) is left for a later batch.
    Where the bytes come from is the subclass's: ``GrowingCsv`` (a file, rotations followed), ``StdinLines``
    (standard input). ``reading``: how the lines are read (``mscred.data.reading``; a model's, which its caller
    may set after construction, as ``mscred watch`` does once the model is loaded)."""

    def __init__(self, path: str | os.PathLike, encoding: Optional[str] = None, reading: Reading = PLAIN):
        self.path, self.encoding, self.reading = Path(path), encoding, reading
        codec = csv_encoding(encoding)
        if _newline(codec) != b"\n":
            # (lines are cut at newline bytes before decoding: in UTF-16 or UTF-32 a newline is several bytes,
            # which a cut could split)
            raise InputError(f"{self.path}: watch reads a file line by line in an encoding where a newline is one "
                             f"byte (UTF-8, Latin-1, cp1252, ...), not {codec}: have it written in UTF-8")
        self.header: Optional[bytes] = None
        self.offset = 0          # bytes of the text read so far: its header and every complete line returned
        self.line = 0            # lines of the text read so far, its header's included
        self.lines = (0, 0)
        self.rotations = 0
        self.notes: list[str] = []   # a line per rotation, for the caller to show and clear
        self._seen = b""             # the last bytes read, checked unchanged at each poll (a rewrite)
        self._header_next = False    # whether the text's next line may repeat the header (after a rotation)
        self._folder = None   # where each batch's lines are put to be read (made at the first batch with lines)

    def close(self) -> None:
        if self._folder is not None:
            self._folder.cleanup()

    def _take(self, new: bytes, final: bool) -> Optional[pd.DataFrame]:
        """The rows of the complete lines of ``new`` (the bytes after ``offset``), the read position moved past
        them; None when there are none."""
        taken = len(new)
        if final and new and not new.endswith(b"\n"):
            new += b"\n"
        end = new.rfind(b"\n") + 1          # complete lines only: the rest is still being written
        if end == 0:
            return None
        if self.header is None:
            self.header = new[:new.find(b"\n") + 1]
            self._header_next = True
        # The header's line is skipped: the text's first, a rotated file's first, or one its writer wrote again
        # where it started over, appending (a logger that writes its header at each start) -- that one with a note
        while end:
            first = new.find(b"\n") + 1
            if not _same_line(new[:first], self.header):
                break
            if not self._header_next:
                self.notes.append(f"note: {self.path} line {self.line + 1}: the header again (its writer started "
                                  "over?): skipped")
            self.line += 1
            self._move(new[:min(first, taken)])
            new, end, taken = new[first:], end - first, taken - first
            self._header_next = False
        self._header_next = False
        if end == 0:
            return None
        again = _header_line_in(new[:end], self.header)
        if again > 0:   # (the lines before it now; it, skipped, and the lines after it next time)
            end = again
        lines = new[:end]
        count = lines.count(b"\n")
        self.lines = (self.line + 1, self.line + count)
        # Read before the position moves: a poll that fails leaves the lines to be reported again, not skipped
        rows = self._read(lines)
        self._move(lines[:min(end, taken)])    # (a final line's added newline is not the file's)
        self.line += count
        return rows

    def _move(self, read: bytes) -> None:
        self.offset += len(read)
        self._seen = (self._seen + read)[-64:]   # (enough to tell a rewrite from the same bytes)

    def _read(self, lines: bytes) -> pd.DataFrame:
        if self._folder is None:
            self._folder = tempfile.TemporaryDirectory(prefix="mscred-watch-")
        copy = Path(self._folder.name) / (self.path.name if is_plain_text(self.path) else "lines.csv")
        copy.write_bytes(self.header + lines)
        try:
            return read_frame(copy, npy=False, encoding=self.encoding, reading=self.reading)
        except InputError as err:    # named as the watched file's lines, not the copy
            raise InputError(str(err).replace(str(copy), self.where())) from None

    def where(self, skip: int = 0) -> str:
        """The watched file and the lines of the last poll (after its first ``skip``), as messages name them."""
        first, last = self.lines
        first += skip
        since = f" (after rotation {self.rotations})" if self.rotations else ""
        return f"{self.path}{since} line{'s' if last > first else ''} {first}" + (f"-{last}" if last > first else "")


class GrowingCsv(CsvLines):
    """Polls the file ``path`` for complete new lines (``CsvLines``), following it when it is rotated (see the
    module); ``rotations`` says how often it was."""

    def __init__(self, path: str | os.PathLike, encoding: Optional[str] = None, reading: Reading = PLAIN):
        if not is_plain_text(Path(path)):
            raise InputError(f"{path}: watch follows a plain text table (.csv, .txt or .tsv) as it grows; a "
                             f"{Path(path).suffix or 'suffix-less'} file is not appended to line by line")
        super().__init__(path, encoding, reading)
        if not self.path.exists():
            raise InputError(f"{self.path}: file not found")
        if self.path.is_dir():
            raise InputError(f"{self.path}: is a directory, expected a .csv file")
        self._identity = None        # (device, inode) of the file read
        self._handle = None          # that file, open (KEEP_OPEN)

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
        super().close()

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The rows of the lines completed since the last poll, or None when there are none. ``final``: a last
        line without its newline counts as complete (the writer has stopped)."""
        change = self._rotation()
        if change == "replaced":           # by a file that goes on from the same bytes: read on in it
            self._switch()
        elif change == "renamed":
            if self._handle is not None:   # the renamed file's rest first, its last line whole
                rows = self._take(self._unread(), final=True)
                if rows is not None:
                    return rows            # (the next poll moves on to the new file)
            self._start_over("was renamed and created again")
        elif change == "truncated":
            self._start_over("was cut short or rewritten")
        elif change == "missing":          # between a rename and the new file's creation
            return self._take(self._unread(), final) if self._handle is not None else None
        return self._take(self._unread(), final)

    def _rotation(self) -> Optional[str]:
        """How the file at ``path`` differs from the one read: None (only grown), "missing", "replaced" (by another
        file that holds the bytes read, and maybe more), "renamed" (another file is there now) or "truncated"
        (shorter than what was read, or the bytes read changed)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return "missing" if self._identity is not None else None
        if self._identity is None:   # (not read yet)
            return None
        if (stat.st_dev, stat.st_ino) != self._identity:
            return "replaced" if self._holds_what_was_read(stat.st_size) else "renamed"
        if not self._holds_what_was_read(stat.st_size, self._handle):
            return "truncated"
        return None

    def _holds_what_was_read(self, size: int, handle=None) -> bool:
        """Whether the file at ``path`` (of ``size`` bytes; ``handle``: open on it, else it is opened) is at least
        as long as what was read and holds the last bytes read where they were read."""
        if size < self.offset:
            return False
        if not self._seen:
            return True
        if handle is not None:
            handle.seek(self.offset - len(self._seen))
            return handle.read(len(self._seen)) == self._seen
        try:
            with open(self.path, "rb") as opened:
                return self._holds_what_was_read(size, opened)
        except FileNotFoundError:
            return False

    def _switch(self) -> None:
        """Read on, from the same position, in the file now at ``path``."""
        if self._handle is not None:
            self._handle.close()
            self._handle = None
        self._identity = None   # (the next read records the new file's)

    def _start_over(self, how: str) -> None:
        """Follow the file now at ``path`` from its first line."""
        self._switch()
        self.offset, self.line, self._seen = 0, 0, b""
        self._header_next = True
        self.rotations += 1
        self.notes.append(f"note: {self.path} {how} (rotated): following it from its first line")

    def _unread(self) -> bytes:
        """The file's bytes after those read (none while it is missing)."""
        try:
            if self._handle is None:
                handle = open(self.path, "rb")
                if self._identity is None:
                    stat = os.fstat(handle.fileno())
                    self._identity = (stat.st_dev, stat.st_ino)
                if KEEP_OPEN:
                    self._handle = handle
            else:
                handle = self._handle
        except FileNotFoundError:
            return b""
        try:
            handle.seek(self.offset)
            return handle.read()
        finally:
            if handle is not self._handle:
                handle.close()

def _header_line_in(block: bytes, header: bytes) -> int:
    """Where a line of ``block`` (complete lines) after its first repeats ``header`` (as ``_same_line`` compares
    them), or -1. A search for the header's text after a newline, then a check that the line ends there."""
    bare = header.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n")
    at = block.find(b"\n" + bare)
    while at >= 0:
        after = at + 1 + len(bare)
        if block[after:after + 1] == b"\n" or block[after:after + 2] == b"\r\n":
            return at + 1
        at = block.find(b"\n" + bare, at + 1)
    return -1


def _same_line(a: bytes, b: bytes) -> bool:
    """Whether two lines are the same, byte-order marks and line endings aside (a header written again)."""
    def bare(line: bytes) -> bytes:
        return line.removeprefix(b"\xef\xbb\xbf").rstrip(b"\r\n")
    return bare(a) == bare(b)


def _newline(codec: str) -> bytes:
    """A newline's bytes in ``codec``, a byte-order mark aside (that of "\n\n" after that of "\n")."""
    return "\n\n".encode(codec)[len("\n".encode(codec)):]


class StdinLines(CsvLines):
    """Standard input followed as it arrives (``mscred watch MODEL -``): a CSV that another program writes into a pipe
    (``ssh plant3 tail -n +1 -F feed.csv | mscred watch model/ - --out scores.csv``), its complete lines at each
    poll (its first line the header). On POSIX the pipe is read without blocking at each poll, so that a poll's
    lines are those that arrived before it (its blocking mode is restored at ``close``: the shell shares it);
    elsewhere a thread reads it into a buffer. ``ended``: its writer closed it and every line was returned (the
    last one taken whole, a newline or not). Messages name it ``<stdin>``; it has no rotations."""

    def __init__(self, encoding: Optional[str] = None, reading: Reading = PLAIN, stream=None):
        from mscred.cli.stdio import STDIN_NAME

        stream = sys.stdin if stream is None else stream
        if stream is None or stream.isatty():
            raise InputError(f"{STDIN_NAME}: DATA '-' follows a table piped into standard input, which is "
                             f"{'closed' if stream is None else 'a terminal'} here: pipe the feed in (logger | mscred "
                             "watch MODEL - --out SCORES.csv)")
        super().__init__(STDIN_NAME, encoding, reading)
        self._buffer = bytearray()   # the bytes that came and were not returned yet
        self._eof = False
        self._fd = stream.fileno() if NONBLOCKING_PIPES else None
        self._was_blocking = None    # (the pipe's mode, once the first poll has made it non-blocking)
        if self._fd is None:
            import threading

            self._lock, self._arrived, self._done = threading.Lock(), bytearray(), threading.Event()
            source = getattr(stream, "buffer", stream)
            threading.Thread(target=self._read_in_background, args=(source,), daemon=True).start()

    @property
    def ended(self) -> bool:
        return self._eof and not self._buffer

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The rows of the lines that arrived complete since the last poll (all of them once the writer has
        closed the pipe, or with ``final``), or None."""
        self._fill()
        before = self.offset
        rows = self._take(bytes(self._buffer), final or self._eof)
        del self._buffer[:self.offset - before]
        return rows

    def _fill(self) -> None:
        if self._fd is None:
            with self._lock:
                self._buffer += self._arrived
                self._arrived.clear()
                self._eof = self._done.is_set() and not self._arrived
            return
        if self._was_blocking is None:   # (at the first poll, not before: a command refused earlier leaves it be)
            self._was_blocking = os.get_blocking(self._fd)
            os.set_blocking(self._fd, False)
        while True:
            try:
                chunk = os.read(self._fd, 1 << 16)
            except BlockingIOError:   # (nothing more has arrived yet)
                return
            if not chunk:
                self._eof = True
                return
            self._buffer += chunk

    def _read_in_background(self, source) -> None:
        read = getattr(source, "read1", source.read)   # (read1: what has arrived, without waiting for a full chunk)
        while chunk := read(1 << 16):
            with self._lock:
                self._arrived += chunk
        self._done.set()

    def close(self) -> None:
        if self._was_blocking is not None:
            try:
                os.set_blocking(self._fd, self._was_blocking)
            except OSError:   # (closed meanwhile)
                pass
        super().close()


class ParquetPart:
    """A Parquet file of a rolled folder (a data lake's hourly drop, a Spark or Kafka Connect file sink), read whole
    once it is complete: nothing appends to a Parquet file, and its writer writes the footer last, so until then
    it does not read and the poll waits. A file still unreadable when the feed has moved past it (a later file, or
    the watch's ``final`` poll) is refused with the reader's line. The interface of ``GrowingCsv`` that
    ``RollingFolder`` uses: ``poll``, ``where``, ``notes``, ``path``, ``close``; ``reading`` as its."""

    def __init__(self, path: str | os.PathLike, reading: Reading = PLAIN):
        self.path, self.reading = Path(path), reading
        self.notes: list[str] = []
        self.rows = 0            # the file's rows, once read
        self.done = False

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        if self.done:
            return None
        try:
            frame = read_frame(self.path, npy=False)
        except InputError:
            if final:
                raise
            return None   # (being written: its footer is not there yet)
        self.done, self.rows = True, len(frame)
        # (a complete file without the time column is refused now, not waited on as one being written)
        return self.reading.frame(frame, str(self.path))

    def where(self, skip: int = 0) -> str:
        first = 1 + skip
        return f"{self.path} row{'s' if self.rows > first else ''} {first}" + (
            f"-{self.rows}" if self.rows > first else "")

    def close(self) -> None:
        pass


class RollingFolder:
    """A folder of the tables a logger rolls (``feed-2026-12-05.csv``, then ``feed-2026-12-06.csv``; or the
    Parquet files a data lake's writer drops, ``part-0001.parquet``), followed as one feed: the files in name order,
    a text table's lines as they come (``GrowingCsv``), a Parquet file whole once complete (``ParquetPart``). Once a
    file whose name sorts later appears, the rest of the current one is read (its last line taken whole: its writer
    has moved on) and the next is followed. Hidden files and files of other types (an archive of old ones, a
    compressed log) are not the feed's. ``reading`` as ``GrowingCsv``'s, for every file."""

    def __init__(self, folder: str | os.PathLike, encoding: Optional[str] = None, reading: Reading = PLAIN):
        self.path, self.encoding, self.reading = Path(folder), encoding, reading
        self.current: Optional[GrowingCsv | ParquetPart] = None
        self.notes: list[str] = []   # the files' rotations (see ``GrowingCsv``), for the caller to show and clear

    def _files(self) -> list[Path]:
        return sorted(p for p in self.path.iterdir()
                      if p.is_file() and not p.name.startswith(".") and (is_plain_text(p) or is_parquet(p)))

    def _follow(self, path: Path) -> GrowingCsv | ParquetPart:
        return ParquetPart(path, self.reading) if is_parquet(path) else GrowingCsv(path, self.encoding, self.reading)

    def poll(self, final: bool = False) -> Optional[pd.DataFrame]:
        """The rows the feed gained since the last poll (those of one file), or None."""
        while True:
            files = self._files()
            if self.current is None:
                if not files:
                    return None
                self.current = self._follow(files[0])
            later = [p for p in files if p.name > self.current.path.name]
            rows = self.current.poll(final=final or bool(later))
            self.notes += self.current.notes
            self.current.notes.clear()
            if rows is not None or not later:
                return rows
            self.current.close()
            self.current = self._follow(later[0])

    def where(self, skip: int = 0) -> str:
        return self.current.where(skip) if self.current is not None else str(self.path)

    def close(self) -> None:
        if self.current is not None:
            self.current.close()


class HeldBack:
    """A follower put around another (``follower``) that holds back the rows it last read until later ones show them
    complete: a long feed's last time (``mscred.data.long_feed.LongFeed``), a resampled feed's last period
    (``mscred.data.grid_feed.GridFeed``). The file, its notes and its closing are the inner follower's; ``release``
    and ``stop_note``, which ``watch`` asks of such a follower, are theirs to give."""

    def __init__(self, follower):
        self.follower = follower

    @property
    def path(self):
        return self.follower.path

    @property
    def notes(self) -> list[str]:
        return self.follower.notes

    def close(self) -> None:
        self.follower.close()

    def release(self) -> Optional[pd.DataFrame]:
        """The held rows, taken as complete (``watch --resume``: the last watch scored them at its final poll), as
        this follower polls rows; None when none are held."""
        raise NotImplementedError

    def stop_note(self) -> Optional[str]:
        """The ``note:`` a watch stopped before the held rows were shown complete says of them; None when none are
        held."""
        raise NotImplementedError
