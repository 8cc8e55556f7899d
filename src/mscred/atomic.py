"""Write files and directories so that a crash or an error never leaves a half-written output."""
from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``, on error remove it.

    Works for a file or a directory written at the yielded path. The rename is atomic on one file system.
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    work = tmp / target.name
    try:
        yield work
        if target.is_dir() and not target.is_symlink():
            # A directory cannot be renamed over a non-empty one: move the old one aside first.
            old = tmp / (target.name + ".old")
            os.replace(target, old)
            os.replace(work, target)
        else:
            os.replace(work, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
