"""The front end's conventions: `python -m sessiongate --version`, a purpose and an example in
every command's --help, every command defined in conformance/cli, the exit codes in the README."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from conformance.cli import COMMANDS, build_parser, main
from sessiongate import ExitCode, __version__

ROOT = Path(__file__).resolve().parents[1]


def test_python_dash_m_sessiongate_prints_the_version() -> None:
    done = subprocess.run([sys.executable, "-m", "sessiongate", "--version"], capture_output=True, text=True,
                          cwd=ROOT, timeout=60, check=False)
    assert (done.returncode, done.stdout.strip()) == (0, f"sessiongate {__version__}")


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_every_command_help_says_its_purpose_and_gives_an_example(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    out = capsys.readouterr().out
    _, purpose, example = COMMANDS[command]
    assert stop.value.code == 0
    assert purpose[0].upper() + purpose[1:] + "." in out
    assert f"example:\n  {example}" in out and example.startswith(f"sessiongate {command}")


def test_every_command_is_defined_in_the_front_end() -> None:
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(COMMANDS)
    assert all(module.startswith("conformance.cli.") for module, _, _ in COMMANDS.values())


def test_the_readme_lists_every_exit_code() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("Exit codes (`sessiongate.ExitCode`"):]
    section = section[:section.index("\n\n")]
    assert all(str(int(code)) in section for code in ExitCode)
