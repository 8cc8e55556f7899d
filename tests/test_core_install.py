"""The core install has no Triton (it is a dev / GPU extra; `make demo` installs without it): every mscred module must
import with ``import triton`` failing, and the fused ops then fall back to PyTorch. A module-level import of a
name defined only under ``if triton is not None`` broke `make demo` once (2026-12-01, ops/triton/bits.py) while
every test passed with Triton installed."""
from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.modules["triton"] = None  # `import triton` now raises ImportError, as where it is not installed
import importlib, pkgutil, mscred
failed = []
for module in pkgutil.walk_packages(mscred.__path__, "mscred."):
    if module.name == "mscred.__main__":  # runs the CLI
        continue
    try:
        importlib.import_module(module.name)
    except Exception as err:
        failed.append(f"{module.name}: {err!r}")
print("\\n".join(failed))
from mscred.ops.triton.runtime import triton
assert triton is None
"""


def test_every_module_imports_without_triton():
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "", f"modules that fail to import without Triton:\n{done.stdout}"
