"""Typed reasoner settings: each reasoner declares a frozen dataclass of its settings.

:func:`parse_settings` reads the dataclass's field types, so ``--set width=5`` from the
command line and ``width=5`` from Python are checked the same way: an unknown key, or a
value that does not read as the field's type (or is not one of a ``Literal``'s choices),
is a :class:`~localkg.errors.SettingsError` naming the reasoner, the setting and what is
allowed. A typo such as ``skip_reverse=ture`` must not silently mean False.

Every numeric setting also declares the values it allows, as a :class:`Range` in its type
(``width: PositiveInt = 3``): a beam of -5 or a depth of 0 does not fail, it quietly answers
nothing, so it is refused like a typo.
"""
from __future__ import annotations

import dataclasses
import math
import typing
from typing import Annotated, Any, Literal, Mapping, TypeVar

from localkg.errors import SettingsError

S = TypeVar("S")

_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


@dataclasses.dataclass(frozen=True)
class Range:
    """The values a numeric setting allows: from ``low`` to ``high`` (None: unbounded), ``low``
    itself excluded when ``above``. A bound may be the name of another setting of the same
    reasoner (ppoga's ``min_steps`` is at most its ``max_steps``)."""

    low: float | str | None = None
    high: float | str | None = None
    above: bool = False

    def admits(self, value: float, settings: Any) -> bool:
        low, high = self._bound(self.low, settings), self._bound(self.high, settings)
        if low is not None and (value <= low if self.above else value < low):
            return False
        return high is None or value <= high

    def describe(self, settings: Any) -> str:
        """The range in words, bounds that name a setting with its value: ``from 1 to max_steps (5)``."""
        low, high = self._words(self.low, settings), self._words(self.high, settings)
        if low is not None and high is not None:
            return f"{'above' if self.above else 'from'} {low} {'and at most' if self.above else 'to'} {high}"
        if low is not None:
            return f"{'above' if self.above else 'at least'} {low}"
        return f"at most {high}" if high is not None else "any value"

    @staticmethod
    def _bound(bound: float | str | None, settings: Any) -> float | None:
        return getattr(settings, bound) if isinstance(bound, str) else bound

    @staticmethod
    def _words(bound: float | str | None, settings: Any) -> str | None:
        if isinstance(bound, str):
            return f"{bound} ({getattr(settings, bound)})"
        return None if bound is None else f"{bound:g}"


#: The ranges most settings share: counts and sizes (at least 1), counts where 0 turns a step off,
#: probabilities and weights between 0 and 1, weights and penalties of any size, temperatures.
PositiveInt = Annotated[int, Range(1)]
NonNegativeInt = Annotated[int, Range(0)]
UnitFloat = Annotated[float, Range(0, 1)]
NonNegativeFloat = Annotated[float, Range(0)]
PositiveFloat = Annotated[float, Range(0, above=True)]


@dataclasses.dataclass(frozen=True)
class NoSettings:
    """For a reasoner without settings."""


def parse_settings(reasoner: str, schema: type[S], values: Mapping[str, Any]) -> S:
    """An instance of ``schema`` with ``values`` (strings or typed values) over its defaults."""
    types = typing.get_type_hints(schema, include_extras=True)
    names = [f.name for f in dataclasses.fields(schema)]  # type: ignore[arg-type]
    unknown = sorted(set(values) - set(names))
    if unknown:
        raise SettingsError(f"{reasoner} has no setting {', '.join(unknown)}; settings: {', '.join(sorted(names))}")
    settings = schema(**{key: _read(reasoner, key, types[key], value) for key, value in values.items()})
    for key, allowed in declared_ranges(schema).items():
        value = getattr(settings, key)
        if not allowed.admits(value, settings):
            _refuse(reasoner, key, f"{_kind_words(types[key])} {allowed.describe(settings)}", value)
    return settings


def declared_ranges(schema: type) -> dict[str, Range]:
    """The :class:`Range` each setting of ``schema`` declares, by name (settings without one are absent)."""
    ranges = {}
    for key, kind in typing.get_type_hints(schema, include_extras=True).items():
        declared = [m for m in getattr(kind, "__metadata__", ()) if isinstance(m, Range)]
        if declared:
            ranges[key] = declared[0]
    return ranges


def describe(schema: type) -> dict[str, Any]:
    """Each setting's default, by name (for reports and listings)."""
    return dataclasses.asdict(schema())


def _read(reasoner: str, key: str, kind: Any, value: Any) -> Any:
    kind = _base_type(kind)
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
        return _read_float(reasoner, key, value, text)
    if kind is str and isinstance(value, str):
        return value
    return _refuse(reasoner, key, getattr(kind, "__name__", str(kind)), value)


def _read_float(reasoner: str, key: str, value: Any, text: str | None) -> float:
    """A finite number (``nan`` compares false with every bound, so it would pass any range)."""
    number = None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    elif text is not None:
        try:
            number = float(text)
        except ValueError:
            pass
    if number is None or not math.isfinite(number):
        return _refuse(reasoner, key, "a number", value)
    return number


def _base_type(kind: Any) -> Any:
    """``int`` of ``Annotated[int, Range(1)]``; any other type as it is."""
    return typing.get_args(kind)[0] if typing.get_origin(kind) is Annotated else kind


def _kind_words(kind: Any) -> str:
    return "a whole number" if _base_type(kind) is int else "a number"


def _refuse(reasoner: str, key: str, allowed: str, value: Any) -> Any:
    raise SettingsError(f"{reasoner} setting {key}: expected {allowed}, got {value!r}")
