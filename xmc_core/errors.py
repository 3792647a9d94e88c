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
