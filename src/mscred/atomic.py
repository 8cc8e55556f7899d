"""Write files and directories so that a crash or an error never leaves a half-written output.

A directory output (a model, a report) replaces an existing directory of the same name only when that directory
holds nothing but what mscred writes there (``owned``): a folder of the user's own files given as ``--out`` is
refused as bad input before any work, never swapped away and deleted.
"""
from __future__ import annotations

import contextlib
import glob
import os
import re
import shutil
import socket
import stat
import tempfile
from pathlib import Path
from typing import Collection, Iterable, Iterator, Optional

from mscred.errors import InputError

# Temporary folders are named .<target>.<host>-<pid>.<random>.tmp: a process killed outright (SIGKILL, power loss)
# leaves its folder, and the next write of the same target removes it once that process is gone on this host.
_HOST = socket.gethostname().replace(".", "-")
_OWNER = f"{_HOST}-{os.getpid()}"


def _check_name(target: Path, what: str) -> None:
    """An output needs a name of its own: not "", "." or ".." (``Path("")`` is ".")."""
    if not target.name or target.name in (".", ".."):
        raise InputError(f"{str(target)!r}: give {what} a file or folder name of its own")


def check_folders_above(target: str | os.PathLike) -> None:
    """InputError when a folder ``target`` needs above it is a file (``notes.txt/model``): creating it would be
    a FileExistsError (or NotADirectoryError) about a path the user did not write."""
    for above in Path(target).parents:
        if above.exists():
            if not above.is_dir():
                raise InputError(f"{target}: {above} is a file, not a folder")
            return


def check_replaceable_dir(target: str | os.PathLike, owned: Collection[str], what: str) -> None:
    """Raise InputError unless an output directory ``target`` may be written (replaced): it does not exist yet, or
    it is a directory holding only entries named in ``owned`` (a previous output of the same kind, ``what``, e.g.
    "an mscred model"); never the current folder or one above it. Call it before the work that leads to the write,
    so that a refusal costs nothing; ``atomic_path(..., owned=...)`` checks again at the write."""
    target = Path(target)
    _check_name(target, what)
    check_folders_above(target)
    if not target.exists() and not target.is_symlink():
        return
    if not target.is_dir() or target.is_symlink():
        raise InputError(f"{target}: exists and is not a folder; {what} is written as a folder")
    here, resolved = Path.cwd().resolve(), target.resolve()
    if here == resolved or resolved in here.parents:
        raise InputError(f"{target}: is the current folder or holds it; write {what} into another folder")
    foreign = sorted(entry.name for entry in target.iterdir() if entry.name not in owned)
    if foreign:
        raise InputError(f"{target}: the folder holds files that are not {what} ({few_names(foreign)}); replacing "
                         "it would delete them: write into a new or empty folder")


def few_names(names: list[str], shown: int = 3) -> str:
    """"a, b, c and 4 more": the first ``shown`` of ``names`` for a one-line message about a folder's entries."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


@contextlib.contextmanager
def atomic_path(target: str | os.PathLike, owned: Optional[Collection[str]] = None,
                what: str = "this output") -> Iterator[Path]:
    """Yield a temporary path beside ``target``; on success rename it onto ``target``, on error remove it.

    Works for a file or a directory written at the yielded path. The rename is atomic on one file system. An
    existing directory at ``target`` is replaced only if ``owned`` (the names the output consists of) is given and
    it holds nothing else (``check_replaceable_dir``). Errors of the file system name ``target``, not the
    temporary path (which the user never chose).
    """
    target = Path(target)
    _check_name(target, what)
    check_folders_above(target)
    with _named_as(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_orphans(target)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.{_OWNER}.", suffix=".tmp", dir=target.parent))
    work = tmp / target.name
    try:
        with _named_as(target, tmp):
            yield work
        if target.is_dir() and not target.is_symlink():
            if owned is None:
                raise InputError(f"{target}: exists and is a folder; {what} is written as a file")
            check_replaceable_dir(target, owned, what)
            # A directory cannot be renamed over a non-empty one: move the old one aside first.
            old = tmp / (target.name + ".old")
            with _named_as(target, tmp):
                os.replace(target, old)
                os.replace(work, target)
        elif work.is_dir() and (target.exists() or target.is_symlink()):
            raise InputError(f"{target}: exists and is not a folder; {what} is written as a folder")
        else:
            with _named_as(target, tmp):
                os.replace(work, target)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def all_or_nothing(targets: Iterable[str | os.PathLike]) -> Iterator[None]:
    """Make the writes of several outputs (files or folders, each written whole, e.g. with ``atomic_path``) inside
    the block one change, all or nothing.

    On entry every target that exists is moved aside into a hidden folder beside it (named as ``atomic_path``'s
    temporary folders; a rename on the same file system). If the block fails (an error, Ctrl-C, SIGTERM), whatever
    it left at the targets is removed, the old ones are moved back and the folders made for the targets are removed
    where left empty: every target is as it was. If it succeeds, the old ones are deleted. A process killed outright
    (SIGKILL) cleans nothing up: its moved-aside outputs are removed as its other temporary folders are, by the next
    write of the same target once that process is gone.
    """
    targets = list(dict.fromkeys(Path(target) for target in targets))
    new = [target for target in targets if not os.path.lexists(target)]
    made = {above for target in targets for above in _missing_folders(target)}
    aside: dict[Path, Path] = {}   # target -> the folder holding its old self, under the target's name
    try:
        for target in targets:
            if target not in new:
                with _named_as(target):
                    aside[target] = Path(tempfile.mkdtemp(prefix=f".{target.name}.{_OWNER}.", suffix=".tmp",
                                                          dir=target.parent))
                with _named_as(target, aside[target]):
                    os.replace(target, aside[target] / target.name)
        yield
    except BaseException:
        for target in new:
            _remove(target)
        for target, folder in aside.items():
            if not os.path.lexists(folder / target.name):   # (stopped before it was moved: the target is the old)
                shutil.rmtree(folder, ignore_errors=True)
                continue
            _remove(target)
            with contextlib.suppress(OSError):   # (if it cannot be moved back, it stays in its hidden folder)
                os.replace(folder / target.name, target)
                shutil.rmtree(folder, ignore_errors=True)
        for folder in sorted(made, key=lambda path: len(path.parts), reverse=True):   # deepest first
            with contextlib.suppress(OSError):   # (not empty: something else is in it now, which stays)
                folder.rmdir()
        raise
    for folder in aside.values():
        shutil.rmtree(folder, ignore_errors=True)


def _missing_folders(target: Path) -> list[Path]:
    """The folders above ``target`` that do not exist (yet)."""
    missing = []
    for above in target.parents:
        if os.path.lexists(above):
            break
        missing.append(above)
    return missing


def _remove(path: Path) -> None:
    """Remove a file, a link or a folder with what it holds; nothing if there is none."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _remove_orphans(target: Path) -> None:
    """Remove temporary folders of earlier writes of ``target`` whose process (on this host) no longer runs."""
    pattern = re.compile(re.escape(f".{target.name}.{_HOST}-") + r"(\d+)\.[^.]+\.tmp")
    _remove_dead(target.parent.glob(f".{glob.escape(target.name)}.{glob.escape(_HOST)}-*.tmp"), pattern)


def _remove_dead(entries, pattern: re.Pattern) -> None:
    """Remove the folders among ``entries`` whose name holds (``pattern``'s group 1) a process of this host that is
    gone."""
    for entry in entries:
        found = pattern.fullmatch(entry.name)
        if found is None or int(found.group(1)) == os.getpid():
            continue
        try:
            os.kill(int(found.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except OSError:  # alive under another user (EPERM): not ours to remove
            pass


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[str]:
    """A temporary folder in the system's temporary directory, removed on exit, named <prefix><host>-<pid>.<random>
    so that one left by a process killed outright (SIGKILL skips every cleanup: the --nproc parent's rank folder, the
    distributed trainer's copy of the training data) is removed by the next call with the same prefix once that
    process is gone on this host. Yields its path as a string, as ``tempfile.TemporaryDirectory``."""
    # "." after the pid, as in atomic_path's names: a host name may hold "-" and digits ("node-1" against
    # "node-1-2"), a pid followed by "." cannot be read as part of another host's name.
    pattern = re.compile(re.escape(f"{prefix}{_HOST}-") + r"(\d+)\.[a-z0-9_]+")
    _remove_dead(Path(tempfile.gettempdir()).glob(f"{glob.escape(prefix + _HOST)}-*"), pattern)
    with tempfile.TemporaryDirectory(prefix=f"{prefix}{_OWNER}.") as folder:
        yield folder


@contextlib.contextmanager
def _named_as(target: Path, tmp: Optional[Path] = None) -> Iterator[None]:
    """Re-raise an OSError about the temporary folder (or about creating one) as one about ``target``."""
    try:
        yield
    except OSError as err:
        name = str(err.filename or "")
        temporary = Path(name).name.startswith(f".{target.name}.") or (tmp is not None and name.startswith(str(tmp)))
        if err.filename is None or temporary:
            raise OSError(err.errno, err.strerror, str(target)) from err
        raise


def save_safetensors(tensors: dict, path: str | os.PathLike, metadata: Optional[dict] = None) -> None:
    """``safetensors.torch.save_file``, with two of its habits undone: its I/O failures are a SafetensorError ("I/O
    error: No space left on device (os error 28)"), not an OSError, so a full disk was reported as an internal error
    instead of the path that could not be written; and it leaves the file mode 0600 whatever the umask, so a model
    folder shared with others had weights they could not read. Here the file gets the mode any new file gets."""
    from safetensors import SafetensorError
    from safetensors.torch import save_file

    path = Path(path)
    try:
        path.touch()  # created with the umask's mode (thread-safe, unlike reading the umask with os.umask)
        mode = stat.S_IMODE(path.stat().st_mode)
        save_file(tensors, str(path), metadata=metadata)
        os.chmod(path, mode)
    except SafetensorError as err:
        found = re.search(r"os error (\d+)", str(err))
        if found is None:
            raise
        code = int(found.group(1))
        raise OSError(code, os.strerror(code), str(path)) from err

