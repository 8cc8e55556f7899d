"""`mscred demo`'s report by default: written when matplotlib is installed, else skipped with one note line (a plain
install has no matplotlib, and the demo is a new user's first command); an explicit --report without it is refused
before any work."""
from __future__ import annotations

import sys

import pytest

import mscred.cli.demo as demo_cli
from cli_helpers import run_cli


@pytest.fixture
def tiny_demo(monkeypatch):
    """The CLI's demo at test_demo.py's tiny size (8 sensors, 3000 steps, small channels, one epoch)."""
    real = demo_cli.run_demo

    def run_tiny(out, **kwargs):
        kwargs.update(n_sensors=8, length=3000, epochs=1, channels=(8, 16, 16, 16), device="cpu")
        return real(out, **kwargs)

    monkeypatch.setattr(demo_cli, "run_demo", run_tiny)


def _no_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # `import matplotlib` raises ImportError


def test_demo_without_matplotlib_skips_the_report_with_a_note(tmp_path, capsys, monkeypatch, tiny_demo):
    _no_matplotlib(monkeypatch)
    code, out, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "d")
    assert code == 0, err
    notes = [line for line in err.splitlines() if line.startswith("note:")]
    assert len(notes) == 1 and "matplotlib" in notes[0] and "mscred[report]" in notes[0], err
    assert "Traceback" not in err and "error" not in err
    assert (tmp_path / "d" / "metrics.json").is_file() and not (tmp_path / "d" / "report").exists()
    assert "report/index.html" not in out


def test_demo_with_matplotlib_writes_the_report_by_default(tmp_path, capsys, tiny_demo):
    pytest.importorskip("matplotlib")
    code, out, err = run_cli(capsys, "demo", "--quiet", "--out", tmp_path / "d")
    assert code == 0, err
    assert "note:" not in err and (tmp_path / "d" / "report" / "index.html").stat().st_size > 0
    assert "report/index.html" in out


def test_explicit_report_without_matplotlib_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    _no_matplotlib(monkeypatch)
    monkeypatch.setattr(demo_cli, "run_demo", lambda *a, **k: pytest.fail("the demo ran"))
    code, _, err = run_cli(capsys, "demo", "--report", "--out", tmp_path / "d")
    lines = err.splitlines()
    assert code == 2 and len(lines) == 1, err
    assert lines[0].startswith("mscred: error:") and "mscred[report]" in lines[0] and "--no-report" in lines[0]
    assert not (tmp_path / "d").exists()


def test_no_report_asks_nothing_of_matplotlib(tmp_path, capsys, monkeypatch, tiny_demo):
    _no_matplotlib(monkeypatch)
    code, _, err = run_cli(capsys, "demo", "--quiet", "--no-report", "--out", tmp_path / "d")
    assert code == 0, err
    assert "note:" not in err and not (tmp_path / "d" / "report").exists()
