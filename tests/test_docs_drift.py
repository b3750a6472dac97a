"""Prose the docs write about the tree, held to the tree: names a table grew past, lists that
lost a member, options a command does not have, links to nowhere, counts that went stale (the
docs audit of 2026-12-06 found each of these, none of them held by a test)."""

from __future__ import annotations

import argparse
import ast
import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
UNITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
         "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
NUMBERS = {word: n for n, word in enumerate(UNITS)} | {
    f"{tens}-{UNITS[u]}" if u else tens: 20 + 10 * t + u for t, tens in enumerate(TENS) for u in range(10)}


def _read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _prose(text: str) -> str:
    """`text` without its fenced code blocks."""
    return re.sub(r"^[ \t]*```[^\n]*\n.*?^[ \t]*```[^\n]*$", "", text, flags=re.DOTALL | re.MULTILINE)


def _code(text: str) -> Iterator[str]:
    """Each line of a fenced block (continuation lines joined) and each inline code span (joined
    across line breaks) of `text`."""
    for block in re.findall(r"^[ \t]*```[^\n]*\n(.*?)^[ \t]*```", text, flags=re.DOTALL | re.MULTILINE):
        yield from block.replace("\\\n", " ").splitlines()
    yield from (span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", _prose(text)))


def _commands() -> dict[str, argparse.ArgumentParser]:
    from conformance.cli import build_parser

    [sub] = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(sub.choices)


# --- docs/zoo.md -------------------------------------------------------------------------------

ZOO = _read(ROOT / "docs" / "zoo.md")
ZOO_ROWS = [line.split("|") for line in ZOO.splitlines() if re.match(r"^\| `[a-z]", line)]


def test_the_zoo_table_has_a_row_for_each_variant_and_no_other() -> None:
    """The variant table and `VARIANTS` drift apart when a variant is added or removed without its row."""
    from reference_impl.variants import VARIANTS

    names = [cells[1].strip().strip("`") for cells in ZOO_ROWS]
    assert sorted(names) == sorted(VARIANTS), \
        f"docs/zoo.md: no row for {sorted(set(VARIANTS) - set(names))}, a row for no variant or twice: " \
        f"{sorted({n for n in names if n not in VARIANTS or names.count(n) > 1})}"


def test_the_zoo_counts_and_names_the_variants_the_audits_found() -> None:
    """"Thirty-eight come from the audits" stayed while the table grew to 44 rows citing an audit."""
    from reference_impl.variants import VARIANTS

    audited = {cells[1].strip().strip("`") for cells in ZOO_ROWS if "audit" in cells[2]}
    said = re.search(r"^(\S+) come from the audits of lazy gateways", ZOO, flags=re.MULTILINE)
    assert said is not None, "docs/zoo.md: the paragraph on the audits' variants is gone"
    assert NUMBERS.get(said.group(1).lower()) == len(audited), \
        f"docs/zoo.md says {said.group(1)} variants come from the audits; {len(audited)} rows cite one"
    paragraph = ZOO[said.start():ZOO.index("\n\n", said.start())]
    named = set(re.findall(r"`([a-z][a-z0-9-]*)`", paragraph)) & set(VARIANTS)
    assert named == audited, f"docs/zoo.md's audit paragraph: not named {sorted(audited - named)}, " \
                             f"named but not from an audit {sorted(named - audited)}"


def test_the_zoo_prose_names_variants_not_table_positions() -> None:
    """"The last five", "the three before the last": rows appended since pointed them at other variants."""
    prose = "\n".join(line for line in _prose(ZOO).splitlines() if not line.startswith("|"))
    positional = re.findall(r"\bThe (?:last|first)\b[^.;:]*|\b(?:two|three|four|five|six) before the last\b", prose)
    assert not positional, f"docs/zoo.md points at table positions: {positional}; name the variants"


# --- the README's selftest modes ---------------------------------------------------------------

def test_the_readme_lists_every_selftest_mode() -> None:
    """The README's `selftest:a|b|…` list had stopped at hides-routing, two modes short."""
    from reference_impl.selftest import MODES

    said = re.search(r"`selftest:([a-z|-]+)`", _read(README))
    assert said is not None, "README.md: the selftest: list is gone"
    assert sorted(said.group(1).split("|")) == sorted(MODES), \
        f"README.md's selftest: list: {said.group(1)!r}; the modes are {'|'.join(MODES)}"


# --- links ---------------------------------------------------------------------------------------

def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: its text lowercased, formatting and punctuation dropped,
    each space a hyphen."""
    text = re.sub(r"\[([^]]*)\]\([^)]*\)", r"\1", heading)
    text = re.sub(r"[`*]", "", text).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _prose(_read(path)), flags=re.MULTILINE):
        slug = _slug(heading)
        anchors.add(f"{slug}-{seen[slug]}" if slug in seen else slug)
        seen[slug] = seen.get(slug, 0) + 1
    return anchors


def test_every_relative_link_and_anchor_resolves() -> None:
    """No link of README.md or docs/*.md was broken at the audit, and nothing kept one from breaking."""
    broken = []
    for path in DOCS:
        prose = re.sub(r"`[^`]*`", "", _prose(_read(path)))
        for target in re.findall(r"\]\(([^)\s]+)\)", prose):
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            file, _, anchor = target.partition("#")
            where = (path.parent / file).resolve() if file else path
            if not where.exists():
                broken.append(f"{path.name}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
                broken.append(f"{path.name}: {target} (no such heading)")
    assert not broken, "broken links:\n" + "\n".join(broken)


# Our own top-level folders and packages: a path or module a doc names under one of them is
# ours and must exist (Hermes's `gateway/run.py` and OpenClaw's `src/…` are theirs, read from
# their source, and are not held here).
OUR_FOLDERS = ("sim", "conformance", "reference_impl", "reports", "tests", "bench", "docs", "examples", ".ci")
OUR_PACKAGES = ("sim", "conformance", "reference_impl", "reports")


def _named(text: str) -> Iterator[str]:
    """Each path under one of our folders and each dotted name under one of our packages that
    a code span of `text` gives (a placeholder such as `iN_name.py`, a glob, `<…>`: not a name)."""
    for span in _code(text):
        for token in span.split():
            name = re.split(r"::|:(?=\w)", token)[0].strip("'\"").rstrip(",.;)").lstrip("(").split("#")[0]
            if re.search(r"[*<>{}\[\]]|iN_|/X\.|\.\.\.|…", name):
                continue
            if ("/" in name and name.split("/")[0] in OUR_FOLDERS) or re.fullmatch(rf"({'|'.join(OUR_PACKAGES)})(\.\w+)+", name):
                yield name


def _missing(name: str) -> str | None:
    """Why `name` (a path, or a module and maybe one of its attributes) is not in the tree."""
    if "/" in name:
        return None if (ROOT / name).exists() else "no such file"
    import importlib

    parts = name.split(".")
    k = len(parts)
    while k and not ((ROOT / "/".join(parts[:k])).with_suffix(".py").exists() or (ROOT / "/".join(parts[:k]) / "__init__.py").exists()):
        k -= 1
    if k == 0:
        return "no such module"
    if k == len(parts):
        return None
    module = importlib.import_module(".".join(parts[:k]))
    return None if hasattr(module, parts[k]) else f"{'.'.join(parts[:k])} has no {parts[k]}"


def test_every_path_and_module_of_ours_a_doc_names_exists() -> None:
    """A doc naming a module the restructure moved (docs/hermes.md named three) or a file since
    renamed sends a reader nowhere."""
    gone = [f"{path.name}: `{name}` ({why})" for path in DOCS for name in sorted(set(_named(_read(path))))
            if (why := _missing(name)) is not None]
    assert not gone, "names of nothing in the tree:\n" + "\n".join(gone)


def test_a_moved_module_or_renamed_file_is_found() -> None:
    """The check above can fail: the names the restructure left behind in docs/hermes.md, a
    function a module lost, a file gone; and Hermes's own paths and placeholders are not ours."""
    text = ("`conformance.hermes_adapter` and `conformance.harness.calls.no_such_thing` and `bench/gone.py:12` "
            "and `conformance.harness.calls.exit_is_ours` and `gateway/run.py` and `bench/X.py`")
    named = list(_named(text))
    assert named == ["conformance.hermes_adapter", "conformance.harness.calls.no_such_thing", "bench/gone.py",
                     "conformance.harness.calls.exit_is_ours"]
    assert [_missing(name) for name in named] == ["conformance has no hermes_adapter", "conformance.harness.calls has no no_such_thing",
                                                  "no such file", None]


# --- command-line options ------------------------------------------------------------------------

def test_every_option_a_doc_gives_a_command_exists() -> None:
    """`sessiongate run --findings-ok` read as documented while only fuzz has it (exit 2)."""
    commands = _commands()
    wrong = []
    for path in DOCS:
        for span in _code(_read(path)):
            for cmd, rest in re.findall(r"(?:^|[\s/])sessiongate ([a-z][a-z-]*)(.*?)(?=$|[;|&]{1,2}\s|\bsessiongate )",
                                        span):
                if cmd not in commands:
                    continue  # prose: "sessiongate goes on"
                rest = re.sub(r"'[^']*'|\"[^\"]*\"", "", rest)  # an exec: command's own options
                known = commands[cmd]._option_string_actions
                wrong += [f"{path.name}: sessiongate {cmd} {option}"
                          for option in re.findall(r"(?:^|[\s\[(])(--?[A-Za-z][\w-]*)", rest) if option not in known]
    assert not wrong, "options the command does not have:\n" + "\n".join(wrong)


@pytest.mark.parametrize("command", sorted(_commands()))
def test_the_readme_row_of_each_command_names_each_option(command: str) -> None:
    """`run --budget` was in no doc at all, the fuzz row left out --findings-ok and --no-shrink,
    and zoo, explore, coverage, replay and update-expectations rows left out options too."""
    row = next(line for line in _read(README).splitlines() if line.startswith(f"| `sessiongate {command} "))
    said = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", row))
    missing = [action.option_strings[-1] for action in _commands()[command]._actions
               if action.option_strings and action.help != argparse.SUPPRESS
               and not isinstance(action, argparse._HelpAction) and not set(action.option_strings) & said]
    assert not missing, f"README.md's `sessiongate {command}` row does not name {missing}"


def test_every_option_of_every_command_says_what_it_does() -> None:
    """`zoo --report`, `zoo --profile` and `--gateway` of explore and coverage printed no help."""
    silent = [f"{name} {action.option_strings[-1]}" for name, command in _commands().items() for action in command._actions
              if action.option_strings and not action.help]
    assert not silent, f"options with no help text: {silent}"


# --- counts ---------------------------------------------------------------------------------------

def test_no_doc_quotes_the_crash_note_with_literal_counts() -> None:
    """contract.md quoted `note: 13 of 85 scenarios crash …` while the reference printed 14 of 102."""
    stale = [f"{path.name}: {m.group(0)}" for path in DOCS
             for m in re.finditer(r"note: \d+ of \d+ scenarios crash", _prose(_read(path)))]
    assert not stale, f"write the note as `note: N of M scenarios crash …` (a fenced block a test runs may quote it): {stale}"


def test_the_minimal_example_is_about_the_size_the_guide_says() -> None:
    """gateway-authors.md said "about 280 lines of code" of a file grown to 383 (531 in all)."""
    path = ROOT / "examples" / "minimal_gateway.py"
    source = _read(path)
    docstrings = set()
    for node in ast.walk(ast.parse(source)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            docstrings.update(range(body[0].lineno, body[0].end_lineno + 1))
    code = set()
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                              tokenize.ENDMARKER):
            code.update(range(token.start[0], token.end[0] + 1))
    said = re.search(r"minimal_gateway\.py\): about (\d+) lines of code \((\d+) with comments and docstrings\)",
                     _read(ROOT / "docs" / "gateway-authors.md"))
    assert said is not None, "docs/gateway-authors.md: the example's size is gone or reworded"
    for figure, actual in ((int(said.group(1)), len(code - docstrings)), (int(said.group(2)), len(source.splitlines()))):
        assert abs(figure - actual) <= actual // 10, \
            f"docs/gateway-authors.md says about {figure} lines of examples/minimal_gateway.py; it has {actual}"
