"""The MLflow pyfunc wrapper of an ``XmcModel`` (logged by :mod:`xmc_core.serving.package`).

Input: a DataFrame with a ``text`` column (also accepted: a list of strings, a string, or a dict
with ``"text"``). Params: ``topk``, ``beam_size`` and ``threshold`` (a probability; defaults: the
model's own predict config). Output: a DataFrame with one row per text, ``labels`` (list of str,
best first), ``scores`` and ``probabilities`` (lists of float; probabilities None for an
uncalibrated model).

Policy for missing text: a None, NaN, empty or whitespace-only text has no words to rank
labels by, so its row gets empty lists (the other rows are predicted
as usual); it is not an error.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

import mlflow.pyfunc
import pandas as pd

from xmc_core.app.predictions import ranked_lists
from xmc_core.errors import InputError
from xmc_core.model.xmc_model import XmcModel

ARTIFACT_KEY = "xmc_model"
"""Key of the model folder in the pyfunc's ``artifacts``."""
TEXT_COLUMN = "text"
_FIX_INPUT = 'pass a DataFrame with a "text" column of strings, e.g. pd.DataFrame({"text": [...]})'


class XmcPyfuncModel(mlflow.pyfunc.PythonModel):
    """Opens the logged model folder once; ``predict`` ranks labels for raw texts."""

    def __init__(self) -> None:
        self.model: XmcModel | None = None

    def load_context(self, context: mlflow.pyfunc.PythonModelContext) -> None:
        """Load the ``XmcModel`` folder logged as artifact ``xmc_model``."""
        self.model = XmcModel.load(context.artifacts[ARTIFACT_KEY])

    def predict(
        self,
        context: mlflow.pyfunc.PythonModelContext,
        model_input: pd.DataFrame,
        params: dict[str, Any] | None = None,
    ) -> pd.DataFrame:
        """``labels`` and ``scores`` (best first) for every text of ``model_input``."""
        if self.model is None:
            raise RuntimeError("XmcPyfuncModel.predict before load_context")
        params = params or {}
        return predict_frame(
            self.model,
            input_texts(model_input),
            _positive_int(params, "topk"),
            _positive_int(params, "beam_size"),
            _probability(params, "threshold"),
        )


def input_texts(model_input: Any) -> list[str | None]:
    """The texts of a pyfunc input (see the module docstring); blanks become None."""
    if isinstance(model_input, pd.DataFrame):
        if TEXT_COLUMN not in model_input.columns:
            raise InputError(
                None, f"input has no {TEXT_COLUMN!r} column (columns: {list(model_input.columns)})",
                _FIX_INPUT,
            )  # fmt: skip
        values = list(model_input[TEXT_COLUMN])
    elif isinstance(model_input, dict):
        if TEXT_COLUMN not in model_input:
            raise InputError(None, f"input has no {TEXT_COLUMN!r} key", _FIX_INPUT)
        values = _as_list(model_input[TEXT_COLUMN])
    else:
        values = _as_list(model_input)
    return [_text(value, row) for row, value in enumerate(values)]


def _as_list(value: Any) -> list[Any]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple | pd.Series):
        return list(value)
    raise InputError(None, f"input of type {type(value).__name__} holds no texts", _FIX_INPUT)


def _text(value: Any, row: int) -> str | None:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str):
        raise InputError(
            None, f"text is a {type(value).__name__}, expected a string", _FIX_INPUT, row=row
        )
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as err:  # a lone surrogate ("\ud800") from a JSON body
        raise InputError(
            None,
            f"text cannot be encoded as UTF-8 (character {err.start}: {value[err.start]!r})",
            "send valid Unicode text: surrogate code points only come in pairs",
            row=row,
        ) from None
    return value if value.strip() else None


def _probability(params: dict[str, Any], name: str) -> float | None:
    value = params.get(name)
    if value is None:
        return None
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and 0 <= value <= 1
    if not ok:
        raise InputError(None, f"param {name}={value!r} is not a probability", "pass e.g. 0.5")
    return float(value)


def _positive_int(params: dict[str, Any], name: str) -> int | None:
    value = params.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise InputError(None, f"param {name}={value!r} is not a positive integer", "pass e.g. 10")
    return int(value)


def predict_frame(
    model: XmcModel, texts: list[str | None], topk: int | None, beam_size: int | None,
    threshold: float | None = None,
) -> pd.DataFrame:  # fmt: skip
    """Columns ``labels``, ``scores`` and ``probabilities`` (lists, best first; probabilities
    None for an uncalibrated model); empty lists for None texts."""
    empty: list | None = [] if model.calibrator is not None else None
    out: dict[str, list[Any]] = {
        "labels": [[] for _ in texts], "scores": [[] for _ in texts],
        "probabilities": [None if empty is None else [] for _ in texts],
    }  # fmt: skip
    rows = [i for i, text in enumerate(texts) if text is not None]
    if rows:
        matrix = model.predict([texts[i] for i in rows], topk, beam_size)
        for name, values in ranked_lists(model, matrix, *model.cut(threshold)).items():
            for i, value in zip(rows, values, strict=True):
                out[name][i] = value
    return pd.DataFrame(out)
