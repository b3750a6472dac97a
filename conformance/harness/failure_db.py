"""The failure database: scenarios that failed on a gateway, replayed first until they pass.

As Hypothesis's example database: `fuzz` saves every distinct failure it finds (its shrunk file
when it has one) under `.sessiongate/failures/<gateway>/` in the folder it runs from, and
`run`, `fuzz` and the pytest plugin run a gateway's saved failures before anything else; one
whose every check passes is removed (`suite.passes_every_check`: an expectations file's line
for it, now an unexpected pass, does not keep it). A gateway author who fixed the bug sees it pass first, and one who did
not cannot lose the failure by running other seeds.

Off with `--no-failure-db` (the plugin: `--sessiongate-no-failure-db`) or with
`SESSIONGATE_FAILURE_DB=off`; `SESSIONGATE_FAILURE_DB=DIR` puts it elsewhere.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

ENV = "SESSIONGATE_FAILURE_DB"
DEFAULT = Path(".sessiongate") / "failures"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
_REPRODUCE = re.compile(r"^# reproduce: .*$", re.MULTILINE)


def _folder_name(gateway: str) -> str:
    """A folder name for a gateway name (`reference:never-replies`, `exec:"node gw.js"`)."""
    return _UNSAFE.sub("-", gateway).strip(".-")[:120] or "gateway"


@dataclass(frozen=True)
class FailureDB:
    """One gateway's saved failures: scenario files in one folder, replayed in name order."""

    folder: Path

    @staticmethod
    def open(gateway: str, enabled: bool = True) -> FailureDB | None:
        """The gateway's database, or None when it is off (by flag or environment)."""
        where = os.environ.get(ENV, "")
        if not enabled or where.lower() in ("off", "0", "no", "false"):
            return None
        return FailureDB((Path(where) if where else DEFAULT) / _folder_name(gateway))

    def saved(self) -> list[Path]:
        return sorted(self.folder.glob("*.yaml")) if self.folder.is_dir() else []

    def save(self, path: Path, gateway: str) -> Path:
        """Keep a copy of a failing scenario file (written whole, then renamed into place), its
        `# reproduce:` line naming the copy: the file it was copied from may be gone."""
        from conformance.harness.shell import command

        self.folder.mkdir(parents=True, exist_ok=True)
        target = self.folder / path.name
        staged = target.with_name(f".{target.name}.tmp")
        line = f"# reproduce: {command('run', str(target), '--gateway', gateway)}"
        text = path.read_text(encoding="utf-8")
        staged.write_text(_REPRODUCE.sub(lambda _: line, text, count=1), encoding="utf-8")
        os.replace(staged, target)
        return target

    def forget(self, path: Path) -> None:
        """A saved failure that passes now: gone, and the folder with it when it is empty."""
        path.unlink(missing_ok=True)
        if self.folder.is_dir() and not any(self.folder.iterdir()):
            self.folder.rmdir()

    def shown(self) -> str:
        return str(self.folder)
