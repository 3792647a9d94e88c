"""The registry finds every family through the ``xmc.families`` entry points (a plug-in too, in
this process and in a child), the config takes the families' sections from it, a family
declares its own saved parts, and finding the families or loading an XR-Linear model imports
no torch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli_helpers import REPO_ROOT
from tests.model import toy_family
from tests.model.plugin_dist import installed, write_dist_info
from xmc_core.config import XmcConfig
from xmc_core.errors import ArtifactError, InputError
from xmc_core.model import registry

SAVED = Path(__file__).parent / "saved" / "format2-xr-linear"
TOY = {toy_family.NAME: f"{toy_family.__name__}:FAMILY"}


def child(code: str, env: dict[str, str] | None = None) -> list[str]:
    """The lines ``python -c code`` prints, run from the repository root."""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True,
        cwd=REPO_ROOT, env={**os.environ, **(env or {})}, timeout=300,
    )  # fmt: skip
    return done.stdout.split()


def test_finding_the_families_and_an_xr_linear_model_import_no_torch() -> None:
    code = (
        "import sys\n"
        "from xmc_core.config import XmcConfig\n"
        "from xmc_core.model.xmc_model import XmcModel\n"
        f"m = XmcModel.load({str(SAVED)!r})\n"
        "print(len(XmcConfig.model_fields), m.predict(['some words']).shape[1])\n"
        "print('torch' in sys.modules, 'faiss' in sys.modules)\n"
    )
    assert child(code) == [str(len(XmcConfig.model_fields)), "6", "False", "False"]


def test_a_plugin_is_found_through_its_entry_point_in_a_child_process(tmp_path: Path) -> None:
    write_dist_info(tmp_path / "site", "xmc_toy", TOY)
    code = (
        "from pathlib import Path\n"
        "from xmc_core.config import XmcConfig\n"
        "from xmc_core.model import registry\n"
        "print(','.join(registry.family_names()))\n"
        "print(registry.part_class('CentroidRanker', Path('m')).__name__)\n"
        "sets = ['model.kind=toy_centroid', 'plugins.toy_centroid.shrink=0.5']\n"
        "cfg = XmcConfig.load(None, sets)\n"
        "print(cfg.model.kind, cfg.plugin('toy_centroid').shrink)\n"
    )
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(REPO_ROOT)])}
    names, part, kind, shrink = child(code, env)
    assert names.split(",") == sorted([*registry.family_names(), "toy_centroid"])
    assert (part, kind, shrink) == ("CentroidRanker", "toy_centroid", "0.5")
    assert "toy_centroid" not in registry.family_names()  # not installed in this process


def test_an_entry_point_that_is_not_a_family_is_refused(tmp_path: Path) -> None:
    bad = {"not_one": f"{toy_family.__name__}:NAME"}
    with (
        pytest.raises(InputError, match=r"entry point not_one = \S+ is not a Family named"),
        installed(tmp_path / "site", "xmc_bad", bad),
    ):
        pass
    assert "not_one" not in registry.family_names()


def test_an_install_without_the_entry_points_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    """A stale ``xmc.egg-info`` (from before the entry points) hides every built-in family: the
    error says so and how to fix it, not only that the name is unknown."""
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    registry.discover(refresh=True)
    try:
        with pytest.raises(InputError, match=r"no built-in family is installed") as err:
            registry.family("xr_linear")
        assert "make install" in str(err.value)
    finally:
        monkeypatch.undo()
        registry.discover(refresh=True)
    assert "xr_linear" in registry.family_names()
    with pytest.raises(InputError, match=r"unknown model family 'nope' \(known: .*xr_linear"):
        registry.family("nope")


def test_the_config_takes_the_built_in_families_sections_from_the_registry() -> None:
    fields = list(XmcConfig.model_fields)
    sections = registry.builtin_sections()
    names = [name for name, _ in sections]
    assert names == [
        "xml_cnn",
        "x_transformer",
        "ensemble",
        "hierarchical_xc",
        "astec",
        "neural_xc",
    ]
    assert fields[fields.index("matcher") + 1 : fields.index("eval")] == names
    for name, section in sections:
        assert XmcConfig.model_fields[name].annotation is section
        assert registry.family(name).section is section


def test_a_saved_part_is_the_class_its_family_declares(tmp_path: Path) -> None:
    from xmc_core.families.astec.parts import AstecRanker

    assert registry.part_class("AstecRanker", tmp_path) is AstecRanker
    with pytest.raises(ArtifactError, match="class 'NoSuchRanker'"):
        registry.part_class("NoSuchRanker", tmp_path)  # no family declares it
