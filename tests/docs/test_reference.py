"""The generated pages of the documentation site stay current, and their generators are right.

``docs/reference/config.md`` and ``docs/reference/cli.md`` are written from the code (the config's
fields, the parser's help); the tables of ``BENCHMARKS.md`` from the results JSON. Each test
below fails when its committed file is stale and names the command that regenerates it.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from xmc_core.app import cli_reference, config_reference
from xmc_core.config import XmcConfig

ROOT = Path(__file__).resolve().parents[2]


def _leaf_keys(values: dict, prefix: str = "") -> list[str]:
    keys = []
    for name, value in values.items():
        if isinstance(value, dict) and name != "plugins":
            keys.extend(_leaf_keys(value, f"{prefix}{name}."))
        else:
            keys.append(f"{prefix}{name}")
    return keys


def test_the_config_reference_is_current() -> None:
    committed = config_reference.PAGE.read_text(encoding="utf-8")
    assert committed == config_reference.render(), (
        f"docs/reference/config.md is stale: run {config_reference.REGENERATE}"
    )


def test_the_cli_reference_is_current() -> None:
    committed = cli_reference.PAGE.read_text(encoding="utf-8")
    assert committed == cli_reference.render(), (
        f"docs/reference/cli.md is stale: run {cli_reference.REGENERATE}"
    )


def test_the_config_reference_lists_every_key_with_its_default() -> None:
    page = config_reference.render()
    keys = _leaf_keys(XmcConfig().model_dump(mode="json"))
    assert len(keys) > 100
    missing = [key for key in keys if f"| `{key}` |" not in page]
    assert missing == []
    assert (
        "| `tfidf.max_features` | int or None | `200000` | ≥ 1 | keep the most frequent terms |"
        in page
    )
    assert "| `serve.port` | int | `5005` | ≥ 1, ≤ 65535 |  |" in page
    assert "### `ensemble.members[]`: each item" in page


class _Inner(BaseModel):
    """An inner section with ``code`` in its docstring."""

    depth: int = Field(3, ge=1, le=5, description="how deep | really")


class _Outer(BaseModel):
    """Top."""

    mode: Literal["a", "b"] = "b"
    size: int | None = None
    inner: _Inner = _Inner()


def test_types_bounds_and_sections_of_a_small_config() -> None:
    page = config_reference.render(_Outer)
    assert '| `mode` | "a" or "b" | `"b"` |  |  |' in page
    assert "| `size` | int or None | `null` |  |  |" in page
    assert "## `inner`\n\nAn inner section with `code` in its docstring." in page
    assert "| `inner.depth` | int | `3` | ≥ 1, ≤ 5 | how deep \\| really |" in page


class _Base(BaseModel):
    """A base section without keys."""


class _Plugged(_Base):
    """A family's section, registered at run time."""

    rate: float = Field(0.5, gt=0, description="its own key")


class _Registry(BaseModel):
    """Sections typed by their base class, as a registry fills them in."""

    plugged: _Base = Field(default_factory=_Plugged)


def test_a_section_typed_by_its_base_class_shows_its_default_class_keys() -> None:
    page = config_reference.render(_Registry)
    assert "## `plugged`\n\nA family's section, registered at run time." in page
    assert "| `plugged.rate` | float | `0.5` | > 0 | its own key |" in page


def test_write_page_check_fails_on_a_stale_page_and_passes_once_written(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("old\n", encoding="utf-8")
    args = ["--out", str(page)]
    assert config_reference.write_page(lambda: "new\n", page, "cmd", [*args, "--check"]) == 1
    assert page.read_text(encoding="utf-8") == "old\n"
    assert config_reference.write_page(lambda: "new\n", page, "cmd", args) == 0
    assert page.read_text(encoding="utf-8") == "new\n"
    assert config_reference.write_page(lambda: "new\n", page, "cmd", [*args, "--check"]) == 0


def test_the_cli_reference_holds_every_subcommand_at_a_fixed_width() -> None:
    page = cli_reference.render()
    for name in ("ingest", "train", "predict", "evaluate", "serve", "promote", "rollback"):
        assert f"## `xmc {name}`\n\n```text\nusage: xmc {name}" in page
    widest = max(len(line) for line in page.split("```text")[1].splitlines())
    assert widest <= int(cli_reference.WIDTH) + 20


def test_benchmarks_tables_are_current_and_the_documents_stay_short() -> None:
    spec = importlib.util.spec_from_file_location("plots", ROOT / "benchmarks" / "plots.py")
    assert spec is not None and spec.loader is not None
    plots = importlib.util.module_from_spec(spec)
    sys.modules["plots"] = plots  # its dataclasses look their module up
    try:
        spec.loader.exec_module(plots)
    finally:
        del sys.modules["plots"]
    assert plots.main(["--check"]) == 0, (
        "BENCHMARKS.md's tables are stale: python benchmarks/plots.py"
    )
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 200
    assert len((ROOT / "BENCHMARKS.md").read_text(encoding="utf-8").splitlines()) <= 300


def test_the_links_of_readme_and_benchmarks_point_to_files_that_exist() -> None:
    """The two root documents are not part of the site, so the strict build does not check them."""
    broken = []
    for name in ("README.md", "BENCHMARKS.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        targets = re.findall(r"\]\(([^)#\s]+)[^)]*\)", text)
        assert targets, name
        broken += [f"{name}: {t}" for t in targets if not (ROOT / t).exists()]
    assert broken == []
