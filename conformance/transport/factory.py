"""A gateway named on the command line, made: in process, in a child process of its own (`--isolate`),
or over JSON lines (`exec:COMMAND`). Shared by the front end and search's worker processes."""

from __future__ import annotations

import argparse
import functools
import shlex
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from conformance.harness.registry import GatewayCodeFailed, resolve
from sessiongate import UsageError

OWN_FACTORIES = ("reference", "selftest")  # sessiongate's own: safe and cheap to call in this process


def exec_argv(name: str) -> list[str]:
    """The command of an `exec:` gateway name, or a UsageError saying what is wrong with it."""
    try:
        argv = shlex.split(name[5:])
    except ValueError as err:  # e.g. an unclosed quote
        raise UsageError(f"gateway {name!r}: {str(err).lower()}") from None
    if not argv:
        raise UsageError("exec: needs a command, e.g. exec:\"node my-gateway.js\"")
    return argv


def check_gateway(name: str, find: Callable[[str], Callable[[], Any]] = resolve, isolate: bool = False) -> None:
    """A bad gateway name is a usage error before any scenario runs (`find` lets tests stub
    `resolve`); with `isolate`, checked in a process of its own (`resolve_apart`)."""
    if name.startswith("exec:"):
        exec_argv(name)
    elif isolate and name.partition(":")[0] not in OWN_FACTORIES:
        resolve_apart(name)
    else:
        find(name)


_CHECK_APART = """
import sys
from conformance.harness.registry import GatewayCodeFailed, UnknownGateway, resolve
try:
    resolve(sys.argv[1])
except UnknownGateway as err:
    print(err, file=sys.stderr)
    raise SystemExit(3 if isinstance(err, GatewayCodeFailed) else 2)
"""


@functools.cache
def resolve_apart(name: str) -> None:
    """`resolve(name)` in a process of its own: a bad name is still a usage error before any
    scenario runs, and the module of a gateway run `--isolate` is imported in the children
    only. Imported here, whatever it did at import (replace the checks, register an exit
    handler that exits 0, exit) it would do to the harness: "only the wire protocol reaches
    the harness" would not hold."""
    try:
        done = subprocess.run([sys.executable, "-c", _CHECK_APART, name], capture_output=True, text=True,
                              timeout=120, check=False, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise UsageError(f"gateway {name!r}: importing it took over 120s") from None
    if done.returncode != 0:
        said = [line for line in done.stderr.splitlines() if line.strip()]
        if done.returncode == 3 and said:  # the gateway's own code failed, not the command line: no usage banner
            raise GatewayCodeFailed(said[-1])
        raise UsageError(said[-1] if said else f"gateway {name!r}: checking it in a process of its own exited {done.returncode}")


def gateway_factory(args: argparse.Namespace, env: dict[str, str] | None = None) -> Callable[[], Any]:
    """The named gateway, in a child process of its own when isolated (always for exec:). The
    child transport is imported only then: an in-process run never loads it."""
    name = args.gateway
    timeout, memory = args.step_timeout, args.memory_mb
    if name.startswith("exec:"):
        from conformance.transport.exec_gateway import ExecGateway

        argv = exec_argv(name)
        return lambda: ExecGateway(argv, step_timeout=timeout, memory_mb=memory, env=env)
    if args.isolate:
        if name.partition(":")[0] in OWN_FACTORIES:  # an unknown variant or self-test fails here, not once per child
            resolve(name)()
        else:  # anyone else's module is imported, and its factory run, only in the children
            resolve_apart(name)  # unknown names fail here, before any child starts
        from conformance.transport.isolation import isolated

        return lambda: isolated(name, step_timeout=timeout, memory_mb=memory, env=env)
    return resolve(name)  # unknown names fail here, before the first scenario
