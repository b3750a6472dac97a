"""Commands printed for a person to paste: `reproduce:` lines in scenario headers, reports and
the pytest plugin."""

from __future__ import annotations

import os
import shlex


def command(*words: str) -> str:
    """`sessiongate WORDS…` as one line that works pasted into the shell the run was made from:
    words quoted, and the PYTHONPATH the run had (a MODULE:FACTORY gateway needs it) put first."""
    line = shlex.join(["sessiongate", *words])
    path = os.environ.get("PYTHONPATH")
    return f"PYTHONPATH={shlex.quote(path)} {line}" if path else line
