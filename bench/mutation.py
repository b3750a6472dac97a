"""Mutation score of the checks: how many small bugs put into the reference gateway they catch.

A mutant is `reference_impl` with one small change, made by the small AST mutator in
`mutation_mutants.py` (ours, not mutmut: deterministic, and nothing to install):

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

Each runs in a child process (`mutation_runner.py`) with the mutated package first on
PYTHONPATH: the catalog, then N generated seeds, against `reference`, stopping at the first
scenario that does not pass, under a wall-clock cap. Against the unmutated reference on every scenario, a mutant is

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
import sys
import time
from collections import Counter
from pathlib import Path

from mutation_mutants import FILES, Mutant, mutants
from mutation_runner import Outcome, Task, child, reference_log, run_task

ALLOWED = Path(__file__).with_name("mutation_allowed.txt")


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
    from sim.weights import PROFILE_NAMES

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=300, help="generated seeds after the catalog (default 300)")
    parser.add_argument("--profile", default="default", choices=PROFILE_NAMES)
    parser.add_argument("-j", "-n", "--jobs", dest="workers", default="1", help="mutants run at a time, or 'auto' (default 1)")
    parser.add_argument("--cap", type=float, default=60.0, help="wall-clock seconds per mutant (default 60)")
    parser.add_argument("--mutants", type=Path, help="run only the mutants this file names (one signature a line)")
    parser.add_argument("--allowed", type=Path, default=ALLOWED, help=f"survivors allowed, with why (default {ALLOWED.name})")
    parser.add_argument("--write-survivors", type=Path, help="write the survivors' signatures to this file")
    parser.add_argument("--list", action="store_true",
                        help="print every mutant and run none; exit 1 if --allowed names a mutant that does not exist")
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
        named = {m.signature for m in every}
        stale = [signature for signature in read_signatures(args.allowed) if signature not in named]
        for signature in stale:  # the mutant moved or went: its allowance would hide nothing, or the wrong thing
            print(f"warning: {args.allowed.name} lists {signature!r}, which names no mutant", file=sys.stderr)
        return 1 if stale else 0
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
    if allowed_here := len(survivors) - len(unlisted):  # before the headline: the last line is the raw kill rate
        judged = changed - allowed_here
        print(f"kill rate of what the contract constrains: {100 * len(killed) / judged if judged else 100:.1f}% "
              f"({len(killed)} of {judged}; {allowed_here} survivors the contract allows, each with its reason)")
    print(f"kill rate: {100 * len(killed) / changed if changed else 100:.1f}% ({len(killed)} of {changed} mutants that change behaviour)")
    return 1 if unlisted else 0


def _mean(results: dict[Mutant, Outcome], group: list[Mutant]) -> float:
    times = [results[m].seconds for m in group if results[m].why != "unreached"]
    return sum(times) / len(times) if times else 0.0


if __name__ == "__main__":
    raise SystemExit(main())
