"""`mscred watch MODEL_DIR DATA --out SCORES.csv`: a CSV file scored as something appends rows to it."""
from __future__ import annotations

import time
from pathlib import Path

import click
import numpy as np

from mscred.cli.params import NamedPath, encoding_option
from mscred.config import MISSING_POLICIES


@click.command()
@click.argument("model_dir", type=NamedPath(file_okay=False, hint="give the model's folder"))
@click.argument("data", type=NamedPath(dir_okay=False))
@click.option("--out", "out", required=True, type=NamedPath(dir_okay=False),
              help="SCORES.csv (or .tsv) to write, a chunk of rows at a time as DATA grows.")
@click.option("--device", type=click.Choice(["auto", "cpu", "cuda"]), default="auto", show_default=True)
@click.option("--missing", type=click.Choice(MISSING_POLICIES), default=None,
              help="Missing (NaN) sensor values in DATA: 'error' or 'interpolate' [the model's setting, from train].")
@click.option("--sensor-scores", is_flag=True, help="Also a column score_<sensor> per sensor, as detect's.")
@click.option("--interval", type=click.FloatRange(min=0.01), default=1.0, show_default=True,
              help="Seconds between looks at DATA.")
@click.option("--idle-exit", type=click.FloatRange(min=0), default=None,
              help="Stop once DATA has gained no complete line for this many seconds [watch until Ctrl-C].")
@encoding_option
def watch(model_dir, data, out, device, missing, sensor_scores, interval, idle_exit, encoding) -> None:
    """Score DATA, a CSV file that something appends rows to, as it grows.

    Every complete line DATA gains is scored after the rows before it (the rows already in DATA first), and
    SCORES.csv gains detect's columns for it: every row is scored once DATA holds one window's rows (100 at the
    defaults). A line still being written waits for its newline (at --idle-exit, a last line without one is taken
    as complete). Each anomaly's first row prints an 'alarm:' line on stdout with its time, score and root
    causes. Stops on Ctrl-C (or after --idle-exit seconds without a new line) with a summary; a bad row stops it
    with exit 2, the rows before it scored and written.
    """
    from mscred.data.follow import GrowingCsv
    from mscred.data.io import check_writable_table, is_plain_text
    from mscred.detector import MSCRED
    from mscred.errors import InputError

    check_writable_table(out, inputs=[data])
    if not is_plain_text(out):
        raise InputError(f"{out}: watch appends to its output as it scores: give a .csv or .tsv file")
    follower = GrowingCsv(data, encoding=encoding)
    model = MSCRED.load(model_dir, device=device)
    monitor = model.monitor(sensor_scores=sensor_scores, missing=missing)
    scores = Scores(out, model.threshold_)
    try:
        _follow(follower, monitor, scores, interval, idle_exit)
    except KeyboardInterrupt:    # how a watch is stopped: said, not an error
        pass
    finally:
        follower.close()
        scores.close()
    click.echo(scores.summary(data))


def _follow(follower, monitor, scores, interval: float, idle_exit) -> None:
    """Poll ``follower`` every ``interval`` seconds and score what it gains, until ``idle_exit`` seconds pass
    without a new line (or forever)."""
    last_new = time.monotonic()
    while True:
        rows = follower.poll()
        if rows is not None and len(rows):
            scores.add(monitor.update(rows, source=follower.where()))
            last_new = time.monotonic()
        elif idle_exit is not None and time.monotonic() - last_new >= idle_exit:
            # The writer has stopped: a last line without its newline is taken as complete
            rows = follower.poll(final=True)
            if rows is not None and len(rows):
                scores.add(monitor.update(rows, source=follower.where()))
            return
        else:
            time.sleep(interval)


class Scores:
    """SCORES.csv written a chunk at a time (header first; each chunk in one write, flushed, so that a reader sees
    whole rows), and the alarms: a line on stdout where a run of anomalous rows starts. The file is created with
    the first chunk: a watch refused before any row is scored leaves none (and an older one as it was)."""

    def __init__(self, path, threshold: float):
        self.path, self.threshold = Path(path), threshold
        self.sep = "\t" if self.path.suffix.lower() == ".tsv" else ","
        self.handle = None
        self.rows = self.anomalous = self.alarms = self.chunks = 0
        self.flagged_last = False   # whether the last row written was anomalous (a run continues into the chunk)

    def add(self, found) -> None:
        if self.handle is None:
            self.handle = open(self.path, "w", encoding="utf-8", newline="")
        self.handle.write(found.to_csv(index=False, header=self.chunks == 0, sep=self.sep))
        self.handle.flush()
        flagged = found["is_anomaly"].to_numpy().astype(bool)
        starts = flagged & ~_shifted(flagged, self.flagged_last)
        for i in starts.nonzero()[0]:
            row = found.iloc[i]
            causes = row["root_causes"] or "-"
            click.echo(f"alarm: {found.columns[0]} {row.iloc[0]}: score {row['score']:.4g} (threshold "
                       f"{self.threshold:.4g}), root causes {causes}")
        self.alarms += int(starts.sum())
        self.anomalous += int(flagged.sum())
        self.rows += len(found)
        self.chunks += 1
        self.flagged_last = bool(flagged[-1])

    def close(self) -> None:
        if self.handle is not None:
            self.handle.close()

    def summary(self, data) -> str:
        if not self.chunks:
            return f"watched {data}: no rows came; nothing written"
        return (f"watched {self.rows} rows in {self.chunks} chunk(s): {self.anomalous} anomalous in {self.alarms} "
                f"alarm(s) (threshold {self.threshold:.4g}); wrote {self.path}")


def _shifted(flags: np.ndarray, before: bool) -> np.ndarray:
    """``flags`` moved one row later, ``before`` first: whether each row's previous row was anomalous."""
    return np.concatenate([[before], flags[:-1]])
