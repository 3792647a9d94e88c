"""The config as scikit-learn parameters: every key of :class:`~xmc_core.config.XmcConfig` as
``section__key`` (``tree__max_leaf_size``), what :class:`~xmc_core.model.estimator.XmcClassifier`'s
``get_params``, ``set_params`` and ``__repr__`` speak. Duck-typed: nothing here imports sklearn."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from pydantic import BaseModel

from xmc_core.config import XmcConfig

SEP = "__"
"""Between a section and its key, as in sklearn's nested parameters (``section__key``)."""


def config_params(cfg: BaseModel, prefix: str = "") -> dict[str, Any]:
    """Every leaf of ``cfg`` as ``{"section__key": value}``, sections recursed into, values as
    YAML holds them (a path as a string, a list as a list); ``work_dir`` left out (the
    estimator's own argument)."""
    dumped = cfg.model_dump(mode="json")
    params: dict[str, Any] = {}
    for name in type(cfg).model_fields:
        key = f"{prefix}{name}"
        if key == "work_dir":
            continue
        value = getattr(cfg, name)
        if isinstance(value, BaseModel):
            params.update(config_params(value, key + SEP))
        else:
            params[key] = dumped[name]
    return params


@cache
def default_params() -> dict[str, Any]:
    """:func:`config_params` of the default config (read-only: shared between calls)."""
    return config_params(XmcConfig())


def as_overrides(params: dict[str, Any]) -> list[str]:
    """``section__key`` parameters as the config's ``section.key=value`` overrides (value JSON,
    which the override parser reads as YAML)."""
    return [f"{k.replace(SEP, '.')}={json.dumps(v)}" for k, v in params.items()]


def params_repr(name: str, config: object, work_dir: object, overrides: dict[str, Any]) -> str:
    """``name(arg=value, ...)`` in scikit-learn's style: only what differs from the defaults.

    ``config`` shows as given (a path), or, for an :class:`XmcConfig`, as the keys where it
    differs from the defaults; an override equal to its default is left out only when no
    ``config`` is given (a YAML file could set that key otherwise)."""
    shown: list[str] = []
    defaults = default_params()
    if isinstance(config, XmcConfig):
        changed = {k: v for k, v in config_params(config).items() if defaults.get(k) != v}
        inner = ", ".join(f"{k}={v!r}" for k, v in changed.items())
        shown.append(f"config=XmcConfig({inner})")
    elif config is not None:
        shown.append(f"config={str(config)!r}")
    if work_dir is not None:
        shown.append(f"work_dir={str(work_dir)!r}")
    for key, value in overrides.items():
        if config is None and key in defaults and defaults[key] == value:
            continue
        shown.append(f"{key}={value!r}")
    return f"{name}({', '.join(shown)})"
