"""The mutants of `bench/mutation.py`: a small AST mutator (ours, not mutmut: deterministic, and
nothing to install) that lists every mutation of its operator set in the reference gateway's
files, each named by a signature without its line. The operators are listed in
`bench/mutation.py`'s docstring."""

from __future__ import annotations

import ast
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "reference_impl"
# The gateway: not its zoo, self-tests, registry.
FILES = ("cache.py", "gateway.py", "memory.py", "policy.py", "sessions.py", "state.py", "store.py", "tables.py", "transcripts.py")
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
