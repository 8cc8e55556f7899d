"""The README's Python example runs as written, at a smaller size: every call in it exists, takes the arguments shown
and returns what its comment says. Only the sizes are changed (fewer sensors and rows, a tiny network, one epoch on
the CPU), each substitution checked to have happened, so that an edit of the example is tested as it reads."""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

README = Path(__file__).resolve().parents[1] / "README.md"

# (text in the README, what the test runs instead, how many times it must be there)
SMALLER = [
    ("generate_synthetic(n_sensors=30, length=20_000, seed=0)", "generate_synthetic(n_sensors=8, length=12_000, seed=0)",
     1),
    ("MSCRED(epochs=3)", 'MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False)', 2),
    # (loaded on the CPU too: on a GPU machine it would load onto the GPU, whose scores differ in float32's last
    # digits from the CPU model's it is compared with)
    ('MSCRED.load("model/")', 'MSCRED.load("model/", device="cpu")', 1),
]


def _python_example() -> str:
    blocks = re.findall(r"^```python\n(.*?)^```", README.read_text(), flags=re.S | re.M)
    assert blocks, "the README has no ```python block"
    code = blocks[0]
    for old, new, count in SMALLER:
        assert code.count(old) == count, (old, code.count(old))
        code = code.replace(old, new)
    return code


def test_the_readme_python_example_runs(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)   # (it saves "model/" where it runs)
    namespace: dict = {}
    exec(compile(_python_example(), str(README) + " (python example)", "exec"), namespace)
    data, model = namespace["data"], namespace["model"]
    rows = len(data.test)
    assert namespace["scores"].shape == (rows,) and np.isfinite(namespace["scores"]).all()
    assert set(np.unique(namespace["labels"])) <= {0, 1}
    found = namespace["found"]
    assert isinstance(found, pd.DataFrame) and len(found) == rows
    assert {"score", "is_anomaly", "root_causes", "scales"} <= set(found.columns)
    assert isinstance(namespace["events"], pd.DataFrame)
    assert hasattr(namespace["monitor"], "update")
    same = namespace["same"]   # saved and loaded: the same threshold and scores
    assert same.threshold_ == model.threshold_
    np.testing.assert_allclose(same.decision_function(data.test), model.decision_function(data.test), rtol=1e-6)
    assert (tmp_path / "model" / "config.json").is_file() and (tmp_path / "model" / "model.safetensors").is_file()
