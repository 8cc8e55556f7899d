"""Errors that mean "the user's input is wrong": the CLI prints their message on one line and exits with 2."""
from __future__ import annotations

import contextlib
import functools
import sys
import warnings


class InputError(ValueError):
    """Bad input: a missing or unreadable file, a bad value, a damaged model directory.

    The message says what is wrong and where (file, column, row), in one line, e.g.
    ``data.csv: column 'pump_3' row 17: value 'abc' is not a number``.
    """


class TextColumnError(InputError):
    """A sensor column without a single number in it (a status text, a unit, an ID: ``column``): bad input as any
    value that is not a number, told apart for ``mscred inspect``, which leaves such a column out and says so."""

    def __init__(self, message: str, column: str):
        super().__init__(message)
        self.column = column


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


class NotFittedError(RuntimeError, ValueError, AttributeError):
    """An estimator used before ``fit`` (or ``MSCRED.load``). A RuntimeError as before; an AttributeError and a
    ValueError as scikit-learn's NotFittedError is (the AttributeError so that ``hasattr(model, "threshold_")`` is
    False on an unfitted model).

    Where scikit-learn is imported, the error made is also a ``sklearn.exceptions.NotFittedError``
    (``_sklearn_not_fitted``): scikit-learn's estimator checks (``check_estimators_unfitted``) and its users'
    ``except`` clauses ask for that very class, which no base class here could be without importing scikit-learn
    (no dependency of mscred) on every ``import mscred``. Code that names scikit-learn's class has imported it, so
    the errors it can catch are made after. The ValueError is always a base, so that what an ``except ValueError``
    catches does not depend on whether scikit-learn was imported somewhere in the process.
    """

    def __new__(cls, *args, **kwargs):
        if cls is NotFittedError and "sklearn.exceptions" in sys.modules:
            cls = _sklearn_not_fitted()
        return super().__new__(cls, *args, **kwargs)


@functools.lru_cache(maxsize=None)
def _sklearn_not_fitted() -> type:
    """The NotFittedError that is also scikit-learn's, made once: on the first one raised with scikit-learn
    imported."""
    from sklearn.exceptions import NotFittedError as SklearnNotFittedError

    class BothNotFittedError(NotFittedError, SklearnNotFittedError):
        def __reduce__(self):
            # pickle (joblib's workers, multiprocessing) finds a class by its name, which is the base's: rebuilt
            # through the base, which makes this class again wherever scikit-learn is imported
            return NotFittedError, self.args

    # (repr and tracebacks say NotFittedError, mscred.errors.NotFittedError, as before)
    BothNotFittedError.__name__ = BothNotFittedError.__qualname__ = NotFittedError.__name__
    BothNotFittedError.__module__ = NotFittedError.__module__
    return BothNotFittedError
