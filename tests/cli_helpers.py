"""What the CLI tests share: a small sensor table and an in-process run of the CLI that captures its output."""
from __future__ import annotations

import time

import numpy as np
import pandas as pd

from mscred.cli.main import main


# For a CLI run compared with an in-process CPU reference to ~1e-12: on a CUDA machine `--device auto` scores on the
# GPU, whose float32 kernels agree with the CPU's to ~1e-4 only (found on an H100, results/gpu_suite_1205_h100/).
ON_THE_CPU = ("--device", "cpu")


def sensor_frame(rows: int, n: int, seed: int = 0, names=None) -> pd.DataFrame:
    """(rows, 1 + n): a ``timestamp`` column and n noisy sines (s0, s1, ... unless ``names``)."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)[:, None]
    values = np.sin(t / (10 + np.arange(n))) + 0.1 * rng.standard_normal((rows, n))
    frame = pd.DataFrame(values, columns=names or [f"s{i}" for i in range(n)])
    frame.insert(0, "timestamp", np.arange(rows))
    return frame


def tiny_model(out, frame: pd.DataFrame):
    """``out`` (returned): a tiny trained model directory (small channels, 1 epoch, CPU) of ``frame``, built through
    the Python API -- the model the CLI tests score with."""
    from mscred.detector import MSCRED

    MSCRED(epochs=1, channels=(4, 8, 8, 8), device="cpu", progress=False).fit(frame).save(out)
    return out


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of ``mscred ARGV`` run in this process."""
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def bad_input(capsys, *argv, names=()) -> str:
    """``mscred ARGV`` refused as bad input: exit 2, one ``mscred: error:`` line holding every fragment of ``names``,
    no traceback, nothing on stdout; returns the line."""
    code, out, err = run_cli(capsys, *argv)
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("mscred: error:"), err
    assert "Traceback" not in err and out == ""
    for fragment in names:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def evaluate_bad(capsys, *argv, names=()) -> str:
    """``bad_input`` of ``mscred evaluate ARGV``."""
    return bad_input(capsys, "evaluate", *argv, names=names)


def evaluate_json(capsys, *argv) -> tuple[dict, str]:
    """(the JSON object, stderr) of ``mscred evaluate ARGV --json``, which must succeed."""
    import json

    code, out, err = run_cli(capsys, "evaluate", *argv, "--json")
    assert code == 0, err
    return json.loads(out), err


def read_scores(path) -> pd.DataFrame:
    """A SCORES file, its text columns as text (a file without anomalies reads them as empty floats)."""
    from mscred.data.io import float_read_options

    return pd.read_csv(path, dtype={"root_causes": str, "scales": str}, keep_default_na=False, **float_read_options())


def scored_as_one_feed(capsys, model, frame: pd.DataFrame, cut: int, folder) -> pd.DataFrame:
    """``detect`` of ``frame`` written as one table, as a folder of two files cut at row ``cut``, and as its second
    part after ``--context`` of its first, into ``folder``: the folder's SCORES equal to the table's, the context's to
    the table's rows from ``cut`` (a feed and a context read as one table); returns the table's SCORES."""
    frame.to_csv(folder / "today.csv", index=False)
    (folder / "feed").mkdir()
    frame.iloc[:cut].to_csv(folder / "feed" / "a.csv", index=False)
    frame.iloc[cut:].to_csv(folder / "feed" / "b.csv", index=False)
    runs = {"today": [folder / "today.csv"], "feed": [folder / "feed"],
            "context": [folder / "feed" / "b.csv", "--context", folder / "feed" / "a.csv"]}
    got = {}
    for name, args in runs.items():
        code, _, err = run_cli(capsys, "detect", model, *args, "--out", folder / f"{name}_s.csv", *ON_THE_CPU)
        assert code == 0, err
        got[name] = read_scores(folder / f"{name}_s.csv")
    pd.testing.assert_frame_equal(got["feed"], got["today"])
    pd.testing.assert_frame_equal(got["context"], got["today"].iloc[cut:].reset_index(drop=True))
    return got["today"]


def replace_waits(monkeypatch, module, *actions, stop: type[BaseException] = KeyboardInterrupt) -> None:
    """``module.time`` (a watch command's) replaced so that each ``time.sleep`` runs the next of ``actions``
    (appending to a watched file, say) and, once they are done, raises ``stop`` (Ctrl-C; or the SIGTERM the CLI
    turns into ``cli.main.Terminated``); ``monotonic`` stays the real one. The chunks a watch scores are then
    known, without threads."""
    pending = list(actions)

    class Waits:
        monotonic = staticmethod(time.monotonic)

        @staticmethod
        def sleep(seconds):
            if not pending:
                raise stop
            pending.pop(0)()

    monkeypatch.setattr(module, "time", Waits)
