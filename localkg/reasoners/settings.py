"""Typed reasoner settings: each reasoner declares a frozen dataclass of its settings.

:func:`parse_settings` reads the dataclass's field types, so ``--set width=5`` from the
command line and ``width=5`` from Python are checked the same way: an unknown key, or a
value that does not read as the field's type (or is not one of a ``Literal``'s choices),
is a :class:`~localkg.errors.SettingsError` naming the reasoner, the setting and what is
allowed. A typo such as ``skip_reverse=ture`` must not silently mean False.
"""
from __future__ import annotations

import dataclasses
import typing
from typing import Any, Literal, Mapping, TypeVar

from localkg.errors import SettingsError

S = TypeVar("S")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """For a reasoner without settings."""


def parse_settings(reasoner: str, schema: type[S], values: Mapping[str, Any]) -> S:
    """An instance of ``schema`` with ``values`` (strings or typed values) over its defaults."""
    types = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise SettingsError(f"{reasoner} has no setting {', '.join(unknown)}; settings: {', '.join(sorted(names))}")
    return schema(**{key: _read(reasoner, key, types[key], value) for key, value in values.items()})


def describe(schema: type) -> dict[str, Any]:
    """Each setting's default, by name (for reports and listings)."""
    return dataclasses.asdict(schema())


def _read(reasoner: str, key: str, kind: Any, value: Any) -> Any:
    if typing.get_origin(kind) is Literal:
        choices = typing.get_args(kind)
        if value in choices:
            return value
        return _refuse(reasoner, key, f"one of {', '.join(map(str, choices))}", value)
    text = value.strip().lower() if isinstance(value, str) else None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if text in _TRUE or text in _FALSE:
            return text in _TRUE
        return _refuse(reasoner, key, "true or false", value)
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
        if text is not None and text.lstrip("+-").isdigit():
            return int(text)
        return _refuse(reasoner, key, "a whole number", value)
    if kind is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        try:
            return float(text) if text is not None else _refuse(reasoner, key, "a number", value)
        except ValueError:
            return _refuse(reasoner, key, "a number", value)
    if kind is str and isinstance(value, str):
        return value
    return _refuse(reasoner, key, getattr(kind, "__name__", str(kind)), value)


def _refuse(reasoner: str, key: str, allowed: str, value: Any) -> Any:
    raise SettingsError(f"{reasoner} setting {key}: expected {allowed}, got {value!r}")
