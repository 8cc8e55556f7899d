"""``-`` as DATA (standard input) and as ``--out`` (standard output) of ``mscred detect``, for pipelines:
``ssh plant3 cat feed.csv | mscred detect model/ - --out - | grep ...``.

Standard input is copied to a file of its own first (the readers want a path; a CSV's separator is sniffed from its
first lines, Parquet and gzip are told by their magic bytes), and every message names it ``<stdin>``, never the copy.
Standard output gets SCORES.csv's text only once everything has been scored, so a refused input leaves it empty,
as a refused ``--out FILE`` is never written; the summary then goes to stderr.
"""
from __future__ import annotations

import contextlib
import sys
import tempfile
from pathlib import Path
from typing import Iterator

from mscred.errors import InputError

STDIO = "-"
STDIN_NAME = "<stdin>"
_PARQUET_MAGIC = b"PAR1"
_GZIP_MAGIC = b"\x1f\x8b"   # (a gzip stream: `cat feed.csv.gz | mscred detect MODEL - ...` reads the CSV inside)


@contextlib.contextmanager
def stdin_as_file(data) -> Iterator[Path]:
    """``data`` as a path: itself, or for ``-`` a copy of standard input (``stdin.csv`` or ``stdin.parquet``);
    an InputError raised inside names ``<stdin>`` instead of the copy."""
    if str(data) != STDIO:
        yield Path(data)
        return
    stream = sys.stdin
    if stream is None or stream.isatty():
        raise InputError(f"{STDIN_NAME}: DATA '-' reads the table from standard input, which is a terminal here: "
                         "pipe a file in (cat data.csv | mscred detect MODEL - --out -)")
    raw = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8")
    with tempfile.TemporaryDirectory(prefix="mscred-stdin-") as folder:
        name = ("stdin.parquet" if raw.startswith(_PARQUET_MAGIC) else "stdin.csv.gz" if raw.startswith(_GZIP_MAGIC)
                else "stdin.csv")
        copy = Path(folder) / name
        copy.write_bytes(raw)
        try:
            yield copy
        except InputError as err:
            raise InputError(str(err).replace(str(copy), STDIN_NAME)) from None
