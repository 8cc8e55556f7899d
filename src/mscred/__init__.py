"""mscred: MSCRED multivariate time-series anomaly detection, fast on NVIDIA GPUs.

Importing never fails for lack of a GPU, a compiler or Triton; the heavy parts load on first use.
"""
from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "MSCRED": ("mscred.detector", "MSCRED"),
    "MSCREDConfig": ("mscred.config", "MSCREDConfig"),
    "signature_matrices": ("mscred.signature", "signature_matrices"),
    "generate_synthetic": ("mscred.data.synthetic", "generate_synthetic"),
    "InputError": ("mscred.errors", "InputError"),
}

__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    # Lazy attributes keep `import mscred` (and `mscred --help`) fast: torch loads only when needed.
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'mscred' has no attribute {name!r}")
