"""Errors that mean "the user's input is wrong": the CLI prints their message on one line and exits with 2."""
from __future__ import annotations

import contextlib
import sys
import warnings


class InputError(ValueError):
    """Bad input: a missing or unreadable file, a bad value, a damaged model directory.

    The message says what is wrong and where (file, column, row), in one line, e.g.
    ``data.csv: column 'pump_3' row 17: value 'abc' is not a number``.
    """


class NoteWarning(UserWarning):
    """Something the user should know that does not stop the work: the CLI prints it as a one-line ``note:`` on
    stderr (``note_lines``), the Python API as a warning."""


class CalibrationWarning(NoteWarning):
    """The threshold was fitted, but on too little."""


class IgnoredSettingWarning(NoteWarning):
    """A setting asked for that this machine cannot apply (``bf16`` without native bf16, ``cuda_graphs`` without
    CUDA): training goes on without it. (Once a log line, which reached no one: the CLI configures no logging.)"""


class MicroBatchWarning(NoteWarning):
    """CPU training runs its batches in micro-batches (the same Adam steps), because the whole batch would not fit
    in the memory available."""


@contextlib.contextmanager
def note_lines(show: bool = True):
    """Inside: every NoteWarning is one ``note: ...`` line on stderr, as the CLI's other notes (train, fleet,
    DDP's rank 0), or nothing with ``show=False`` (DDP's other ranks, which fit the same windows); other warnings
    show as Python shows them."""
    with warnings.catch_warnings():   # (restores showwarning and the filters on exit)
        shown = warnings.showwarning

        def note(message, category, filename, lineno, file=None, line=None):
            if issubclass(category, NoteWarning):
                print(f"note: {message}", file=sys.stderr, flush=True)
            else:
                shown(message, category, filename, lineno, file, line)
        warnings.showwarning = note
        warnings.simplefilter("always" if show else "ignore", NoteWarning)
        yield


class PartlyDone(Exception):
    """A command that ran but did not do all it was asked, and has already said what (``mscred fleet`` when some
    entities failed: its summary has a row per entity): the CLI exits with 1 and prints nothing more."""


class NotFittedError(RuntimeError, AttributeError):
    """An estimator used before ``fit`` (or ``MSCRED.load``). A RuntimeError as before, and an AttributeError as
    scikit-learn's NotFittedError is, so that ``hasattr(model, "threshold_")`` is False on an unfitted model."""
