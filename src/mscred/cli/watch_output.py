"""What ``mscred watch`` writes as it scores: SCORES.csv a chunk at a time, the alarm and clear lines on stdout, and
with ``--events`` the alarm list, a row appended as each run of anomalous rows ends."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import click
import numpy as np
import pandas as pd

from mscred.evaluation import split_names
from mscred.events import events_table


class Scores:
    """SCORES.csv written a chunk at a time (header first; each chunk in one write, flushed, so that a reader sees
    whole rows), and the alarms on stdout: an ``alarm:`` line where a run of anomalous rows starts, a ``clear:``
    line where it ends (at the first row under the threshold after it, with the run's rows and peak). With
    ``events``, that file gets the run's row of ``detect --events`` as it ends (a run still open when the watch
    stops is not there: a ``--resume`` writes it once it ends). The files are created with the first chunk: a watch
    refused before any row is scored leaves none (and older ones as they were). ``as_json``: the alarm, clear and
    summary lines as one JSON object each, for scripts (``say``). ``entity``: the lines name it (``fleet-watch``).
    ``path`` '-': the scores go to standard output (``watch --out -``), a chunk at a time, flushed, for the next
    program of a pipeline; the alarm, clear and summary lines then go to standard error."""

    def __init__(self, path, threshold: float, events=None, top_k: int = 3, as_json: bool = False,
                 entity: Optional[str] = None):
        from mscred.cli.stdio import STDIO

        self.path, self.threshold, self.top_k, self.as_json = Path(path), threshold, top_k, as_json
        self.entity = entity
        self.to_stdout = str(path) == STDIO
        self.events = None if events is None else Path(events)
        self.sep = _separator(self.path)
        self.handle = self.events_handle = None
        self.rows = self.anomalous = self.alarms = self.chunks = 0
        self.held = 0               # rows an earlier watch wrote (--resume)
        self.history = 0            # rows DATA held at the start, taken as history and not scored (--new-only)
        self.run: Optional[OpenRun] = None   # the run of anomalous rows the last row written belongs to
        self.last: Optional[pd.Series] = None   # the last row written (its score, for --metrics)

    def resume(self, held: int, run: Optional["OpenRun"]) -> None:
        """Append to the file of an earlier watch, which holds ``held`` rows, its last in ``run`` or in none."""
        self.held, self.run = held, run
        self.handle = open(self.path, "a", encoding="utf-8", newline="")

    def add(self, found: pd.DataFrame) -> None:
        if self.handle is None:
            self.handle = (click.get_text_stream("stdout") if self.to_stdout else
                           open(self.path, "w", encoding="utf-8", newline=""))
        self.handle.write(found.to_csv(index=False, header=self.chunks == 0 and not self.held, sep=self.sep))
        self.handle.flush()
        if self.events is not None and self.events_handle is None:
            self._open_events()
        flagged = found["is_anomaly"].to_numpy().astype(bool)
        before = np.concatenate([[self.run is not None], flagged[:-1]])   # each row's previous row flagged
        changes = np.flatnonzero(flagged != before)
        for a, b in zip([0, *changes], [*changes, len(found)]):   # the chunk's stretches of one state
            if a == b:
                continue
            if flagged[a]:
                if self.run is None:
                    self._alarm(found.iloc[a])
                    self.run = OpenRun()
                self.run.parts.append(found.iloc[a:b])
            elif self.run is not None:
                self._clear(found.iloc[a])
        self.anomalous += int(flagged.sum())
        self.rows += len(found)
        if len(found):
            self.last = found.iloc[-1]
        self.chunks += 1

    def _alarm(self, row: pd.Series) -> None:
        self.say(f"alarm: {row.index[0]} {row.iloc[0]}: score {row['score']:.4g} (threshold {self.threshold:.4g}), "
                 f"root causes {row['root_causes'] or '-'}",
                 {"event": "alarm", row.index[0]: row.iloc[0], "score": row["score"], "threshold": self.threshold,
                  "root_causes": split_names(row["root_causes"])})
        self.alarms += 1

    def _clear(self, row: pd.Series) -> None:
        """The run ends at ``row``: its clear line, its event."""
        rows = self.run.table()
        self.say(f"clear: {row.index[0]} {row.iloc[0]}: the anomaly from {rows.iloc[0, 0]} over {len(rows)} "
                 f"row(s), peak score {rows['score'].max():.4g}, ended",
                 {"event": "clear", row.index[0]: row.iloc[0], "start": rows.iloc[0, 0], "rows": len(rows),
                  "peak_score": rows["score"].max()})
        if self.events_handle is not None:
            event = events_table(rows, top_k=self.top_k)
            self.events_handle.write(event.to_csv(index=False, header=False, sep=_separator(self.events)))
            self.events_handle.flush()
        self.run = None

    def _open_events(self) -> None:
        """EVENTS.csv: appended to after a --resume (created with its header where there is none), else new."""
        from mscred.events import COLUMNS

        if self.held and self.events.exists():
            self.events_handle = open(self.events, "a", encoding="utf-8", newline="")
        else:
            self.events_handle = open(self.events, "w", encoding="utf-8", newline="")
            self.events_handle.write(pd.DataFrame(columns=COLUMNS).to_csv(index=False, sep=_separator(self.events)))
            self.events_handle.flush()

    def close(self) -> None:
        for handle in (None if self.to_stdout else self.handle, self.events_handle):
            if handle is not None:
                handle.close()

    def say(self, line: str, fields: dict) -> None:
        """``line`` on stdout, or with ``as_json`` ``fields`` as one JSON object (numpy numbers and times plain);
        with an ``entity``, after the line's first word ("alarm: pump_1: ...") or as the object's second field."""
        if self.entity is not None:
            word, rest = line.split(" ", 1)
            line = f"{word} {self.entity}: {rest}" if word.endswith(":") else f"{self.entity}: {line}"
            fields = {"event": fields["event"], "entity": self.entity, **fields}
        if self.as_json:
            import json

            line = json.dumps({key: _plain(value) for key, value in fields.items()})
        click.echo(line, err=self.to_stdout)   # (stdout carries the scores there)

    def summary(self, data) -> None:
        """The last line of a watch: what it scored and wrote."""
        after = (f" after the {self.held} it held already" if self.held else
                 f" after {self.history} rows of history" if self.history else "")
        fields = {"event": "summary", "rows": self.rows, "chunks": self.chunks, "anomalous": self.anomalous,
                  "alarms": self.alarms, "threshold": self.threshold, "held": self.held, "history": self.history,
                  "out": str(self.path) if self.chunks else None,
                  "events": str(self.events) if self.chunks and self.events is not None else None}
        if not self.chunks:
            self.say(f"watched {data}: no rows came{after}; " + (f"{self.path} as it was" if self.held else
                                                                 "nothing written"), fields)
            return
        events = f" and {self.events}" if self.events is not None else ""
        written = "standard output" if self.to_stdout else self.path
        self.say(f"watched {self.rows} rows in {self.chunks} chunk(s): {self.anomalous} anomalous in {self.alarms} "
                 f"alarm(s) (threshold {self.threshold:.4g}); wrote {written}{events}{after}", fields)


class OpenRun:
    """A run of anomalous rows not yet ended: its rows so far (detect's columns), a chunk's part at a time."""

    def __init__(self, parts: Optional[list] = None):
        self.parts: list[pd.DataFrame] = parts or []

    def table(self) -> pd.DataFrame:
        return pd.concat(self.parts, ignore_index=True)

    @classmethod
    def at_end_of(cls, written: pd.DataFrame) -> Optional["OpenRun"]:
        """The run the last row of an earlier watch's SCORES.csv (read as strings) belongs to, or None."""
        flagged = (written["is_anomaly"] == "1").to_numpy()
        if not flagged[-1]:
            return None
        rows = len(flagged) - (np.flatnonzero(~flagged)[-1] + 1 if (~flagged).any() else 0)
        tail = written.iloc[-rows:].reset_index(drop=True)
        return cls([tail.assign(score=tail["score"].astype(float), is_anomaly=1)])


def _plain(value):
    """A JSON value for ``value``: numpy numbers as Python's, anything else not JSON's (a time) as its text."""
    if isinstance(value, np.generic):
        value = value.item()
    return value if value is None or isinstance(value, (bool, int, float, str, list)) else str(value)


def _separator(path: Path) -> str:
    return "\t" if path.suffix.lower() == ".tsv" else ","
