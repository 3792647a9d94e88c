"""Errors that name the file, the row and the fix."""

from __future__ import annotations

from pathlib import Path


class XmcError(Exception):
    """Base class of every error xmc raises on purpose."""


class InputError(XmcError):
    """Bad input: says which file, which row (1-based line or record number), what and how to fix.

    Example message::

        train_texts.txt line 12: text is empty or whitespace-only.
          fix: remove the line from both train_texts.txt and train_labels.txt, or ingest with
          --on-empty drop
    """

    def __init__(
        self, path: str | Path | None, problem: str, fix: str, row: int | None = None
    ) -> None:
        self.path = str(path) if path is not None else None
        self.row = row
        self.problem = problem
        self.fix = fix
        where = self.path or "input"
        if row is not None:
            where += f" row {row}"
        super().__init__(f"{where}: {problem}\n  fix: {fix}")


class ArtifactError(XmcError):
    """A saved model or artifact folder is missing, corrupt or from an incompatible version."""

    def __init__(self, path: str | Path, problem: str, fix: str = "") -> None:
        self.path = str(path)
        msg = f"{self.path}: {problem}"
        if fix:
            msg += f"\n  fix: {fix}"
        super().__init__(msg)


class ConfigError(InputError):
    """Mistakes in a configuration (a YAML file, ``--set``, values built in code).

    ``problem`` holds one line per mistake (``tree.branching must be a whole number, got
    'abc'``), plus ``  did you mean ...?`` under a single misspelled key; the message ends with
    the fix. Example::

        config key ranker.negative does not exist (in --set ranker.negative=tfn)
          did you mean ranker.negatives?
          fix: the keys of ranker are loss, Cp, Cn, ...
    """

    def __init__(self, problem: str, fix: str) -> None:
        self.path, self.row, self.problem, self.fix = None, None, problem, fix
        XmcError.__init__(self, f"{problem}\n  fix: {fix}")


class PathError(InputError):
    """A path a command needs is missing, or is not what the command needs there.

    Reads ``<what> (<why>)`` then the fix, e.g. ``no model at /tmp/m (no such folder)``.
    """

    def __init__(self, path: str | Path, what: str, why: str, fix: str) -> None:
        self.path, self.row, self.problem, self.fix = str(path), None, f"{what} ({why})", fix
        XmcError.__init__(self, f"{what} ({why})\n  fix: {fix}")
