"""Reading a config: the YAML file and the ``a.b=c`` overrides (the schema and every default
live in :mod:`xmc_core.config`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from xmc_core.errors import InputError


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError as err:
        raise InputError(path, "config file not found", "check the path") from err
    except (yaml.YAMLError, UnicodeDecodeError) as err:
        raise InputError(path, f"not valid YAML: {err}", "fix the YAML syntax") from err
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise InputError(path, "top level must be a mapping", "write `section: {key: value}`")
    return data


def apply_override(raw: dict[str, Any], item: str) -> None:
    """Apply ``a.b.c=value``; the value is parsed as YAML (numbers, booleans, null, lists)."""
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise InputError(None, f"override {item!r} is not KEY=VALUE", "write e.g. tfidf.min_df=2")
    node = raw
    parts = key.strip().split(".")
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise InputError(None, f"override {item!r}: {part!r} is not a section", "check the key")
        node = child
    try:
        node[parts[-1]] = yaml.safe_load(value) if value.strip() else None
    except yaml.YAMLError as err:
        raise InputError(
            None, f"override {item!r}: the value is not valid YAML ({err})", "quote the value"
        ) from err
