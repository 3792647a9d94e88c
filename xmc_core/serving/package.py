"""Log an ``XmcModel`` folder as an MLflow pyfunc model ("models from code", no pickle).

The logged model holds the model folder (artifact ``xmc_model``), the ``xmc_core`` package code
(``code/xmc_core``; never the working directory), the entry file
:mod:`xmc_core.serving.pyfunc_entry`, a signature (``text`` in; ``labels``/``scores`` out;
params ``topk`` and ``beam_size`` defaulting to the model's own predict config) and pinned pip
requirements taken from the running environment (no dependency inference, no network).
"""

from __future__ import annotations

import shutil
import tempfile
from importlib import metadata
from pathlib import Path

import mlflow
import pandas as pd
from mlflow.models import ModelSignature
from mlflow.models.model import ModelInfo
from mlflow.types.schema import Array, ColSpec, DataType, ParamSchema, ParamSpec, Schema

import xmc_core
from xmc_core.artifacts import read_meta
from xmc_core.config import PredictConfig, XmcConfig
from xmc_core.serving.pyfunc import ARTIFACT_KEY, TEXT_COLUMN
from xmc_core.serving.resolve import MODEL_CLASS, find_model_folder

MODEL_NAME = "model"
"""Name of the logged model within its run (``runs:/RUN_ID/model``)."""
ENTRY_FILE = Path(__file__).with_name("pyfunc_entry.py")
CORE_REQUIREMENTS = ("mlflow", "numpy", "scipy", "pandas", "pyarrow", "pydantic", "pyyaml", "numba")
TRANSFORMER_REQUIREMENTS = ("torch", "transformers", "tokenizers", "safetensors")
_CODE_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", "*.nbi", "*.nbc")
INPUT_EXAMPLE = pd.DataFrame({TEXT_COLUMN: ["an example document to label"]})


def model_signature(defaults: PredictConfig) -> ModelSignature:
    """``text`` string in; ``labels`` list<string>, ``scores`` list<float> out; params
    ``topk`` and ``beam_size`` (long) defaulting to ``defaults``."""
    return ModelSignature(
        inputs=Schema([ColSpec(DataType.string, TEXT_COLUMN)]),
        outputs=Schema(
            [
                ColSpec(Array(DataType.string), "labels"),
                ColSpec(Array(DataType.double), "scores"),
            ]
        ),
        params=ParamSchema(
            [
                ParamSpec("topk", DataType.long, defaults.topk),
                ParamSpec("beam_size", DataType.long, defaults.beam_size),
            ]
        ),
    )


def pip_requirements(kind: str) -> list[str]:
    """``package==version`` of the running environment for what the pyfunc imports."""
    names = CORE_REQUIREMENTS + (TRANSFORMER_REQUIREMENTS if kind == "xr-transformer" else ())
    pins = []
    for name in names:
        try:
            pins.append(f"{name}=={metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pins.append(name)
    return pins


def model_predict_config(model_dir: Path) -> PredictConfig:
    """The predict config saved with the model's ranker."""
    meta = read_meta(model_dir / "ranker", "XRLinearModel", verify=False)
    return PredictConfig.model_validate(meta["predict"])


def log_model(
    model_dir: Path, cfg: XmcConfig, registered_model_name: str | None = None
) -> ModelInfo:
    """Log ``model_dir`` (an ``XmcModel`` folder) as pyfunc model ``model`` of the active run;
    register it as a new version of ``registered_model_name`` when given.

    ``cfg`` is the run's configuration; its fingerprint is kept in the model's metadata.
    """
    folder = find_model_folder(Path(model_dir))
    meta = read_meta(folder, MODEL_CLASS)  # checks every checksum before anything is logged
    kind = str(meta.get("kind", "xr-linear"))
    with tempfile.TemporaryDirectory(prefix="xmc-code-") as tmp:
        code = Path(tmp) / "xmc_core"
        shutil.copytree(Path(xmc_core.__file__).parent, code, ignore=_CODE_IGNORE)
        return mlflow.pyfunc.log_model(
            name=MODEL_NAME,
            python_model=str(ENTRY_FILE),
            artifacts={ARTIFACT_KEY: str(folder)},
            code_paths=[str(code)],
            signature=model_signature(model_predict_config(folder)),
            input_example=INPUT_EXAMPLE,
            pip_requirements=pip_requirements(kind),
            registered_model_name=registered_model_name,
            metadata={
                "xmc_kind": kind,
                "xmc_version": xmc_core.__version__,
                "n_labels": int(meta["n_labels"]),
                "config_fingerprint": cfg.fingerprint(),
            },
        )
