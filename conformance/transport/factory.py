"""A gateway named on the command line, made: in process, in a child process of its own (`--isolate`),
or over JSON lines (`exec:COMMAND`). Shared by the front end and search's worker processes."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from typing import Any

from conformance.harness.registry import resolve
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


def check_gateway(name: str, find: Callable[[str], Callable[[], Any]] = resolve) -> None:
    """A bad gateway name is a usage error before any scenario runs (`find` lets tests stub `resolve`)."""
    if name.startswith("exec:"):
        exec_argv(name)
    find(name)


def gateway_factory(args: argparse.Namespace, env: dict[str, str] | None = None) -> Callable[[], Any]:
    """The named gateway, in a child process of its own when isolated (always for exec:). The
    child transport is imported only then: an in-process run never loads it."""
    name = args.gateway
    timeout, memory = args.step_timeout, args.memory_mb
    if name.startswith("exec:"):
        from conformance.transport.exec_gateway import ExecGateway

        argv = exec_argv(name)
        return lambda: ExecGateway(argv, step_timeout=timeout, memory_mb=memory, env=env)
    factory = resolve(name)  # unknown names fail here, before any child starts
    if args.isolate:
        if name.partition(":")[0] in OWN_FACTORIES:  # an unknown variant or self-test fails here, not once per child
            factory()
        # Anyone else's factory runs only in the children: one that hangs or kills its process
        # cannot take this one, and the report, along.
        from conformance.transport.isolation import isolated

        return lambda: isolated(name, step_timeout=timeout, memory_mb=memory, env=env)
    return factory
