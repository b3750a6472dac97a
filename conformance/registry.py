"""Finding gateways by name: entry points in the `sessiongate.gateways` group, or MODULE:FACTORY.

`reference` names an entry point; `reference:batch-lost-on-shutdown` passes the part after
the colon to that entry point's factory (a variant, a self-test mode…); `pkg.mod:make` imports
a factory from a module. A factory is called once per scenario and returns a fresh gateway.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from conformance.adapter import Gateway

GROUP = "sessiongate.gateways"
# Used when sessiongate runs from a source tree that was never installed.
BUILTIN = {
    "reference": "reference_impl.registry:reference",
    "exec": "conformance.exec_gateway:exec_gateway",
    "selftest": "reference_impl.selftest:selftest",
    "hermes": "conformance.adapters.hermes:hermes",
}


class UnknownGateway(LookupError):
    pass


def _load(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as err:
        raise UnknownGateway(f"cannot import {module!r}: {err}") from None
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownGateway(f"{module!r} has no {attr!r}") from None
    return obj


def registered() -> dict[str, str]:
    """Short name -> 'module:factory', entry points first, then built-ins."""
    names = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        names[ep.name] = ep.value
    return names


def resolve(name: str) -> Callable[[], Gateway]:
    """A zero-argument factory for the gateway called `name`."""
    known = registered()
    head, sep, arg = name.partition(":")
    if head in known:
        factory = _load(known[head])
        if not sep:
            return factory
        return lambda: factory(arg)
    if (sep and "." in head) or (sep and arg):
        return _load(name)
    raise UnknownGateway(f"unknown gateway {name!r}; known: {', '.join(sorted(known))} (or MODULE:FACTORY)")


def expectation_names(name: str) -> list[str]:
    """Stems of the expectations files that may apply to gateway `name`, most specific first.

    By default the name itself ('reference:x' -> 'reference-x'). An entry point's factory may
    say more with an `expectation_names(arg)` attribute: `hermes` names the installed release,
    so plain `--gateway hermes` finds `hermes-0.19.0.txt` when 0.19.0 is installed.
    """
    head, _, arg = name.partition(":")
    target = registered().get(head)
    if target is not None:
        try:
            names = getattr(_load(target), "expectation_names", None)
        except UnknownGateway:
            names = None
        if names is not None:
            return list(names(arg))
    return [name.replace(":", "-")]
