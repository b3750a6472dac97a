"""Text a gateway (or a scenario file) chose, made safe for a person to read: one function for
every place sessiongate shows it (printed lines, JUnit, the HTML report, scenario-file comments).

A session id, an exception's message or a note's detail may hold anything: a terminal escape that
retitles the window or clears the screen, a carriage return that overwrites the line, a
right-to-left override that reverses what follows, a NUL or a lone surrogate that XML, YAML and
UTF-8 refuse, or fifty megabytes. `readable` writes each such character as its escape (`\\x1b`,
`\\u202e`) and cuts what is too long in the middle, saying how much it left out, so the line
stays short and exact. Plain text comes back unchanged.
"""

from __future__ import annotations

import re

LIMIT = 1000  # characters of one line a person reads; sessiongate's own lines are at most about 500

# C0 and C1 controls and DEL (a tab is kept), lone surrogates, U+FFFE/U+FFFF, the bidirectional
# marks, embeddings, overrides and isolates, and the line and paragraph separators.
_UNSAFE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff"
                     "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\u2028\u2029]")
_UNSAFE_KEEPING_NEWLINES = re.compile(_UNSAFE.pattern.replace("\x0a-\x1f", "\x0b-\x1f"))


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def cut(text: str, limit: int = LIMIT) -> str:
    """`text`, or its start and end with how many characters between them were left out."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} …[{len(text) - head - tail} characters cut]… {text[len(text) - tail:]}"


def readable(text: str, limit: int = LIMIT, lines: bool = False) -> str:
    """`text` with every character that would act on a terminal or that a text file cannot hold
    written as its escape, and cut (`cut`) to about `limit` characters. `lines`: newlines are
    kept and each line is cut on its own (a header, a list of violations)."""
    if lines and "\n" in text:
        return "\n".join(readable(line, limit) for line in text.split("\n"))
    text = cut(text, limit)
    pattern = _UNSAFE_KEEPING_NEWLINES if lines else _UNSAFE
    return pattern.sub(_escape, text) if pattern.search(text) else text


_SPLITS = re.compile(r"[\s#]")  # what ends a word of a line read by `str.split()`, and a comment's start


def word(text: str, limit: int = LIMIT) -> str:
    """`readable(text)` as one word of a line-based file (an expectations file's signature): its
    whitespace, Unicode's included, and `#` written as their escapes too."""
    text = readable(text, limit)
    return _SPLITS.sub(_escape, text) if _SPLITS.search(text) else text


def counted(n: int, noun: str, plural: str = "") -> str:
    """`1 scenario`, `2 scenarios`: a count with its noun in the number it takes."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
