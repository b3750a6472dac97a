"""Commands printed for a person to paste: `reproduce:` lines in scenario headers, reports and
the pytest plugin."""

from __future__ import annotations

import functools
import os
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path


def command(*words: str) -> str:
    """`sessiongate WORDS…` as one line that works pasted into the shell the run was made from:
    words quoted, and the PYTHONPATH the run had put first, with the folder a MODULE:FACTORY
    gateway was imported from added when a fresh `sessiongate` would not search it (put on the
    path by pytest's `pythonpath` setting or its rootdir, or by `python -m` from that folder)."""
    line = shlex.join(["sessiongate", *words])
    entries = [entry for entry in os.environ.get("PYTHONPATH", "").split(os.pathsep) if entry]
    gateway = words[words.index("--gateway") + 1] if "--gateway" in words[:-1] else ""
    if (folder := _import_folder(gateway)) is not None and not _on(folder, entries):
        entries.append(_shown(folder))
    return f"PYTHONPATH={shlex.quote(os.pathsep.join(entries))} {line}" if entries else line


def _import_folder(gateway: str) -> Path | None:
    """The folder a MODULE:FACTORY gateway's top package was imported from, if a `sessiongate`
    started afresh (without PYTHONPATH) would not find it there; None for a built-in or
    registered name, an `exec:` command, or a module not imported in this process."""
    head, sep, _arg = gateway.partition(":")
    if not sep or gateway.startswith("exec:"):
        return None
    from conformance.harness.registry import registered

    if head in registered():
        return None
    top = head.partition(".")[0]
    file = getattr(sys.modules.get(top), "__file__", None)
    if not isinstance(file, str):
        return None
    here = Path(file).resolve()
    found = _fresh_origin(top)
    if found and Path(found).resolve() == here:
        return None
    return here.parent.parent if here.name == "__init__.py" else here.parent


def _on(folder: Path, entries: Sequence[str]) -> bool:
    return any(Path(entry).resolve() == folder for entry in entries)


@functools.cache
def _fresh_origin(top: str) -> str:
    """Where this interpreter started afresh, without PYTHONPATH and without the current folder
    (`-P`), as the `sessiongate` script starts, finds module `top` ("" where it finds none)."""
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    code = "import importlib.util, sys; spec = importlib.util.find_spec(sys.argv[1]); print(spec and spec.origin or '')"
    try:
        return subprocess.run([sys.executable, "-P", "-c", code, top], env=env, capture_output=True, text=True,
                              timeout=30, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def _shown(folder: Path) -> str:
    """`folder` relative to the working directory when under it (`.` for it): the line stays
    short and pastes from there."""
    try:
        relative = folder.relative_to(Path.cwd().resolve())
    except ValueError:
        return str(folder)
    return str(relative) if relative.parts else "."
