"""The benchmark scripts import each other as top-level modules (``benchmarks/`` is on
``sys.path`` when they run as scripts): the same here."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.shared_tmp import held, shared_root

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
if str(BENCHMARKS) not in sys.path:
    sys.path.insert(0, str(BENCHMARKS))


@pytest.fixture(scope="session")
def int8_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One tiny ``benchmarks/xr_transformer.py`` run of our XR-Transformer with
    ``predict_runtime: onnx-int8``, its model kept: shared by the runner's test and
    ``int8_predict.py``'s (each would train and export the same tiny model), made once for the
    run (the two modules may run on different pytest-xdist workers: :mod:`tests.shared_tmp`).
    Returns ``report`` (the results JSON), ``model`` (the kept folder), ``config`` (what it was
    trained with: the default preset and the settings given) and ``data`` (the dataset)."""
    import xr_transformer

    from tests.benchmarks.test_families import write_lines_dataset
    from tests.benchmarks.test_xr_transformer import TINY_TREE
    from xmc_core.config import XmcConfig

    root = shared_root(tmp_path_factory)
    tmp, out = root / "int8-run", root / "int8-run" / "results.json"
    given = [*TINY_TREE, "matcher.eval_docs=20", "matcher.predict_runtime=onnx-int8"]
    with held(root / "int8-run.lock"):
        if not out.exists():  # the report is written last
            shutil.rmtree(tmp, ignore_errors=True)
            write_lines_dataset(tmp / "data" / "tiny")
            argv = [
                "--datasets-root", str(tmp / "data"), "--datasets", "tiny",
                "--methods", "xr-transformer", "--peers-python", str(tmp / "no-such-python"),
                "--out", str(out), *(f"--set={s}" for s in given),
                "--keep-models", str(tmp / "kept"),
            ]  # fmt: skip
            assert xr_transformer.main(argv) == 0
    data = tmp / "data" / "tiny"
    cfg = XmcConfig.load(xr_transformer.PRESETS["cpu-reduced"], given)
    report = json.loads(out.read_text())
    return {"report": report, "model": tmp / "kept" / "tiny", "config": cfg, "data": data}
