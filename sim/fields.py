"""Typed fields out of one mapping of a scenario document, each error naming file, line and field."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Collection, Iterable
from typing import Any

from sim.clock import parse_duration
from sim.document import ScenarioError, show
from sim.scenario import USAGES, Usage


def did_you_mean(key: str, options: Iterable[str]) -> str:
    """' (did you mean 'events'?)' when `key` looks like a misspelling of one of `options`, else ''.
    The one way every unknown key in a scenario file is given its likely meaning."""
    close = difflib.get_close_matches(key, sorted(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


class _Fields:
    """Reads typed fields out of one mapping, naming file, line and field on any error.

    `keys`, when given, are all the keys the mapping may hold: a mapping with a required key
    declares them, so that `missing` can tell an unknown key (a misspelling of the required one,
    most likely) from one not read yet."""

    def __init__(self, source: str, data: Any, path: str, line: int, keys: Collection[str] = ()) -> None:
        if not isinstance(data, dict):
            raise ScenarioError(source, getattr(data, "line", line), path or "document", f"expected a mapping, got {show(data)}")
        self.source, self.data, self.path = source, data, path
        self.line = getattr(data, "line", line) or line
        self.keys = frozenset(keys)
        self.used: set[str] = set()
        self.asked: set[str] = set()  # every key looked for, present or not: what an unknown key may have meant

    def name(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def line_of(self, key: str) -> int:
        lines = getattr(self.data, "lines", {})
        return lines.get(key, self.line)

    def error(self, key: str, message: str) -> ScenarioError:
        return ScenarioError(self.source, self.line_of(key), self.name(key), message)

    def has(self, key: str) -> bool:
        self.asked.add(key)
        return key in self.data

    def raw(self, key: str, default: Any = None) -> Any:
        self.used.add(key)
        self.asked.add(key)
        return self.data.get(key, default)

    def get(self, key: str, kind: str, default: Any = None, *, check: Callable[[Any], str | None] | None = None) -> Any:
        """`kind` is one of: str, int, bool, duration, pos_duration."""
        self.asked.add(key)
        if key not in self.data:
            return default
        value = self.raw(key)
        if kind == "str":
            if not isinstance(value, str) or not value:
                raise self.error(key, f"expected text, got {show(value)}")
        elif kind == "int":
            if isinstance(value, bool) or not isinstance(value, int):
                raise self.error(key, f"expected a whole number, got {show(value)}")
        elif kind == "bool":
            if not isinstance(value, bool):
                raise self.error(key, f"expected true or false, got {show(value)}")
        elif kind in ("duration", "pos_duration"):
            try:
                value = parse_duration(value) if isinstance(value, str) else None
            except ValueError:
                value = None
            if value is None or (kind == "pos_duration" and value <= 0):
                adjective = "positive " if kind == "pos_duration" else ""
                raise self.error(key, f"expected a {adjective}duration like '61m', got {show(self.data[key])}")
        if check is not None:
            problem = check(value)
            if problem:
                raise self.error(key, problem)
        return value

    def sub(self, key: str, keys: Collection[str] = ()) -> _Fields:
        self.used.add(key)
        self.asked.add(key)
        return _Fields(self.source, self.data[key], self.name(key), self.line_of(key), keys)

    def unknown(self, key: str, options: Iterable[str]) -> ScenarioError:
        """`key: unknown key`, with the one of `options` it looks like a misspelling of."""
        return self.error(key, f"unknown key{did_you_mean(key, (o for o in options if o not in self.data))}")

    def missing(self, key: str, at: str | None = None, message: str = "required") -> ScenarioError:
        """The error for a required `key` that is absent: `key: message` at the mapping's line (or
        `at: message` at `at`'s). An unknown key beside it is the likely cause (`event:` for
        `events:`), so that is named instead, at its own line, with the missing key added unless
        the unknown one looks like its misspelling."""
        assert self.keys, "a mapping with a required key declares its keys"
        field = self.error(at, message) if at else ScenarioError(self.source, self.line, self.name(key), message)
        unknown = [k for k in self.data if k not in self.keys]
        if not unknown:
            return field
        misspelt = next((k for k in unknown if did_you_mean(k, [key])), None)
        if misspelt is not None:
            return self.unknown(misspelt, [key])
        culprit = self.unknown(unknown[0], self.asked)
        return ScenarioError(culprit.source, culprit.line, culprit.field, f"{culprit.message}; {field.field}: {field.message}")

    def done(self) -> None:
        assert not self.keys or self.used <= self.keys, f"keys read but not declared: {sorted(self.used - self.keys)}"
        for key in self.data:
            if key not in self.used:
                raise self.unknown(key, self.asked)


def _one_of(options: tuple[str, ...]) -> Callable[[Any], str | None]:
    return lambda v: None if v in options else f"expected one of {', '.join(options)}, got {show(v)}"


def _at_least(low: int) -> Callable[[Any], str | None]:
    return lambda v: None if v >= low else f"expected at least {low}, got {v}"


def _between(low: int, high: int) -> Callable[[Any], str | None]:
    return lambda v: None if low <= v <= high else f"expected {low} to {high}, got {v}"


def _lowercase_name(value: str) -> str | None:
    return None if re.fullmatch(r"[a-z][a-z0-9_-]*", value) else f"expected a lowercase name, got {show(value)}"


def _usage(f: _Fields, key: str) -> Usage:
    """`small`, `none`, `large` or a token count: what the fake LLM's answer reports."""
    value = f.raw(key)
    if value in USAGES or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return value  # type: ignore[no-any-return]
    raise f.error(key, f"expected {', '.join(USAGES)} or a token count like 120000, got {show(value)}")

