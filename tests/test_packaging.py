"""The wheel must carry every non-Python source the package compiles at run time (the CUDA extensions build from
their .cu / .cuh / .cpp / .h files on first use, and `mscred sass` reads its templates): each such file under
src/mscred must match a package-data pattern of pyproject.toml (a pattern left out would fail only on an installed
copy, on a GPU machine)."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SUFFIXES = {".cu", ".cuh", ".cpp", ".h"}


def test_every_compiled_source_is_package_data():
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["mscred"]
    package = ROOT / "src" / "mscred"
    sources = [p.relative_to(package) for p in package.rglob("*") if p.suffix in SUFFIXES]
    assert any(p.parts[:2] == ("ops", "resident_lstm") for p in sources)
    missing = [str(p) for p in sources if not any(p.match(pattern) for pattern in patterns)]
    assert missing == [], f"not in pyproject's package-data: {missing}"
