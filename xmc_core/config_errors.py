"""Configuration mistakes in words a person can act on: which key, what is allowed, where it
was given (``--set`` item, YAML file and line), and "did you mean" for a near key or value.

Turns a pydantic ``ValidationError`` into one line per mistake, without pydantic's jargon
(``[type=...]``, URLs, "validation error for XmcConfig"). The schema (``XmcConfig``) is passed
in, so this module does not import :mod:`xmc_core.config`.
"""

from __future__ import annotations

import difflib
import re
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined

from xmc_core.errors import ConfigError

_LIST_LIMIT = 160
"""Longest list of allowed keys shown in a fix (longer: point to ``xmc dump-config``)."""
_DUMP_HINT = "`xmc dump-config` prints every key with its value"
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}
_TYPE_WORDS = {  # a pydantic error type -> what was expected, when the schema does not say
    "int_parsing": "a whole number", "int_type": "a whole number",
    "int_from_float": "a whole number", "float_parsing": "a number", "float_type": "a number",
    "bool_parsing": "true or false", "bool_type": "true or false", "string_type": "text",
    "list_type": "a list", "dict_type": "a mapping (key: value)", "path_type": "a path",
    "model_type": "a section of keys (key: value)", "model_attributes_type": "a section of keys",
}  # fmt: skip


@dataclass(frozen=True)
class Mistake:
    """One mistake: its dotted key, the sentence, a suggestion (did you mean) and the fix."""

    key: tuple[str | int, ...]
    text: str
    suggestion: str | None = None
    fix: str | None = None


def shown(value: Any, limit: int = 60) -> str:
    """A value as a person typed it (YAML words for null and booleans), cut to ``limit``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def dotted(loc: tuple[str | int, ...]) -> str:
    """``('eval', 'ks', 1)`` -> ``eval.ks[1]``."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _field_path(
    schema: type[BaseModel] | None, loc: tuple[str | int, ...]
) -> tuple[tuple[str | int, ...], type[BaseModel] | None, Any]:
    """The part of ``loc`` that names fields and list items (pydantic appends union members
    such as ``'int'``), the model holding the last field, and that field's annotation
    (``schema`` None: all of ``loc``, nothing known)."""
    if schema is None:
        return loc, None, None
    model: type[BaseModel] | None = schema
    annotation: Any = schema
    path: list[str | int] = []
    parent: type[BaseModel] | None = None
    for part in loc:
        if isinstance(part, int) and get_origin(annotation) is list:
            annotation = get_args(annotation)[0]
        elif isinstance(part, str) and model is not None and part in model.model_fields:
            parent, annotation = model, model.model_fields[part].annotation
        else:
            break
        path.append(part)
        model = annotation if _is_model(annotation) else None
    return tuple(path), parent, annotation


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def kind_of(annotation: Any) -> str | None:
    """What a field takes, in words: ``a whole number``, ``one of tfn, man``, ``a path or
    null``; None when it cannot be said simply."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Literal:
        return "one of " + ", ".join(str(a) for a in args)
    if origin in (Union, types.UnionType):
        words = [kind_of(a) for a in args if a is not type(None)]
        if None in words:
            return None
        if {"a whole number", "a number"} <= set(words):
            words = ["a number"]
        text = " or ".join(dict.fromkeys(w for w in words if w))
        return text + " or null" if type(None) in args else text
    if origin is list:
        inner = kind_of(args[0]) if args else None
        return "a list" + (f" of {inner.removeprefix('a ')}s" if inner else "")
    if origin is dict or annotation is dict:
        return "a mapping (key: value)"
    simple = {bool: "true or false", int: "a whole number", float: "a number", str: "text"}
    if annotation in simple:
        return simple[annotation]
    if isinstance(annotation, type) and issubclass(annotation, Path):
        return "a path"
    if _is_model(annotation):
        return "a section of keys (key: value)"
    return None


def _default(parent: type[BaseModel] | None, name: str | int) -> str | None:
    if parent is None or not isinstance(name, str):
        return None
    field = parent.model_fields[name]
    if field.default is PydanticUndefined or _is_model(type(field.default)):
        return None
    value = field.default
    return shown(str(value) if isinstance(value, Path) else value)


def _near(word: str, choices: list[str]) -> str | None:
    """The choice closest to ``word`` (case ignored), if any is close."""
    lowered = {c.lower(): c for c in choices}
    found = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return lowered[found[0]] if found else None


def _allowed_keys(section: str, names: list[str]) -> str:
    listed = ", ".join(names)
    if len(listed) > _LIST_LIMIT:
        return f"use a key of {section} ({_DUMP_HINT})"
    return f"the keys of {section} are {listed}"


def _unknown_key(
    schema: type[BaseModel] | None, loc: tuple[str | int, ...], value: Any, prefix: tuple[str, ...]
) -> Mistake:
    path, _, annotation = _field_path(schema, loc[:-1])
    name = str(loc[-1])
    model = annotation if _is_model(annotation) and len(path) == len(loc) - 1 else None
    if schema is None or model is None:  # under a field that is not a section: say so plainly
        return Mistake(loc, f"config key {dotted((*prefix, *loc))} does not exist")
    names = list(model.model_fields)
    near = _near(name, names)
    suggestion = dotted((*prefix, *path, near)) if near else None
    if not prefix and (suggestion is None or not path):  # ranker.branching, branching
        owners = [s for s, f in schema.model_fields.items() if _has_field(f.annotation, name)]
        suggestion = f"{owners[0]}.{name}" if owners else suggestion
    if path or prefix:
        return Mistake(
            loc, f"config key {dotted((*prefix, *loc))} does not exist", suggestion,
            _allowed_keys(dotted((*prefix, *path)), names),
        )  # fmt: skip
    word = "section" if isinstance(value, dict) else "key"
    fix = "the top-level keys are " + ", ".join(names)
    return Mistake(loc, f"config {word} {name} does not exist", suggestion, fix)


def _has_field(annotation: Any, name: str) -> bool:
    return _is_model(annotation) and name in annotation.model_fields


def mistake(
    schema: type[BaseModel] | None, error: dict[str, Any], prefix: tuple[str, ...] = ()
) -> Mistake:
    """One pydantic error (an item of ``ValidationError.errors()``) as a :class:`Mistake`
    (``prefix``: where ``schema`` sits in the whole config, e.g. ``('plugins', 'toy')``)."""
    kind, loc, value = error["type"], tuple(error["loc"]), error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "extra_forbidden":
        m = _unknown_key(schema, loc, value, prefix)
        return Mistake((*prefix, *m.key), m.text, m.suggestion, m.fix)
    path, parent, annotation = _field_path(schema, loc)
    key = dotted((*prefix, *path))
    path = (*prefix, *path)
    default = _default(parent, path[-1]) if path else None
    fix = f"correct {key} (default: {default})" if default is not None else None

    def set_to(words: str) -> str | None:
        return f"set {key} to {words} (default: {default})" if default is not None else fix

    if kind == "missing":
        return Mistake(path, f"config key {key} is required but missing", None, None)
    if kind in ("value_error", "assertion_error"):
        reason = str(ctx.get("error", error["msg"]))
        named = re.match(r"(\w+)=", reason)  # a section's validator: "branching=3 must ..."
        if named and _is_model(annotation) and named[1] in annotation.model_fields:
            field = (*path, named[1])
            fix = f"correct {dotted(field)} (default: {_default(annotation, named[1])})"
            return Mistake(field, f"{dotted(field)}{reason[len(named[1]) :]}", None, fix)
        text = f"{key}: {reason}" if key else reason
        return Mistake(path, text, *_value_hint(path, value))
    if kind in _BOUNDS:
        name, words = _BOUNDS[kind]
        bound = ctx[name]
        bound = int(bound) if isinstance(bound, float) and bound.is_integer() else bound
        text = f"{key} must be {words} {bound}, got {shown(value)}"
        return Mistake(path, text, None, set_to(f"a value {words} {bound}"))
    if kind in ("string_too_short", "too_short") and ctx.get("min_length") == 1:
        return Mistake(path, f"{key} must not be empty", None, fix)
    if kind == "string_pattern_mismatch":
        text = f"{key} must match the pattern {ctx['pattern']}, got {shown(value)}"
        return Mistake(path, text, None, fix)
    words = kind_of(annotation) if path else None
    if kind in ("model_type", "model_attributes_type") and _is_model(annotation):
        first = next(iter(annotation.model_fields))
        text = f"{key} is a section and must hold keys, got {shown(value)}"
        return Mistake(path, text, None, f"set its keys one by one, e.g. --set {key}.{first}=...")
    if kind == "literal_error" or kind.endswith(("_type", "_parsing")) or kind in _TYPE_WORDS:
        words = words or _TYPE_WORDS.get(kind) or f"one of {ctx.get('expected', '?')}"
        text = f"{key} must be {words}, got {shown(value)}"
        return Mistake(path, text, _near_value(value, annotation), set_to(words))
    return Mistake(path, f"{key}: {error['msg']}" if key else error["msg"], None, fix)


def _near_value(value: Any, annotation: Any) -> str | None:
    if get_origin(annotation) is Literal and isinstance(value, str):
        return _near(value, [str(a) for a in get_args(annotation)])
    return None


def _value_hint(path: tuple[str | int, ...], value: Any) -> tuple[str | None, str | None]:
    """The suggestion and fix of a validator's mistake: for an unknown ``model.kind``, the
    nearest registered family and the way to register a plug-in."""
    if path == ("model", "kind") and isinstance(value, str):
        from xmc_core.model import registry

        names = list(registry.family_names())
        fix = (
            f"set model.kind to {' or '.join(names)} (a plug-in family is found through "
            f"its distribution's {registry.ENTRY_POINTS!r} entry points)"
        )
        return _near(value, names), fix
    return None, None


def mistakes(
    schema: type[BaseModel] | None, err: ValidationError, prefix: tuple[str, ...] = ()
) -> list[Mistake]:
    """Every mistake of ``err`` (several errors of one key, e.g. the members of ``int |
    float``, are one mistake); ``prefix``: where ``schema`` sits (``('plugins', 'toy')``)."""
    found: dict[tuple[str | int, ...], Mistake] = {}
    for error in err.errors():
        m = mistake(schema, error, prefix)
        found.setdefault(m.key, m)
    return list(found.values())


def source_of(key: tuple[str | int, ...], overrides: list[str], path: Path | None) -> str:
    """Where ``key`` was given: ``in --set K=V`` (the last override of it), ``in FILE line
    N``, or "" (built in code)."""
    names = tuple(p for p in key if isinstance(p, str))
    for item in reversed(overrides):
        parts = tuple(item.partition("=")[0].strip().split("."))
        n = min(len(parts), len(names))
        if n and parts[:n] == names[:n]:
            return f"in --set {item}"
    if path is None:
        return ""
    line = yaml_line(path, names)
    return f"in {path} line {line}" if line else f"in {path}"


def yaml_line(path: Path, names: tuple[str, ...]) -> int | None:
    """The 1-based line of the deepest of ``names`` found in the YAML file ``path``."""
    try:
        node = yaml.compose(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    line = None
    for name in names:
        if not isinstance(node, yaml.MappingNode):
            break
        match = [(k, v) for k, v in node.value if getattr(k, "value", None) == name]
        if not match:
            break
        line, node = match[0][0].start_mark.line + 1, match[0][1]
    return line


def config_error(
    schema: type[BaseModel], err: ValidationError, path: Path | None, overrides: list[str]
) -> ConfigError:
    """The :class:`ConfigError` of a config that failed validation."""
    found = mistakes(schema, err)
    lines = []
    for m in found:
        where = source_of(m.key, overrides, path)
        lines.append(m.text + (f" ({where})" if where else ""))
    if len(found) == 1:
        m = found[0]
        if m.suggestion:
            lines.append(f"  did you mean {m.suggestion}?")
        return ConfigError("\n".join(lines), m.fix or f"correct it ({_DUMP_HINT})")
    text = f"{len(found)} mistakes in the configuration:\n" + "\n".join(
        f"  {line}" + (f"; did you mean {m.suggestion}?" if m.suggestion else "")
        for line, m in zip(lines, found, strict=True)
    )
    return ConfigError(text, f"correct them ({_DUMP_HINT})")


def plain_error(err: ValidationError) -> str:
    """Any other ``ValidationError`` (command-line options, specs built from them), in the same
    words, for the error path of the command lines."""
    lines = [m.text for m in mistakes(_schema_of(err), err)]
    return "\n".join(lines) + "\n  fix: correct the value named above"


def _schema_of(err: ValidationError) -> type[BaseModel] | None:
    """The model class that raised ``err``, when it can be found by its name."""

    def subclasses(cls: type[BaseModel]) -> list[type[BaseModel]]:
        return [cls, *(s for c in cls.__subclasses__() for s in subclasses(c))]

    found = [c for c in subclasses(BaseModel) if c.__name__ == err.title]
    return found[0] if len(found) == 1 else None
