"""`sessiongate`: the command-line front end, one module per command.

    sessiongate run [PATHS…] [--gateway NAME] [--table] [--report DIR]   (default: the catalog, reference)
    sessiongate replay FILE | --seed N [--gateway NAME]                   (the whole timeline of observations)
    sessiongate zoo [--matrix] [--report DIR] [--generated --seeds A:B]   (every bug-zoo variant must be caught)
    sessiongate fuzz --seeds A:B [-n auto] [--shard I/N]                  (generated scenarios; failures shrunk)
    sessiongate shrink FILE | explore --depth D | report RUN_DIR | coverage | update-expectations
    sessiongate compare RUN_DIR… [--out FILE]                            (saved runs side by side, one HTML page)

Every command is listed in COMMANDS; its module (conformance/cli/<command>.py) adds its
arguments and runs it. Only the command named is imported, so `sessiongate --help` imports no
simulator. Exit codes: `sessiongate.ExitCode` (README, "Exit codes").
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import importlib
import os
import shlex
import signal
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from sessiongate import ExitCode, SessiongateError, UsageError, __version__, interrupted_code

# command -> (its module, a line of purpose, an example)
COMMANDS: dict[str, tuple[str, str, str]] = {
    "run": ("conformance.cli.run", "run scenarios (default: the catalog) against a gateway",
            "sessiongate run --gateway reference:sync-after-end --report out/"),
    "update-expectations": ("conformance.cli.update_expectations", "rewrite a gateway's expectations file from a run",
                            "sessiongate update-expectations --gateway hermes --expectations hermes.txt"),
    "replay": ("conformance.cli.replay", "print a scenario's whole timeline of observations",
               "sessiongate replay 12-heal-fk-row-present --gateway reference"),
    "zoo": ("conformance.cli.zoo", "run every bug-zoo variant against the catalog; all must be caught",
            "sessiongate zoo --matrix"),
    "fuzz": ("conformance.cli.fuzz", "run generated scenarios (seeds) against a gateway",
             "sessiongate fuzz --seeds 0:2000 -n auto --gateway reference"),
    "shrink": ("conformance.cli.shrink", "shrink a failing scenario file, keeping one check's failure",
               "sessiongate shrink fuzz-failures/gen-17.yaml --gateway reference:sync-after-end"),
    "explore": ("conformance.cli.explore", "bounded exhaustive exploration of a small alphabet of steps",
                "sessiongate explore --depth 4"),
    "report": ("conformance.cli.report", "re-render every report in RUN_DIR from its saved logs",
               "sessiongate report out/"),
    "compare": ("conformance.cli.compare", "one HTML page comparing saved runs side by side (scenario × run)",
                "sessiongate compare out/reference out/openclaw-2026.9.6 --out compare.html"),
    "coverage": ("conformance.cli.coverage", "lifecycle coverage of scenarios (default: the catalog)",
                 "sessiongate coverage --markdown"),
}


class Parser(argparse.ArgumentParser):
    """argparse's parser, exiting with ExitCode.USAGE on a malformed command line."""

    def error(self, message: str):  # type: ignore[no-untyped-def]
        self.print_usage(sys.stderr)
        if message.startswith("unrecognized arguments") and any(word.startswith("exec:") for word in sys.argv):
            message += f" ({SPLIT_EXEC})"
        print(f"{self.prog}: error: {one_line(message)}", file=sys.stderr)
        raise SystemExit(ExitCode.USAGE)


SPLIT_EXEC = "an exec: command of several words is one shell word: --gateway 'exec:node gw.js'"
_INTERPRETERS = frozenset({"node", "python", "python3", "deno", "bun", "ruby", "sh", "bash", "java", "dotnet", "go"})


def split_exec(words: Sequence[str]) -> str | None:
    """`--gateway exec:node gw.js` unquoted: the shell split the command, and `run` would take
    `gw.js` for a scenario file (`invalid YAML`). The words as they were meant, if they look so."""
    for i, word in enumerate(words[:-1]):
        head = word.removeprefix("exec:")
        if word.startswith("exec:") and " " not in head and not words[i + 1].startswith("-") and (
                head in _INTERPRETERS or words[i + 1].endswith((".js", ".mjs", ".cjs", ".ts", ".py", ".rb", ".sh", ".jar"))):
            return f"the shell split the exec: command; quote it as one word: --gateway {shlex.quote(word + ' ' + words[i + 1])}"
    return None


def one_line(message: str) -> str:
    """An error as one line: an argument or a path given with a newline or an escape in it
    (argparse echoes `unrecognized arguments` as typed) is shown escaped, never split."""
    from sessiongate.text import readable

    return readable(message, limit=1 << 20)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Every command's parser; with `only`, the arguments of that command alone (the others keep
    their line of purpose, which is all `--help` shows of them)."""
    parser = Parser(prog="sessiongate", description="Deterministic session-lifecycle conformance for chat-agent gateways.")
    parser.add_argument("--version", action="version", version=f"sessiongate {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    for name, (module, purpose, example) in COMMANDS.items():
        command = sub.add_parser(name, help=purpose, description=purpose[0].upper() + purpose[1:] + ".",
                                 epilog=f"example:\n  {example}", formatter_class=argparse.RawDescriptionHelpFormatter)
        if only is None or only == name:
            importlib.import_module(module).add_arguments(command)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    named = next((word for word in words if not word.startswith("-")), "")
    parser = build_parser(named if named in COMMANDS else "")
    if split := split_exec(words):
        parser.error(split)
    args = parser.parse_args(words)
    for stream in (sys.stdout, sys.stderr):  # a lone surrogate in a name (JSON "\ud800") prints escaped, not a traceback
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            reconfigure(errors="backslashreplace")
    from conformance.cli import leftovers
    from conformance.harness.errors import raise_interrupted

    # The harness's own handler for both: a gateway's KeyboardInterrupt is its error, not a Ctrl-C.
    previous = {signum: signal.signal(signum, raise_interrupted) for signum in (signal.SIGINT, signal.SIGTERM)}
    census = leftovers.descendants()  # what runs now is not the gateway's to answer for
    try:
        code = int(args.func(args))
        sys.stdout.flush()  # inside the try: a reader that left shows here, not at interpreter exit
        return code
    except UsageError as err:  # a scenario file's error and an unknown gateway are UsageErrors too
        if err.usage:  # not for a gateway's own code that raised: the banner would say the command line is wrong
            parser.print_usage(sys.stderr)
        print(f"sessiongate: error: {one_line(str(err))}", file=sys.stderr)
        return ExitCode.USAGE
    except SessiongateError as err:  # one of its own that a command does not word itself (a worker process died)
        print(f"sessiongate: {err}", file=sys.stderr)
        return ExitCode.FAILED
    except KeyboardInterrupt as stop:
        return interrupted_code(stop)
    except BrokenPipeError:  # `sessiongate replay … | head`: the reader left; no traceback, and none at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return ExitCode.BROKEN_PIPE
    finally:
        left = leftovers.end_new(census)  # or one holding our stdout keeps `sessiongate … | tee` waiting
        if left:
            print(leftovers.describe(left), file=sys.stderr)
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def entry() -> NoReturn:
    """The `sessiongate` command (and `python -m sessiongate`): `main`'s exit code, whatever an
    in-process gateway left to run at exit. The process's `atexit` handlers run as at any exit
    (files flushed, temporary folders removed), but one that calls `os._exit` or `sys.exit`
    there cannot choose the status: a gateway module that registered `os._exit(0)` made a
    failing run exit 0. What such a handler raised is said in one line each."""
    code = main()
    real = os._exit

    def refused(status: int) -> NoReturn:
        raise SystemExit(status)

    def said(unraisable: Any) -> None:
        err = unraisable.exc_value
        what = f"os._exit/sys.exit({err.code!r})" if isinstance(err, SystemExit) else f"{type(err).__name__}: {one_line(str(err))}"
        print(f"sessiongate: at exit, {unraisable.object!r} called {what}: ignored", file=sys.__stderr__)

    os._exit, sys.unraisablehook = refused, said  # type: ignore[assignment]
    try:
        atexit._run_exitfuncs()
    finally:
        os._exit, sys.unraisablehook = real, sys.__unraisablehook__
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    real(code)
