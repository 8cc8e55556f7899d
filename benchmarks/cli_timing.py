"""What the benchmarks of whole CLI commands share: the command line of `mscred` in this Python, and one command
timed as a fresh process, as a user's script runs it (two threads, as on the 2-core machine the figures come from)."""
import os
import subprocess
import sys
import time

MSCRED = [sys.executable, "-m", "mscred"]


def run(argv) -> float:
    """Seconds `argv` took as a fresh process (its output captured; a failure raises)."""
    start = time.perf_counter()
    subprocess.run(argv, check=True, capture_output=True, env={**os.environ, "OMP_NUM_THREADS": "2"})
    return time.perf_counter() - start
