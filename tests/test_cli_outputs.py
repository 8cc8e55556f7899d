"""Output paths: a model or report folder replaces only a previous output of its kind, never a folder of the
user's files (those were once moved aside and deleted: ``train --out`` pointed at the data's own folder lost the
data); bad output names and file-system errors get exit 2 and one line naming the path the user gave, not the
temporary path of the atomic write (``mscred.atomic``)."""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from cli_helpers import run_cli, sensor_frame
from mscred.atomic import atomic_path, check_replaceable_dir
from mscred.errors import InputError


def _one_error_line(capsys, *argv) -> str:
    code, _, err = run_cli(capsys, *argv)
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("mscred: error:"), err
    return lines[0]


def _user_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "plant"
    folder.mkdir()
    sensor_frame(200, 5).to_csv(folder / "good.csv", index=False)
    (folder / "notes.txt").write_text("keep me\n")
    return folder


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_train_refuses_a_folder_of_other_files_and_keeps_them(tmp_path, capsys):
    folder = _user_folder(tmp_path)
    line = _one_error_line(capsys, "train", folder / "good.csv", "--out", folder, "--epochs", "1", "--device", "cpu",
                           "--quiet")
    assert str(folder) in line and "good.csv" in line and "notes.txt" in line
    assert _left(folder) == ["good.csv", "notes.txt"] and (folder / "notes.txt").read_text() == "keep me\n"
    assert _left(tmp_path) == ["plant"]   # no checkpoint folder, no temporary folder


def test_train_refuses_the_current_folder_and_empty_names(tmp_path, capsys, monkeypatch):
    folder = tmp_path / "run"
    folder.mkdir()
    sensor_frame(200, 5).to_csv(tmp_path / "good.csv", index=False)
    monkeypatch.chdir(folder)
    assert "current folder" in _one_error_line(capsys, "train", tmp_path / "good.csv", "--out", "../run",
                                               "--epochs", "1", "--quiet")
    for name in ("", "."):
        assert "name" in _one_error_line(capsys, "train", tmp_path / "good.csv", "--out", name, "--epochs", "1",
                                         "--quiet")
    assert _left(folder) == [] and _left(tmp_path) == ["good.csv", "run"]


def test_evaluate_report_refuses_a_folder_of_other_files(tmp_path, capsys):
    folder = _user_folder(tmp_path)
    line = _one_error_line(capsys, "evaluate", folder / "good.csv", "--labels", folder / "good.csv", "--report",
                           folder)
    assert str(folder) in line and "report" in line
    assert _left(folder) == ["good.csv", "notes.txt"]


def test_detect_out_without_a_name(tmp_path, capsys):
    assert "name" in _one_error_line(capsys, "detect", tmp_path / "missing_model", tmp_path / "x.csv", "--out", "")


def test_save_replaces_a_previous_model_only(tmp_path):
    from mscred.detector import MODEL_FILES
    old = tmp_path / "model"
    old.mkdir()
    for name in MODEL_FILES:
        (old / name).write_text("previous model")
    with atomic_path(old, owned=MODEL_FILES, what="an mscred model") as tmp:
        tmp.mkdir()
        for name in MODEL_FILES:
            (tmp / name).write_text("new model")
    assert {(old / n).read_text() for n in MODEL_FILES} == {"new model"}
    (old / "report.html").write_text("mine")
    with pytest.raises(InputError, match="report.html"):
        with atomic_path(old, owned=MODEL_FILES, what="an mscred model") as tmp:
            tmp.mkdir()
    assert _left(old) == sorted([*MODEL_FILES, "report.html"]) and _left(tmp_path) == ["model"]


def test_a_file_output_never_replaces_a_folder(tmp_path):
    (tmp_path / "scores.csv").mkdir()
    with pytest.raises(InputError, match="is a folder"):
        with atomic_path(tmp_path / "scores.csv") as tmp:
            tmp.write_text("x")
    assert _left(tmp_path) == ["scores.csv"]


def test_file_system_errors_name_the_users_path(tmp_path, monkeypatch):
    """An unwritable folder fails in mkdtemp or inside the temporary folder: the error names the target."""
    target = tmp_path / "out" / "scores.csv"

    def refuse(prefix, suffix, dir):
        raise PermissionError(errno.EACCES, "Permission denied", os.path.join(dir, prefix + "x1y2" + suffix))
    monkeypatch.setattr(tempfile, "mkdtemp", refuse)
    with pytest.raises(PermissionError) as caught:
        with atomic_path(target):
            pass
    assert caught.value.filename == str(target)
    monkeypatch.undo()
    with pytest.raises(OSError) as caught:
        with atomic_path(target) as tmp:
            raise OSError(errno.EROFS, "Read-only file system", str(tmp))
    assert caught.value.filename == str(target) and _left(target.parent) == []


def test_check_replaceable_dir_accepts_new_and_owned_folders(tmp_path):
    check_replaceable_dir(tmp_path / "new", ("a",), "x")
    (tmp_path / "own").mkdir()
    (tmp_path / "own" / "a").write_text("")
    check_replaceable_dir(tmp_path / "own", ("a",), "x")
    (tmp_path / "file").write_text("")
    with pytest.raises(InputError, match="not a folder"):
        check_replaceable_dir(tmp_path / "file", ("a",), "x")


def test_a_folder_output_never_replaces_a_file(tmp_path):
    (tmp_path / "model").write_text("not a model")
    with pytest.raises(InputError, match="not a folder"):
        with atomic_path(tmp_path / "model", owned=("config.json",), what="an mscred model") as tmp:
            tmp.mkdir()
    assert (tmp_path / "model").read_text() == "not a model" and _left(tmp_path) == ["model"]


def test_saved_weights_are_as_readable_as_the_config(tmp_path):
    """safetensors writes its file 0600 whatever the umask; the model folder's files share one mode."""
    import numpy as np

    from mscred import MSCRED
    old = os.umask(0o022)
    try:
        model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False)
        model.fit(np.random.default_rng(0).random((300, 5))).save(tmp_path / "m")
    finally:
        os.umask(old)
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "m").iterdir()}
    assert modes == {"config.json": 0o644, "model.safetensors": 0o644}


def test_a_full_disk_names_the_model_path(tmp_path, monkeypatch):
    """safetensors reports a full disk as a SafetensorError (not an OSError): it was an internal error, exit 1."""
    import numpy as np
    import safetensors.torch
    from safetensors import SafetensorError

    from mscred import MSCRED
    model = MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False)
    model.fit(np.random.default_rng(0).random((300, 5)))

    def full(*args, **kwargs):
        raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
    monkeypatch.setattr(safetensors.torch, "save_file", full)
    with pytest.raises(OSError) as caught:
        model.save(tmp_path / "m")
    assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(tmp_path / "m")
    assert _left(tmp_path) == []


def test_sigterm_unwinds_like_ctrl_c(tmp_path):
    """SIGTERM (kill, timeout, a supervisor) during training: exit 143 with one line, and nothing left beside
    --out: no model, no temporary folder (the default action ended the process on the spot)."""
    import signal
    import subprocess
    import sys

    sensor_frame(400, 5).to_csv(tmp_path / "d.csv", index=False)
    proc = subprocess.Popen([sys.executable, "-m", "mscred", "train", str(tmp_path / "d.csv"), "--out",
                             str(tmp_path / "m"), "--epochs", "500", "--device", "cpu"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:  # the progress lines: the first epoch has ended, a checkpoint may be in flight
        if line.startswith("epoch 1/"):
            break
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "mscred: terminated", err
    assert "Traceback" not in err
    assert not (tmp_path / "m").exists()
    if any((tmp_path / "m.checkpoints").glob("*.safetensors")):  # an epoch's checkpoint was written: say so
        assert "with --resume continues" in err, err
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def _gone_pid_and_host() -> tuple[str, str]:
    """The pid of a process that has exited (a short child run to its end), and this host as atomic.py names it."""
    import socket
    import subprocess
    import sys

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True).stdout.strip()
    return dead, socket.gethostname().replace(".", "-")


def test_a_killed_writers_temporary_folder_is_removed_by_the_next_write(tmp_path):
    """SIGKILL during a save leaves .<target>.<host>-<pid>.<random>.tmp; the next write of that target removes it
    once that process is gone, and leaves those of live processes and of other hosts alone."""
    dead, host = _gone_pid_and_host()
    orphan = tmp_path / f".m.{host}-{dead}.abc123xy.tmp"
    alive = tmp_path / f".m.{host}-{os.getppid()}.abc123xy.tmp"
    elsewhere = tmp_path / f".m.otherhost-{dead}.abc123xy.tmp"
    for folder in (orphan, alive, elsewhere):
        (folder / "m").mkdir(parents=True)
    with atomic_path(tmp_path / "m") as tmp:
        tmp.write_text("new")
    assert (tmp_path / "m").read_text() == "new"
    assert not orphan.exists() and alive.exists() and elsewhere.exists()


def test_a_killed_processes_scratch_folder_is_removed_by_the_next(tmp_path, monkeypatch):
    """atomic.scratch_dir (the --nproc parent's rank folder, the distributed trainer's copy of the data): a folder
    left by a process killed outright is removed by the next scratch_dir of the same prefix once that process is
    gone; those of live processes, other hosts and other prefixes stay; its own is removed on exit."""
    import tempfile

    from mscred.atomic import scratch_dir

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead, host = _gone_pid_and_host()
    orphan = tmp_path / f"mscred-ranks-{host}-{dead}.x1y2"
    alive = tmp_path / f"mscred-ranks-{host}-{os.getppid()}.x1y2"
    elsewhere = tmp_path / f"mscred-ranks-otherhost-{dead}.x1y2"
    other_prefix = tmp_path / f"mscred-ddp-{host}-{dead}.x1y2"
    # a host whose name is this one's plus "-<digits>": its live folder is not this host's pid "<digits>"
    longer_host = tmp_path / f"mscred-ranks-{host}-{dead}-{os.getppid()}.x1y2"
    for folder in (orphan, alive, elsewhere, other_prefix, longer_host):
        (folder / "rank0.json").parent.mkdir(parents=True)
    with scratch_dir("mscred-ranks-") as folder:
        assert Path(folder).is_dir() and Path(folder).name.startswith(f"mscred-ranks-{host}-{os.getpid()}.")
    assert not Path(folder).exists()
    assert not orphan.exists() and alive.exists() and elsewhere.exists() and other_prefix.exists()
    assert longer_host.exists()
