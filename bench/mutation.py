"""Mutation score of the checks: how many small bugs put into the reference gateway they catch.

A mutant is `reference_impl` with one small change, made by the small AST mutator below (ours,
not mutmut: deterministic, and nothing to install):

  arith      an arithmetic operator swapped (+ and -, * and //, | and &, in `+=` too)
  compare    a comparison negated (< and >=, == and !=, in and not in, is and is not)
  boundary   a comparison moved by one (< and <=, > and >=)
  constant   an integer constant +1 and -1, True and False swapped
  return     a returned value replaced by None (and negated, in a function that returns bool)
  condition  the test of an if, while, conditional expression or comprehension negated
  not        a `not` dropped
  boolop     `and` and `or` swapped
  call       a call made as a statement (a method call, mostly) removed
  delete     any other statement in a function body removed

Each runs in a child process with the mutated package first on PYTHONPATH: the catalog, then
N generated seeds, against `reference`, stopping at the first scenario that does not pass, under
a wall-clock cap. Against the unmutated reference on every scenario, a mutant is

  no behaviour change  same verdicts and same observation-log digest on every scenario (this
                       includes the mutants on lines no scenario reaches: they are not run)
  killed               some verdict is not pass, or the gateway errored, or the cap was hit
  survivor             behaviour changed and every check passed: a gap in the checks, unless
                       bench/mutation_allowed.txt (signature  # reason) says why it is allowed

The kill rate is over the mutants that change behaviour: killed / (killed + survivors). Same
tree, same output bytes (timings go to stderr); only a mutant near the cap could vary.

Run: python bench/mutation.py [--seeds 300] [-j N] [--cap 60] [--mutants FILE]
     [--write-survivors FILE] [--list] [--quick]
`--mutants FILE` runs only the mutants a file names (one signature a line, `  # …` ignored):
`--mutants bench/mutation_survivors.txt` re-runs the last survivors. The last line is
`kill rate: X.X% (K of M mutants that change behaviour)`; exit 1 if a survivor is not allowed.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reference_impl"
# The gateway: not its zoo, self-tests, registry.
FILES = ("cache.py", "gateway.py", "memory.py", "policy.py", "sessions.py", "state.py", "store.py", "tables.py", "transcripts.py")
ALLOWED = Path(__file__).with_name("mutation_allowed.txt")
SHORT = 70  # characters of code quoted in a signature

ARITH: dict[type[ast.operator], type[ast.operator]] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult, ast.Div: ast.Mult,
    ast.Mod: ast.FloorDiv, ast.BitOr: ast.BitAnd, ast.BitAnd: ast.BitOr, ast.Pow: ast.Mult,
}
NEGATED: dict[type[ast.cmpop], type[ast.cmpop]] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt, ast.Eq: ast.NotEq, ast.NotEq: ast.Eq,
    ast.In: ast.NotIn, ast.NotIn: ast.In, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
BOUNDARY: dict[type[ast.cmpop], type[ast.cmpop]] = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt}
KEPT_STATEMENTS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Import, ast.ImportFrom, ast.Global,
                   ast.Nonlocal, ast.Pass, ast.Assert)  # deleting these is a NameError at once, or nothing at all


# -- the mutants --------------------------------------------------------------------------

@dataclass(frozen=True)
class Mutant:
    file: str
    line: int
    end_line: int
    qualname: str  # the enclosing function (Class.method), or <module>
    op: str
    what: str  # `before` -> `after`, or `the statement` for deletions
    occurrence: int  # 1 unless the same change occurs earlier in the same function
    span: tuple[int, int, int, int]  # lineno, col, end_lineno, end_col of the replaced text
    text: str  # what replaces it
    in_function: bool

    @property
    def signature(self) -> str:
        """Names the mutant without its line, so edits elsewhere in the file do not rename it."""
        return f"{self.file} {self.qualname} {self.op} {self.what}" + (f" [{self.occurrence}]" if self.occurrence > 1 else "")

    def source(self) -> str:
        """The mutated file."""
        lines = (PACKAGE / self.file).read_text(encoding="utf-8").splitlines(keepends=True)
        return splice(lines, self.span, self.text)


def splice(lines: list[str], span: tuple[int, int, int, int], text: str) -> str:
    """`lines` with the span (1-based lines, 0-based UTF-8 byte columns, as `ast` gives) replaced by `text`."""
    start, col, end, end_col = span
    head = lines[start - 1].encode()[:col].decode()
    tail = lines[end - 1].encode()[end_col:].decode()
    return "".join([*lines[: start - 1], head, text, tail, *lines[end:]])


def _short(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= SHORT else text[: SHORT - 1] + "…"


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


class _Finder:
    """Walks one module's AST in source order and lists every mutation of the operator set."""

    def __init__(self) -> None:
        self.found: list[tuple[ast.AST, str, str, ast.AST, bool, str]] = []  # node, qualname, op, replacement, in fn, what
        self.scope: list[str] = []
        self.returns_bool: list[bool] = []

    def add(self, node: ast.AST, op: str, new: ast.AST, what: str | None = None) -> None:
        what = what or f"`{_short(node)}` -> `{_short(new)}`"
        self.found.append((node, ".".join(self.scope) or "<module>", op, new, bool(self.returns_bool), what))

    def visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.JoinedStr):  # f-strings: messages, and their parts have no reliable positions
            return
        if isinstance(node, ast.ClassDef):
            self.scope.append(node.name)
            self.body(node.body, False)
            self.scope.pop()
            return
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for default in [*node.args.defaults, *node.args.kw_defaults]:  # evaluated where the function is defined
                if default is not None:
                    self.visit(default)
            self.scope.append(node.name)
            self.returns_bool.append(isinstance(node.returns, ast.Name) and node.returns.id == "bool")
            self.body(node.body, True)
            self.returns_bool.pop()
            self.scope.pop()
            return
        self.mutate(node)
        for field, value in ast.iter_fields(node):
            if field in ("annotation", "returns", "decorator_list"):
                continue
            for child in value if isinstance(value, list) else [value]:
                if isinstance(child, ast.AST):
                    if field in ("body", "orelse", "finalbody") and isinstance(child, ast.stmt):
                        continue  # statement lists are walked by `body`
                    self.visit(child)
        for field in ("body", "orelse", "finalbody"):
            statements = getattr(node, field, None)
            if isinstance(statements, list) and statements and isinstance(statements[0], ast.stmt):
                elif_of = node if field == "orelse" and isinstance(node, ast.If) and isinstance(node.orelse[0], ast.If) else None
                self.body(statements, bool(self.returns_bool), elif_of)  # type: ignore[arg-type]

    def body(self, statements: list[ast.stmt], in_function: bool, elif_of: ast.stmt | None = None) -> None:
        for index, stmt in enumerate(statements):
            if index == 0 and _is_docstring(stmt):
                continue
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                continue
            elif_ = elif_of is not None and stmt.col_offset == elif_of.col_offset  # `elif`: its deletion is no statement's
            if in_function and not isinstance(stmt, KEPT_STATEMENTS) and not elif_:
                is_call = isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
                first = ast.unparse(stmt).splitlines()[0]
                if isinstance(stmt, (ast.If, ast.For, ast.While, ast.With, ast.Try)):  # the header names it
                    first = first.removesuffix(":") + ": …"
                first = first if len(first) <= SHORT else first[: SHORT - 1] + "…"
                self.add(stmt, "call" if is_call else "delete", ast.Pass(), f"`{first}`")
            self.visit(stmt)

    def mutate(self, node: ast.AST) -> None:
        """The mutations of `node` itself (its children are visited after)."""
        if isinstance(node, ast.BinOp) and type(node.op) in ARITH:
            self.add(node, "arith", ast.BinOp(node.left, ARITH[type(node.op)](), node.right))
        elif isinstance(node, ast.AugAssign) and type(node.op) in ARITH:
            self.add(node, "arith", ast.AugAssign(node.target, ARITH[type(node.op)](), node.value))
        elif isinstance(node, ast.Compare):
            for i, cmp in enumerate(node.ops):
                for op, table in (("compare", NEGATED), ("boundary", BOUNDARY)):
                    if type(cmp) in table:
                        ops = [*node.ops[:i], table[type(cmp)](), *node.ops[i + 1:]]
                        self.add(node, op, ast.Compare(node.left, ops, node.comparators))
        elif isinstance(node, ast.Constant) and isinstance(node.value, bool):
            self.add(node, "constant", ast.Constant(not node.value))
        elif isinstance(node, ast.Constant) and type(node.value) is int:
            for value in (node.value + 1, node.value - 1):  # -1 is written, and parses, as -(1)
                self.add(node, "constant", ast.parse(str(value), mode="eval").body)
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            self.add(node, "not", node.operand)
        elif isinstance(node, ast.BoolOp):
            self.add(node, "boolop", ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values))
        elif isinstance(node, ast.Return) and node.value is not None:
            value = node.value
            if not (isinstance(value, ast.Constant) and (value.value is None or isinstance(value.value, bool))):
                self.add(value, "return", ast.Constant(None))
                if self.returns_bool and self.returns_bool[-1] and not _negated_elsewhere(value):
                    self.add(value, "return", ast.UnaryOp(ast.Not(), value))
        tests = [node.test] if isinstance(node, (ast.If, ast.While, ast.IfExp)) else []
        if isinstance(node, ast.comprehension):
            tests = list(node.ifs)
        for test in tests:
            if not _negated_elsewhere(test):
                self.add(test, "condition", ast.UnaryOp(ast.Not(), test))


def _negated_elsewhere(test: ast.expr) -> bool:
    """A one-operator comparison is negated by `compare`, and a `not x` by `not`: negating it
    again would only repeat that mutant."""
    return ((isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in NEGATED)
            or (isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)))


def _mutated_dump(tree: ast.Module, parents: dict[int, tuple[ast.AST, str, int | None]], old: ast.AST, new: ast.AST) -> str:
    """`ast.dump` of `tree` with the node `old` replaced by `new` (swapped in place, then back)."""
    parent, field, index = parents[id(old)]
    slot = getattr(parent, field)
    if index is None:
        setattr(parent, field, new)
    else:
        slot[index] = new
    try:
        return ast.dump(tree)
    finally:
        if index is None:
            setattr(parent, field, old)
        else:
            slot[index] = old


def mutants(files: tuple[str, ...] = FILES, verify: bool = False) -> list[Mutant]:
    """Every mutant of the operator set, file by file in source order. With `verify` (`--list`,
    and the smoke test), each spliced file must parse to exactly the mutated tree."""
    out: list[Mutant] = []
    for file in files:
        source = (PACKAGE / file).read_text(encoding="utf-8")
        lines = source.splitlines(keepends=True)
        tree = ast.parse(source)
        parents = {id(child): (node, field, index) for node in ast.walk(tree) for field, value in ast.iter_fields(node)
                   for index, child in (enumerate(value) if isinstance(value, list) else [(None, value)])
                   if isinstance(child, ast.AST)}
        finder = _Finder()
        finder.body(tree.body, False)
        seen: Counter[tuple[str, str, str]] = Counter()
        for node, qualname, op, new, in_function, what in finder.found:
            if isinstance(node, ast.stmt):
                text = ast.unparse(new) if not isinstance(new, ast.Pass) else "pass"
            else:
                text = f"({ast.unparse(new)})"
            span = (node.lineno, node.col_offset, node.end_lineno or node.lineno, node.end_col_offset or 0)
            if verify and ast.dump(ast.parse(splice(lines, span, text))) != _mutated_dump(tree, parents, node, new):
                raise AssertionError(f"{file}:{node.lineno}: the spliced text is not the mutation {what}")
            seen[(qualname, op, what)] += 1
            out.append(Mutant(file, node.lineno, span[2], qualname, op, what, seen[(qualname, op, what)], span, text,
                              in_function))
    return out


# -- running them --------------------------------------------------------------------------

@dataclass(frozen=True)
class Task:
    mutant: Mutant | None  # None: the unmutated reference (the baseline)
    seeds: int
    profile: str
    cap: float
    baseline: tuple[str, ...] = ()  # per-scenario digests of the unmutated reference
    trace: bool = False  # record the lines reached (the baseline run only)


@dataclass(frozen=True)
class Outcome:
    status: str  # same, killed, survived (or, for the baseline, pass)
    where: str = ""  # the scenario that killed it, or where behaviour first changed
    why: str = ""
    seconds: float = 0.0
    log: str = ""  # a survivor's log of `where`
    digests: tuple[str, ...] = ()
    reached: dict[str, list[int]] | None = None


def run_task(task: Task) -> Outcome:
    """One child process: the mutated package (or the original, copied the same way) first on PYTHONPATH."""
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="mutant-") as tmp:
        package = Path(tmp) / "reference_impl"
        shutil.copytree(PACKAGE, package, ignore=shutil.ignore_patterns("__pycache__"))
        if task.mutant is not None:
            (package / task.mutant.file).write_text(task.mutant.source(), encoding="utf-8")
        spec = Path(tmp) / "task.json"
        spec.write_text(json.dumps({"seeds": task.seeds, "profile": task.profile, "baseline": task.baseline,
                                    "trace": task.trace, "package": str(package)}))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [tmp, str(ROOT), os.environ.get("PYTHONPATH")])),
               "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1"}
        try:
            done = subprocess.run([sys.executable, __file__, "--child", str(spec)], cwd=ROOT, env=env, capture_output=True,
                                  text=True, timeout=task.cap)
        except subprocess.TimeoutExpired:
            return Outcome("killed", "", f"the cap: still running after {task.cap:g}s", time.monotonic() - start)
    seconds = time.monotonic() - start
    last = done.stdout.rstrip("\n").rpartition("\n")[2]
    if done.returncode != 0 or not last.startswith("{"):
        errors = [line for line in done.stderr.splitlines() if line.strip()]
        return Outcome("killed", "", f"the child exited with status {done.returncode}: {errors[-1] if errors else ''}"[:200],
                       seconds)
    answer = json.loads(last)
    return Outcome(answer["status"], answer["where"], answer["why"], seconds, answer.get("log", ""),
                   tuple(answer.get("digests", ())), answer.get("reached"))


def scenario_digest(result: Any) -> str:
    """The run's behaviour as the contract sees it: its log and verdicts, less the gateway's
    `note` records (its own account of evictions and heals, which no check may trust: a mutant
    that changes only them changes nothing a gateway owes)."""
    digest = hashlib.sha256()
    for record in result.records:
        if record.kind != "note":
            digest.update(record.to_json().encode())
    for verdict in result.verdicts.values():
        digest.update(repr(verdict).encode())
    return digest.hexdigest()


def scenarios(seeds: int, profile: str) -> Iterator[tuple[str, Any]]:
    """The catalog, then seeds 0..N-1: (name, scenario), generated as they are asked for."""
    from conformance.harness.suite import catalog_paths
    from sim.generate import scenario_for_seed
    from sim.loader import load_file

    for path in catalog_paths():
        yield path.stem, load_file(path)
    for seed in range(seeds):
        yield f"seed {seed}", scenario_for_seed(seed, profile)


def child(spec_path: str) -> None:
    """In the child: run every scenario on `reference` (this PYTHONPATH's reference_impl) and
    print one JSON line: the first scenario that does not pass, else where behaviour first changed."""
    spec = json.loads(Path(spec_path).read_text())
    reached: dict[str, set[int]] = {}
    if spec["trace"]:
        prefix = spec["package"] + os.sep

        def lines(frame: Any, event: str, _arg: Any) -> Any:
            if event == "line":
                reached[frame.f_code.co_filename].add(frame.f_lineno)
            return lines

        def calls(frame: Any, _event: str, _arg: Any) -> Any:
            name = frame.f_code.co_filename
            if not name.startswith(prefix):
                return None
            reached.setdefault(name, set()).add(frame.f_lineno)
            return lines

        sys.settrace(calls)  # before the import: module and class bodies count as reached
    import reference_impl
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario
    from conformance.harness.suite import outcome

    here = Path(reference_impl.__file__).resolve().parent
    assert here == Path(spec["package"]).resolve(), f"reference_impl came from {here}, not the mutant"
    make, baseline = resolve("reference"), spec["baseline"]
    digests: list[str] = []
    answer: dict[str, Any] = {"status": "same", "where": "", "why": ""}
    for index, (name, scenario) in enumerate(scenarios(spec["seeds"], spec["profile"])):
        result = run_scenario(scenario, make(), "reference")
        word = outcome(result)
        if word != "pass":
            why = result.failure.describe() if result.failure is not None else next(
                f"{check} {v.summary}" for check, v in result.verdicts.items() if v.status not in ("pass",))
            answer = {"status": "killed", "where": name, "why": " ".join(why.split())[:300]}
            break
        digests.append(scenario_digest(result))
        if baseline and digests[-1] != baseline[index] and answer["status"] == "same":
            answer = {"status": "survived", "where": name, "why": "", "log": result.log_text()}
    if not baseline:
        answer = {"status": answer["status"] if answer["status"] == "killed" else "pass", "where": answer["where"],
                  "why": answer["why"], "digests": digests}
        if spec["trace"]:
            sys.settrace(None)
            answer["reached"] = {Path(name).name: sorted(found) for name, found in sorted(reached.items())}
    print(json.dumps(answer))


def reference_log(where: str, seeds: int, profile: str) -> str:
    """The unmutated reference's log of one scenario (this process's reference_impl)."""
    from conformance.harness.registry import resolve
    from conformance.harness.runner import run_scenario

    scenario = dict(scenarios(seeds, profile))[where]
    return run_scenario(scenario, resolve("reference")(), "reference").log_text()


def read_signatures(path: Path) -> dict[str, str]:
    """signature -> reason, from lines `SIGNATURE  # reason` (blank lines and `#` lines skipped)."""
    out: dict[str, str] = {}
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        signature, _, reason = line.partition("  # ")
        out[signature.strip()] = reason.strip()
    return out


def first_changed_line(first: str, second: str) -> str:
    """Where two logs' texts first differ, notes aside: the line number and both lines."""
    a, b = ([line for line in text.splitlines() if '"kind":"note"' not in line] for text in (first, second))
    for number, (x, y) in enumerate(zip(a, b, strict=False), start=1):
        if x != y:
            return f"record {number}: {x[:140]}  vs  {y[:140]}"
    return f"record {min(len(a), len(b)) + 1}: one log is longer ({len(a)} vs {len(b)} records)"


def main(argv: list[str] | None = None) -> int:
    from conformance.cli.args import parse_workers
    from conformance.search.fuzz import in_order
    from sim.weights import PROFILES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300, help="generated seeds after the catalog (default 300)")
    parser.add_argument("--profile", default="default", choices=sorted(PROFILES))
    parser.add_argument("-j", "-n", "--jobs", dest="workers", default="1", help="mutants run at a time, or 'auto' (default 1)")
    parser.add_argument("--cap", type=float, default=60.0, help="wall-clock seconds per mutant (default 60)")
    parser.add_argument("--mutants", type=Path, help="run only the mutants this file names (one signature a line)")
    parser.add_argument("--allowed", type=Path, default=ALLOWED, help=f"survivors allowed, with why (default {ALLOWED.name})")
    parser.add_argument("--write-survivors", type=Path, help="write the survivors' signatures to this file")
    parser.add_argument("--list", action="store_true", help="print every mutant and run none")
    parser.add_argument("--quick", action="store_true", help="3 mutants, 5 seeds (smoke test)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    every = mutants(verify=args.list)
    if args.list:
        for m in every:
            print(f"{m.file}:{m.line}  {m.signature}")
        print(f"{len(every)} mutants")
        return 0
    chosen, missing = every, []
    if args.mutants:
        wanted = read_signatures(args.mutants)
        by_signature = {m.signature: m for m in every}
        chosen = [m for m in every if m.signature in wanted]
        missing = [s for s in wanted if s not in by_signature]
    seeds = 5 if args.quick else args.seeds
    if args.quick:
        chosen = [every[i * (len(every) - 1) // 2] for i in range(3)]
    workers = parse_workers(args.workers)
    started = time.monotonic()
    base = run_task(Task(None, seeds, args.profile, max(args.cap, 600.0), trace=True))
    if base.status != "pass":
        print(f"the unmutated reference does not pass: {base.where}: {base.why}")
        return 2
    reached = {file: set(found) for file, found in (base.reached or {}).items()}

    def unreached(m: Mutant) -> bool:
        return m.in_function and not reached.get(m.file, set()) & set(range(m.line, m.end_line + 1))

    to_run = [m for m in chosen if not unreached(m)]
    tasks = [Task(m, seeds, args.profile, args.cap, base.digests) for m in to_run]
    results: dict[Mutant, Outcome] = {m: Outcome("same", why="unreached") for m in chosen if unreached(m)}
    for done, (m, result) in enumerate(zip(to_run, in_order(run_task, tasks, workers), strict=True), start=1):
        results[m] = result
        if done % 25 == 0 or done == len(tasks):
            print(f"{done}/{len(tasks)} mutants run, {time.monotonic() - started:.0f}s", file=sys.stderr, flush=True)
    allowed = read_signatures(args.allowed)
    scope = f"the catalog and seeds 0:{seeds} ({args.profile} profile)"
    print(f"mutants of reference_impl ({', '.join(FILES)}), each run on {scope}")
    for signature in missing:
        print(f"not found  {signature}")
    survivors = [m for m in chosen if results[m].status == "survived"]
    killed = [m for m in chosen if results[m].status == "killed"]
    capped = [m for m in killed if results[m].why.startswith("the cap")]
    same = [m for m in chosen if results[m].status == "same"]
    logs: dict[str, str] = {}
    for m in survivors:
        r = results[m]
        if r.where not in logs:
            logs[r.where] = reference_log(r.where, seeds, args.profile)
        reason = allowed.get(m.signature)
        print(f"{'allowed ' if reason is not None else 'SURVIVOR'} {m.file}:{m.line}  {m.signature}")
        print(f"         first change: {r.where}, {first_changed_line(logs[r.where], r.log)[:300]}")
        if reason is not None:
            print(f"         allowed: {reason}")
    for m in capped:
        print(f"capped   {m.file}:{m.line}  {m.signature}")
    if args.write_survivors:
        args.write_survivors.write_text("".join(f"{m.signature}  # {m.file}:{m.line}, first change: {results[m].where}\n"
                                                for m in survivors), encoding="utf-8")
    by_op = Counter(m.op for m in chosen)
    print(f"mutants: {len(chosen)} ({', '.join(f'{op} {n}' for op, n in sorted(by_op.items()))})")
    unreached_count = sum(1 for m in same if results[m].why == "unreached")
    print(f"no behaviour change: {len(same)} ({unreached_count} on lines no scenario reaches, not run)")
    print(f"killed: {len(killed)}" + (f" ({len(capped)} by the {args.cap:g}s cap)" if capped else ""))
    unlisted = [m for m in survivors if m.signature not in allowed]
    print(f"survivors: {len(survivors)} ({len(survivors) - len(unlisted)} allowed in {args.allowed.name}, {len(unlisted)} to fix)")
    changed = len(killed) + len(survivors)
    if not args.mutants and not args.quick:
        stale = sorted(set(allowed) - {m.signature for m in survivors})
        for signature in stale:
            print(f"warning: {args.allowed.name} lists {signature!r}, not a survivor", file=sys.stderr)
    run_times = [results[m].seconds for m in to_run]
    if run_times:
        print(f"{len(run_times)} mutants run in {time.monotonic() - started:.0f}s on {workers} workers: "
              f"{sum(run_times) / len(run_times):.2f}s per mutant (killed {_mean(results, killed):.2f}s, "
              f"run to the end {_mean(results, [m for m in to_run if results[m].status != 'killed']):.2f}s)",
              file=sys.stderr)
    print(f"kill rate: {100 * len(killed) / changed if changed else 100:.1f}% ({len(killed)} of {changed} mutants that change behaviour)")
    if allowed_here := len(survivors) - len(unlisted):
        judged = changed - allowed_here
        print(f"kill rate of what the contract constrains: {100 * len(killed) / judged if judged else 100:.1f}% "
              f"({len(killed)} of {judged}; {allowed_here} survivors the contract allows, each with its reason)")
    return 1 if unlisted else 0


def _mean(results: dict[Mutant, Outcome], group: list[Mutant]) -> float:
    times = [results[m].seconds for m in group if results[m].why != "unreached"]
    return sum(times) / len(times) if times else 0.0


if __name__ == "__main__":
    raise SystemExit(main())
