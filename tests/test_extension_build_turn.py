"""``cuda_extension.build_turn``: builds of one extension take turns under an OS file lock, and the lock file that
torch leaves behind when a build is killed is cleared instead of waited on forever (a device run hung on one,
benchmarks/results/train_tests_1202/). Runs on the CPU machine: only files and processes are involved."""
from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

import pytest

from mscred.ops import cuda_extension

fcntl = pytest.importorskip("fcntl")


def test_stale_torch_lock_is_removed_with_a_warning(tmp_path):
    (tmp_path / "lock").write_text("")  # what a killed torch build leaves
    with pytest.warns(RuntimeWarning, match="interrupted build"):
        with cuda_extension.build_turn(tmp_path):
            assert not (tmp_path / "lock").exists()


def test_no_warning_without_a_stale_lock_and_the_directory_is_made(tmp_path, recwarn):
    target = tmp_path / "new" / "ext"
    with cuda_extension.build_turn(target):
        assert target.is_dir()
    assert not [w for w in recwarn if "interrupted" in str(w.message)]


def test_turn_is_held_against_other_processes_and_released_after(tmp_path):
    """While a process holds its turn, another cannot take it (non-blocking flock fails); after, it can."""
    probe = textwrap.dedent(f"""
        import fcntl, sys
        with open({str(tmp_path / 'mscred_build.flock')!r}, 'a') as h:
            try:
                fcntl.flock(h, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                sys.exit(3)
    """)
    with cuda_extension.build_turn(tmp_path):
        assert subprocess.run([sys.executable, "-c", probe]).returncode == 3
    assert subprocess.run([sys.executable, "-c", probe]).returncode == 0


def test_turn_of_a_killed_process_is_released(tmp_path):
    """A holder that dies without releasing (SIGKILL) leaves no turn held: the OS drops its flock."""
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(cuda_extension.__file__.rsplit('/mscred/', 1)[0])!r})
        from mscred.ops import cuda_extension
        with cuda_extension.build_turn({str(tmp_path)!r}):
            print("held", flush=True)
            time.sleep(60)
    """)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait()
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the killed holder's turn is still held"))
    signal.alarm(30)  # fail, not hang, if the dead holder's lock stayed
    try:
        with cuda_extension.build_turn(tmp_path):
            pass
    finally:
        signal.alarm(0)
