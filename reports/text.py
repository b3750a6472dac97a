"""HTML text for the reports: `sessiongate.text.readable` (no control character, nothing of
megabytes), then HTML-escaped, quotes included, so it is safe in an element or an attribute."""

from __future__ import annotations

from html import escape as _html_escape

from sessiongate.text import readable


def escape(text: str, lines: bool = False) -> str:
    """`text` as HTML text or an attribute value; `lines`: its newlines kept (a `<pre>`)."""
    return _html_escape(readable(text, lines=lines))
