"""`mscred demo`: generate -> train -> detect -> evaluate on the paper's synthetic data, and a short table.

Everything the demo writes lands in ``--out`` (default ``demo_out``): ``data/`` (train.csv, test.csv,
anomalies.csv), ``model/`` (config.json + model.safetensors), ``scores.csv``, ``metrics.json`` and ``report/``
(``mscred evaluate``'s HTML report; by default only when matplotlib is installed). All or nothing: a run that
fails leaves every one of them as it was (those it created are removed, those of an earlier run are put back).
With ``--dataset NAME`` the data come from :func:`mscred.data.datasets.load_dataset` instead of the generator
(``mscred demo --dataset tep:1``: the Tennessee Eastman benchmark shipped in the ``bibmon`` wheel, ``pip install
'mscred[datasets]'``). The figures are ``mscred evaluate``'s (:func:`mscred.evaluation.evaluate_files`), so the demo
and the evaluate command never disagree.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Optional

import click

from mscred.cli.params import COUNT, NamedPath, SEED
from mscred.detect import SCORE_METHODS

# The demo trains 3 epochs: enough for the z_sensor score to find the synthetic anomalies, and the whole run stays
# under 10 minutes on 2 CPU cores (longer training did not detect better there: README, "Detection quality").
# --quick: half the series and 2 epochs, under 2 minutes.
FULL = {"length": 20_000, "epochs": 3}
QUICK = {"length": 10_000, "epochs": 2}


def run_demo(out: str | Path, quick: bool = False, dataset: Optional[str] = None, data_root=None, seed: int = 0,
             n_sensors: int = 30, length: Optional[int] = None, progress: bool = True, report: bool = True,
             **overrides) -> dict:
    """Run the whole demo and return its figures (also written to ``out/metrics.json``).

    ``length``/``n_sensors`` size the synthetic data (``--quick`` halves the length); ``overrides`` go to
    :class:`mscred.MSCRED` (e.g. ``epochs=1``, ``theta=0.005``). ``report`` writes ``out/report/index.html``.
    """
    from mscred.atomic import all_or_nothing, atomic_path
    from mscred.detector import MSCRED
    from mscred.evaluation import evaluate_files

    out = Path(out)
    _check_outputs(out, report)
    times: dict[str, float] = {}
    start = time.perf_counter()
    if dataset is not None:
        from mscred.data.datasets import load_dataset

        # (read before the earlier outputs are moved aside: --data-root may be an earlier run's out/data)
        data = load_dataset(dataset, root=data_root)
    # After the checks, which write nothing: what exists now is the user's or an earlier run's. All or nothing: an
    # earlier run's outputs are moved aside until this run has written all of its own, and put back if it fails (a
    # dataset too short to train, found only after its data were written; an error at detection or evaluation;
    # Ctrl-C). A failed demo left out/data/ behind, which read as a run's data, or a new model beside older scores.
    with all_or_nothing(out / file for file in (*_OUTPUT_FILES, "model", *(("report",) if report else ()))):
        if dataset is None:
            from mscred.data.synthetic import write_synthetic

            length = length or (QUICK if quick else FULL)["length"]
            data = write_synthetic(out / "data", n_sensors=n_sensors, length=length, seed=seed)
            train_df, test_df, name = data.train, data.test, "synthetic (paper)"
        else:
            train_df, test_df, name = data.train, data.test, data.name
            for file, frame in (("train.csv", train_df), ("test.csv", test_df),
                                ("anomalies.csv", getattr(data, "anomalies", None))):
                if frame is not None:
                    with atomic_path(out / "data" / file) as tmp:
                        frame.to_csv(tmp, index=False)
        times["data_s"] = time.perf_counter() - start

        settings = dict(overrides)
        settings.setdefault("epochs", (QUICK if quick else FULL)["epochs"])
        settings.setdefault("seed", seed)
        settings.setdefault("progress", progress)
        model = MSCRED(**settings)
        tick = time.perf_counter()
        model.fit(train_df)
        model.save(out / "model")
        times["train_s"] = time.perf_counter() - tick

        # The steps after training take tens of seconds on a CPU: say what runs (on stderr, as the epochs).
        say = (lambda text: click.echo(text, err=True)) if progress else (lambda text: None)
        say(f"scoring the test data ({len(test_df)} rows) ...")
        tick = time.perf_counter()
        frame = model.detect(test_df, sensor_scores=True)   # (the report's heat map of every sensor's score)
        with atomic_path(out / "scores.csv") as tmp:
            frame.to_csv(tmp, index=False)
        times["detect_s"] = time.perf_counter() - tick

        say("evaluating" + (" and writing the report ..." if report else " ..."))
        tick = time.perf_counter()
        anomalies = out / "data" / "anomalies.csv"
        figures = evaluate_files(out / "scores.csv", out / "data" / "test.csv",
                                 anomalies=anomalies if anomalies.exists() else None,
                                 report_dir=(out / "report") if report else None, model_dir=out / "model",
                                 data_path=out / "data" / "test.csv", seed=seed)
        times["evaluate_s"] = time.perf_counter() - tick
        times["total_s"] = time.perf_counter() - start
        result = {"dataset": name, "quick": quick, "epochs": len(model.history_),
                  "theta": model.theta_ or None, "threshold": model.threshold_,
                  "score": model.config_.score.method, "threshold_rule": model.config_.score.threshold,
                  **figures, **times}
        with atomic_path(out / "metrics.json") as tmp:
            tmp.write_text(json.dumps(result, indent=2) + "\n")
        return result


# The files run_demo writes under --out; besides them the folders model/ and report/, each written whole (atomically).
_OUTPUT_FILES = ("data/train.csv", "data/test.csv", "data/anomalies.csv", "scores.csv", "metrics.json")


def _check_outputs(out: Path, report: bool) -> None:
    """Before the data and the training: every place the demo writes can take its output (the model and report
    folders hold nothing of the user's, no folder where a file goes), so that a refusal costs nothing."""
    from mscred.atomic import check_replaceable_dir
    from mscred.detector import MODEL_FILES
    from mscred.errors import InputError

    if out.exists() and not out.is_dir():
        raise InputError(f"{out}: exists and is not a folder; the demo writes a folder there")
    check_replaceable_dir(out / "model", MODEL_FILES, "an mscred model")
    if report:
        from mscred.report import REPORT_FILES

        check_replaceable_dir(out / "report", REPORT_FILES, "an mscred report")
    for file in _OUTPUT_FILES:
        if (out / file).is_dir():
            raise InputError(f"{out / file}: exists and is a folder; the demo writes a file there")


def render(result: dict) -> None:
    """The demo's short table: mscred beside a random baseline that flags as many rows."""
    from rich.console import Console
    from rich.table import Table

    base = result.get("random_baseline", {})
    table = Table(title=f"mscred demo — {result['dataset']}" + (" (quick)" if result["quick"] else ""))
    table.add_column("figure")
    table.add_column("mscred", justify="right")
    table.add_column("random", justify="right")

    def number(d: dict, key: str) -> str:
        return "-" if d.get(key) is None else f"{d[key]:.3f}"

    table.add_row("anomalies found", f"{result['events_found']}/{result['events_total']}",
                  f"{base.get('events_found', '-')}/{result['events_total']}")
    if "root_cause_recall_at_3" in result:
        table.add_row("root causes in top 3 (recall)", number(result, "root_cause_recall_at_3"),
                      number(base, "root_cause_recall_at_3"))
    for label, key in (("point precision", "precision"), ("point recall", "recall"), ("point F1", "f1"),
                       ("AUC-PR", "auc_pr")):
        if key in result:
            table.add_row(label, number(result, key), number(base, key))
    table.add_row("score / threshold rule", f"{result['score']} / {result['threshold_rule']}", "")
    theta = result["theta"]
    if theta:   # (only the count score has one: "theta -" under z_sensor meant nothing to a reader)
        how = "fixed " if len(set(theta)) == 1 else "from validation "
        table.add_row("theta", how + ", ".join(f"{t:.3g}" for t in theta), "")
    table.add_row("threshold", f"{result['threshold']:.4g}", "")
    table.add_row("epochs", str(result["epochs"]), "")
    table.add_row("time: data / train / detect / evaluate",
                  f"{result['data_s']:.1f} / {result['train_s']:.1f} / {result['detect_s']:.1f} / "
                  f"{result['evaluate_s']:.1f} s", "")
    table.add_row("time: total", f"{result['total_s']:.1f} s", "")
    Console().print(table)


@click.command()
@click.option("--quick", is_flag=True, help=f"Shorter series ({QUICK['length']} steps) and {QUICK['epochs']} "
                                           "epochs: under 2 minutes on 2 CPU cores.")
@click.option("--out", "out", type=NamedPath(file_okay=False), default="demo_out", show_default=True,
              help="Directory for the data, model, scores and metrics.")
@click.option("--dataset", type=str, default=None,
              help="A dataset of mscred.data.datasets instead of the synthetic data: tep[:FAULT] (Tennessee Eastman, "
                   "simulated plant, faults 1-21, from the bibmon wheel), daphnet (no labelled anomaly), "
                   "smd:MACHINE, smap:CHAN, msl:CHAN, table (with --data-root).")
@click.option("--data-root", type=NamedPath(exists=True), default=None,
              help="The dataset's folder or file (SMD, SMAP/MSL, table; tep/daphnet read the installed wheels).")
@click.option("--epochs", type=COUNT, default=None, help="Override the training epochs.")
@click.option("--theta", type=str, default=None,
              help="The count score's residual threshold: a number (the paper: 0.005) or 'auto'; implies --score "
                   "count unless --score says otherwise.")
@click.option("--score", "method", type=click.Choice(SCORE_METHODS), default=None,
              help="Window score [default: z_sensor].")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default=None,
              help="Where to train and score [default: auto, a GPU when there is one].")
@click.option("--seed", type=SEED, default=0, show_default=True)
@click.option("--report/--no-report", default=None,
              help="Write the HTML report (needs matplotlib: pip install 'mscred[report]') [default: when matplotlib "
                   "is installed].")
@click.option("--quiet", is_flag=True, help="No progress bar.")
def demo(quick, out, dataset, data_root, epochs, theta, method, device, seed, report, quiet) -> None:
    """Generate the paper's synthetic data, train, detect, evaluate, and print a short table.

    Scores with z_sensor by default; --theta 0.005 asks for the paper's (the count of residual entries above
    0.005, threshold 1.5 x max).
    """
    from mscred.cli.train import score_overrides

    overrides: dict[str, Any] = score_overrides(theta, method)
    if epochs is not None:
        overrides["epochs"] = epochs
    if device is not None:
        overrides["device"] = device
    if dataset is not None:
        _check_dataset(dataset)
    elif data_root is not None:
        # (it was ignored: the synthetic demo ran as if the user's dataset had been used)
        from mscred.errors import InputError

        raise InputError(f"--data-root {data_root}: given without --dataset; name the dataset in it, e.g. "
                         "--dataset smd:MACHINE, smap:CHAN, msl:CHAN or table")
    report = _report_wanted(report)
    result = run_demo(out, quick=quick, dataset=dataset, data_root=data_root, seed=seed, progress=not quiet,
                      report=report, **overrides)
    render(result)
    click.echo(f"wrote {Path(out)}/ (data, model, scores.csv, metrics.json"
               + (", report/index.html)" if report else ")"))


def _report_wanted(report: Optional[bool]) -> bool:
    """Whether the demo writes its report, decided before the data and the training, not after them.

    ``--report`` without matplotlib is bad input (exit 2); by default the report is written when matplotlib is
    installed and otherwise skipped with one ``note:`` line: the demo is a new user's first command, and a plain
    ``pip install mscred`` (without the ``report`` extra) must not end it before it starts.
    """
    if report is False:
        return False
    from mscred.errors import InputError
    from mscred.report import require_matplotlib

    try:
        require_matplotlib(otherwise="--no-report")
    except InputError:
        if report:
            raise
        click.echo("note: skipping the report (report/index.html): it needs matplotlib: pip install "
                   "'mscred[report]'", err=True)
        return False
    return True


def _check_dataset(name: str) -> None:
    from mscred.errors import InputError

    try:
        from mscred.data.datasets import DATASETS
    except ImportError:
        raise InputError("--dataset needs mscred.data.datasets, which this install lacks") from None
    # As load_dataset reads it (case and blanks aside): "SMD:machine-1-1" was refused here as unknown.
    kind = name.split(":", 1)[0].strip().lower()
    if kind not in DATASETS:
        import difflib

        close = difflib.get_close_matches(kind, DATASETS, n=1)
        raise InputError(f"--dataset {name!r}: unknown; " + (f"did you mean {close[0]}? " if close else "")
                         + f"choose one of {', '.join(DATASETS)} (smd, smap, msl and table read --data-root)")
