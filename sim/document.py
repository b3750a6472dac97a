"""Scenario text (YAML, safe subset, or JSON) to plain values that remember their lines.

The first half of loading (`sim.loader` types the result into a `Scenario`). Every error is a
`ScenarioError` naming file, line and field. YAML tags that would construct objects are
refused; so are oversized files and documents, and nesting too deep to read. A `.json` file
is read as JSON (not as YAML, which reads some JSON differently).
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from json.decoder import scanstring
from typing import Any

import yaml

from sessiongate import UsageError

MAX_FILE_BYTES = 1 << 20
MAX_NODES = 500_000

class ScenarioError(UsageError):
    """A scenario that cannot be loaded: where, which field, and what was expected."""

    def __init__(self, source: str, line: int, field: str, message: str) -> None:
        self.source, self.line, self.field, self.message = source, line, field, message
        where = f"{source}:{line}" if line else source
        super().__init__(f"{where}: {field}: {message}" if field else f"{where}: {message}")



class Located(dict):  # type: ignore[type-arg]
    """A mapping that remembers the line of each key."""

    line: int = 0
    lines: dict[str, int]


class LocatedList(list):  # type: ignore[type-arg]
    """A sequence that remembers the line of each item."""

    line: int = 0
    lines: list[int]


_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's composer: a 1 MiB file in a second, not minutes


class _Loader(_Base):  # type: ignore[misc,valid-type]
    """Safe composer with no implicit typing: plain scalars stay text until we type them."""

    yaml_implicit_resolvers: dict[str, Any] = {}


class _PyLoader(yaml.SafeLoader):
    """The pure-Python composer, for its error messages on a small file."""

    yaml_implicit_resolvers: dict[str, Any] = {}


_WORDED_ERRORS = 1 << 16  # up to this many characters a bad file is read again for a better message
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _unicode(text: str, source: str, line: int, path: str) -> str:
    """A text must be valid Unicode: a lone surrogate (JSON's "\\ud800") would reach the gateway
    and every report, which cannot encode it."""
    if (bad := _LONE_SURROGATE.search(text)) is not None:
        raise ScenarioError(source, line, path, f"not valid Unicode: a lone surrogate \\u{ord(bad.group()):04x}")
    return text


class _Lines:
    """Line numbers counted by '\\n' alone: YAML's marks also count NEL, U+2028 and U+2029 inside
    a string as line breaks, and every line after one was misnamed."""

    def __init__(self, text: str) -> None:
        self.starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]

    def __call__(self, mark: Any) -> int:
        return bisect_right(self.starts, mark.index)


_STR, _SEQ, _MAP = "tag:yaml.org,2002:str", "tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"
INT_TEXT = re.compile(r"[-+]?\d+", re.ASCII)
FLOAT_TEXT = re.compile(r"[-+]?(\d+\.\d*|\.\d+|\d+)([eE][-+]?\d+)?", re.ASCII)


def _plain(text: str) -> Any:
    """Type a plain (unquoted) scalar: null, bool, int, float, else text. No YAML 1.1 surprises."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if INT_TEXT.fullmatch(text):
        return int(text)
    if FLOAT_TEXT.fullmatch(text):
        return float(text)
    return text


def show(value: Any) -> str:
    """A value as an error message names it: quoted text, cut at 40 characters; 'a mapping'."""
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "..."
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return "a mapping" if isinstance(value, dict) else "a list"
    return repr(value)


def _tag_error(source: str, line: int, path: str, tag: str) -> ScenarioError:
    """Names the tag as it is written: '!!python/object/apply:os.system', '!custom'."""
    shown = "!!" + tag.removeprefix("tag:yaml.org,2002:") if tag.startswith("tag:yaml.org,2002:") else tag
    return ScenarioError(source, line, path, f"YAML tag {shown!r} is not allowed")


def _too_long(source: str, line: int, path: str, digits: str) -> ScenarioError:
    """Python refuses to read an int of more than `sys.get_int_max_str_digits()` digits."""
    return ScenarioError(source, line, path, f"a number of {len(digits)} digits is too long")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _convert(node: yaml.Node, source: str, budget: list[int], stack: set[int], lines: _Lines, path: str = "") -> Any:
    """A composed YAML node -> plain values; `path` names the field in errors ('events[3].at')."""
    budget[0] -= 1
    line = lines(node.start_mark)
    if budget[0] < 0:
        raise ScenarioError(source, line, "", f"document too large (over {MAX_NODES} nodes)")
    if id(node) in stack:
        raise ScenarioError(source, line, path, "recursive alias is not allowed")
    if isinstance(node, yaml.ScalarNode):
        if node.tag != _STR:
            raise _tag_error(source, line, path, node.tag)
        _unicode(node.value, source, line, path)
        if node.style in ("'", '"', "|", ">"):
            return node.value
        try:
            return _plain(node.value)
        except ValueError:
            raise _too_long(source, line, path, node.value) from None
    stack.add(id(node))
    try:
        if isinstance(node, yaml.SequenceNode):
            if node.tag != _SEQ:
                raise _tag_error(source, line, path, node.tag)
            seq = LocatedList(_convert(item, source, budget, stack, lines, f"{path}[{index}]") for index, item in enumerate(node.value))
            seq.line, seq.lines = line, [lines(item.start_mark) for item in node.value]
            return seq
        if isinstance(node, yaml.MappingNode):
            if node.tag != _MAP:
                raise _tag_error(source, line, path, node.tag)
            mapping = Located()
            mapping.line, mapping.lines = line, {}
            for key_node, value_node in node.value:
                key_line = lines(key_node.start_mark)
                key = _convert(key_node, source, budget, stack, lines, path)
                if key == "<<" and key_node.tag == _STR:
                    raise ScenarioError(source, key_line, path, "YAML merge keys are not allowed")
                if not isinstance(key, str):
                    raise ScenarioError(source, key_line, path, f"keys must be text, got {show(key)}")
                if key in mapping:
                    raise ScenarioError(source, key_line, _child(path, key), "duplicate key")
                mapping[key] = _convert(value_node, source, budget, stack, lines, _child(path, key))
                mapping.lines[key] = key_line
            return mapping
    finally:
        stack.discard(id(node))
    raise ScenarioError(source, line, path, f"unsupported YAML node {type(node).__name__}")


_JSON_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?", re.ASCII)
_JSON_WORDS = (
    ("true", True), ("false", False), ("null", None), ("NaN", float("nan")), ("Infinity", float("inf")), ("-Infinity", float("-inf"))
)


def _json_values(text: str, source: str) -> Any:
    """Valid JSON text -> the values `json.loads` gives, with mappings and lists that remember lines.

    JSON is read as JSON, not as YAML: YAML differs on tabs, long keys, NEL and surrogate pairs.
    """
    line_starts = [0, *(i + 1 for i, char in enumerate(text) if char == "\n")]
    budget = [MAX_NODES]

    def line_at(pos: int) -> int:
        return bisect_right(line_starts, pos)

    def space(pos: int) -> int:
        return _JSON_SPACE.match(text, pos).end()  # type: ignore[union-attr]

    def value(pos: int, path: str) -> tuple[Any, int]:
        budget[0] -= 1
        if budget[0] < 0:
            raise ScenarioError(source, line_at(pos), "", f"document too large (over {MAX_NODES} nodes)")
        char = text[pos]
        if char == '"':
            string, end = scanstring(text, pos + 1)
            return _unicode(string, source, line_at(pos), path), end
        if char == "{":
            mapping = Located()
            mapping.line, mapping.lines = line_at(pos), {}
            pos = space(pos + 1)
            while text[pos] != "}":
                key_line = line_at(pos)
                key, pos = scanstring(text, pos + 1)
                _unicode(key, source, key_line, path)
                if key in mapping:
                    raise ScenarioError(source, key_line, _child(path, key), "duplicate key")
                mapping[key], pos = value(space(space(pos) + 1), _child(path, key))  # past the ':'
                mapping.lines[key] = key_line
                pos = space(pos)
                pos = space(pos + 1) if text[pos] == "," else pos
            return mapping, pos + 1
        if char == "[":
            seq = LocatedList()
            seq.line, seq.lines = line_at(pos), []
            pos = space(pos + 1)
            while text[pos] != "]":
                seq.lines.append(line_at(pos))
                item, pos = value(pos, f"{path}[{len(seq)}]")
                seq.append(item)
                pos = space(pos)
                pos = space(pos + 1) if text[pos] == "," else pos
            return seq, pos + 1
        for word, constant in _JSON_WORDS:
            if text.startswith(word, pos):
                return constant, pos + len(word)
        number = _JSON_NUMBER.match(text, pos)
        assert number is not None, "json.loads accepted the text"
        try:
            return (float(number.group()) if number.group(1) or number.group(2) else int(number.group())), number.end()
        except ValueError:
            raise _too_long(source, line_at(pos), path, number.group()) from None

    return value(space(0), "")[0]


def parse_document(text: str, source: str) -> Any:
    """Text of a YAML or JSON document -> plain values that remember their lines. A leading
    UTF-8 byte-order mark is read past, in JSON as in YAML."""
    text = text.removeprefix("\ufeff")
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        raise ScenarioError(source, 0, "", f"file is larger than {MAX_FILE_BYTES} bytes")
    if "\x00" in text:
        raise ScenarioError(source, text.count("\n", 0, text.index("\x00")) + 1, "", "file contains a NUL byte")
    if source.endswith(".json"):
        try:
            json.loads(text, parse_int=len, parse_float=len)  # syntax only: numbers are read below
            return _json_values(text, source)
        except json.JSONDecodeError as err:
            raise ScenarioError(source, err.lineno, "", f"invalid JSON: {err.msg} (column {err.colno})") from None
        except RecursionError:
            raise ScenarioError(source, 0, "", "invalid JSON: nested too deeply") from None
    if (bad := _LONE_SURROGATE.search(text)) is not None:  # libyaml cannot encode one: a UnicodeEncodeError, not a message
        line = text.count("\n", 0, bad.start()) + 1
        raise ScenarioError(source, line, "", f"not valid Unicode: a lone surrogate \\u{ord(bad.group()):04x}")
    try:
        try:
            node = yaml.compose(text, Loader=_Loader)
        except yaml.YAMLError:
            if _Base is yaml.SafeLoader or len(text) > _WORDED_ERRORS:
                raise
            node = yaml.compose(text, Loader=_PyLoader)  # the pure-Python composer words its errors better
    except yaml.reader.ReaderError as err:
        line = text.count("\n", 0, err.position) + 1
        raise ScenarioError(source, line, "", f"invalid YAML: character U+{err.character:04X} is not allowed") from None
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        lines = _Lines(text)
        line = lines(mark) if mark else 0
        problem = err.problem or err.context
        if err.problem == "second occurrence" and err.context and err.context_mark:  # the composer's duplicate anchor
            problem = f"{err.context.removesuffix('; first occurrence')}, first defined on line {lines(err.context_mark)}"
        raise ScenarioError(source, line, "", f"invalid YAML: {problem}") from None
    except yaml.YAMLError as err:
        raise ScenarioError(source, 0, "", f"invalid YAML: {err}") from None
    except RecursionError:
        raise ScenarioError(source, 0, "", "invalid YAML: nested too deeply") from None
    if node is None:
        raise ScenarioError(source, 1, "", "empty document: expected a mapping with 'name' and 'events'")
    try:
        return _convert(node, source, [MAX_NODES], set(), _Lines(text))
    except RecursionError:
        raise ScenarioError(source, 0, "", "invalid YAML: nested too deeply") from None
