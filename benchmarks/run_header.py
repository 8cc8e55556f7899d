"""The header that bench_report_intervals.py and bench_cpu_validation.py print and write beside their tables: date,
machine, load average, versions and the checkout. These scripts turn figures quoted in commit messages into files,
so the header must say what ran: the "now" side is the working tree, hence a changed src/ is named."""
from __future__ import annotations

import datetime as dt
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def uptime() -> str:
    """`uptime`'s line: other jobs share this 2-core box, and the load average says how much they took."""
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def stalled() -> float:
    """Seconds that some task of this machine waited for a CPU (/proc/pressure/cpu "some", since boot; 0 without
    PSI): its growth over a timed run says whether other jobs took the cores meanwhile."""
    try:
        with open("/proc/pressure/cpu") as f:
            return int(f.readline().rsplit("total=", 1)[1]) / 1e6
    except (OSError, IndexError, ValueError):
        return 0.0


def _cpu() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            return next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        return platform.processor() or platform.machine()


def _git(*args: str) -> str:
    # --no-optional-locks: a status that refreshed the index would change git state
    done = subprocess.run(["git", "--no-optional-locks", *args], cwd=ROOT, capture_output=True, text=True)
    return done.stdout.strip("\n") if done.returncode == 0 else "?"


def header(title: str, versions: dict[str, str]) -> list[str]:
    """Markdown lines: the title, the command as run, date, machine, versions, commit, load."""
    changed = [line[3:] for line in _git("status", "--porcelain", "--", "src").splitlines()]
    tree = "src/ as committed" if not changed else "src/ not as committed: " + ", ".join(changed)
    script = Path(sys.argv[0]).resolve()
    script = script.relative_to(ROOT) if script.is_relative_to(ROOT) else script
    command = " ".join(["PYTHONPATH=src", ".venv/bin/python", script.as_posix(), *sys.argv[1:]])
    return [f"# {title}", "",
            f"- command: `{command}`",
            f"- date: {dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M UTC}",
            f"- machine: {_cpu()}, {os.cpu_count()} CPUs, {platform.platform()}",
            "- versions: Python " + platform.python_version() + "".join(f", {k} {v}" for k, v in versions.items()),
            f"- checkout: {_git('rev-parse', '--short', 'HEAD')} ({tree})",
            f"- uptime at start: `{uptime()}`", ""]


def write_results(out, head: list[str], notes: list[str], table: list[str], payload: dict) -> None:
    """Print ``notes`` and ``table``; with ``out`` (a Path, or None), also write results.md (``head``, the notes,
    the table) and results.json (``payload`` with the run's arguments as text) into it."""
    print("\n" + "\n".join(notes + [""] + table))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.md").write_text("\n".join(head + notes + [""] + table) + "\n")
        (out / "results.json").write_text(json.dumps(payload, indent=1) + "\n")
