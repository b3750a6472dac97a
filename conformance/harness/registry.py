"""Finding gateways by name: entry points in the `sessiongate.gateways` group, or MODULE:FACTORY.

`reference` names an entry point; `reference:batch-lost-on-shutdown` passes the part after
the colon to that entry point's factory (a variant, a self-test mode…); `pkg.mod:make` imports
a factory from a module. A factory is called once per scenario and returns a fresh gateway.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import sys
import sysconfig
import traceback
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, distribution, entry_points
from pathlib import Path
from typing import Any

from conformance.adapter import Gateway
from conformance.harness.errors import signalled
from sessiongate import UsageError
from sim.fields import did_you_mean

GROUP = "sessiongate.gateways"
# Used when sessiongate runs from a source tree that was never installed.
BUILTIN = {
    "reference": "reference_impl.registry:reference",
    "exec": "conformance.transport.exec_gateway:exec_gateway",
    "selftest": "reference_impl.selftest:selftest",
    "hermes": "conformance.adapters.hermes:hermes",
    "openclaw": "conformance.adapters.openclaw:openclaw",
}
# Entry points that need a distribution sessiongate does not install: checked by name before any
# scenario, so a missing one is one line, not an import error in every scenario.
# A callable instead names the distribution itself, or raises LookupError with a one-line reason
# (`hermes` accepts hermes-agent or a fork of it: conformance.adapters.hermes.forks).
REQUIRES: dict[str, tuple[str, str] | Callable[[], object]] = {
    "hermes": lambda: importlib.import_module("conformance.adapters.hermes.forks").installed(),
}
# Called in every run: a factory's product without them is not a gateway (see adapter.Gateway).
CORE_METHODS = ("profile", "start", "sigterm", "durable_state", "resources")


class UnknownGateway(UsageError, LookupError):
    pass


class GatewayCodeFailed(UnknownGateway):
    """The gateway's own code failed before any scenario (its module or factory raised, or made
    no gateway): an error of the gateway, not of the command line, so no usage line."""

    usage = False

    def __init__(self, message: str, where: str = "") -> None:
        super().__init__(f"{message}{where}")
        self.unplaced = message  # without ` (at FILE:LINE)`: for a scenario's error, whose trace says where


def _load(target: str) -> Callable[..., Any]:
    module, _, attr = target.partition(":")
    cwd = os.getcwd()
    try:
        obj: Any = importlib.import_module(module)
    except ImportError as err:
        if not _is_missing(module, err):  # raised inside the module (a dependency it lacks): the gateway's, placed
            raise GatewayCodeFailed(f"cannot import {module!r}: {_one_line(err)}", raised_at(err)) from None
        raise UnknownGateway(f"cannot import {module!r}: {err}{_in_this_folder(module, err)}") from None
    except BaseException as err:  # a syntax error, or the module raised (SystemExit too: never an exit) while importing
        if signalled(err):
            raise
        raise GatewayCodeFailed(f"cannot import {module!r}: {_one_line(err)}", raised_at(err)) from None
    finally:
        os.chdir(cwd)  # a module that moves the process at import moves nothing of the run's
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise UnknownGateway(f"{module!r} has no {attr!r}") from None
    return obj


def _is_missing(module: str, err: ImportError) -> bool:
    """Whether `err` says `module` itself (or a package on its dotted path) does not exist: a
    wrong name on the command line. Any other ImportError was raised inside the module, say by
    a dependency it imports that is not installed, and is the gateway's own error."""
    parts = module.split(".")
    return isinstance(err, ModuleNotFoundError) and err.name in {".".join(parts[:n]) for n in range(1, len(parts) + 1)}


def _in_this_folder(module: str, err: ImportError) -> str:
    """The first hour's usual miss, said: the module is a file (or package) of the current
    folder, which the `sessiongate` command, unlike `python -m`, does not import from."""
    top = module.partition(".")[0]
    here = Path.cwd()
    if not (isinstance(err, ModuleNotFoundError) and err.name == top) or not (
            (here / f"{top}.py").is_file() or (here / top / "__init__.py").is_file()):
        return ""
    if any(Path(entry or ".").resolve() == here for entry in sys.path):
        return ""
    return f" ({top} is in this folder, which is not on the import path: PYTHONPATH=. sessiongate …)"


def registered() -> dict[str, str]:
    """Short name -> 'module:factory': the built-ins, then entry points of other names. A built-in
    name is sessiongate's own: an install's metadata, written when it was installed, may name a
    module the tree has since moved."""
    names = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        names.setdefault(ep.name, ep.value)
    return names


def resolve(name: str) -> Callable[[], Gateway]:
    """A zero-argument factory for the gateway called `name`. Whatever is wrong with the name,
    the module or what the factory makes is an `UnknownGateway` naming the gateway, so the CLI
    prints one line instead of a traceback from inside the first scenario."""
    known = registered()
    head, sep, arg = name.partition(":")
    if head in known:
        if sep and not arg:
            raise UnknownGateway(f"gateway {name!r}: nothing after ':'; use {head} or {head}:ARG")
        _require(head)
        target = known[head]
    elif (sep and "." in head) or (sep and arg):
        target = name
    else:
        raise UnknownGateway(f"unknown gateway {name!r}{_spelled(name, known)}; known: {', '.join(sorted(known))} "
                             "(or MODULE:FACTORY)")
    try:
        factory = _load(target)
    except UnknownGateway as err:
        if head.endswith(".py"):  # a file's name where the module's goes
            raise UnknownGateway(f"gateway {name!r}: {err}; name the module, not its file: "
                                 f"--gateway {head.removesuffix('.py').replace('/', '.')}:{arg}") from None
        raise type(err)(f"gateway {name!r}: {err}") from None  # a module that raised stays the gateway's error
    if not callable(factory):
        raise UnknownGateway(f"gateway {name!r}: {target} is {type(factory).__name__}, not a factory to call")
    if head in known and sep and known[head] != name:  # `mygw:make` naming the entry point's own target is MODULE:FACTORY
        if not _takes_an_argument(factory):
            raise UnknownGateway(f"gateway {name!r}: the entry point {head!r} ({target}) takes no argument; "
                                 f"use --gateway {head}, or MODULE:FACTORY for another factory")
        return _checked(name, lambda: factory(arg), bare=False)
    return _checked(name, factory, bare=head in known)


def _spelled(name: str, known: dict[str, str]) -> str:
    """What an unknown gateway name was likely meant as: a known name a letter off, a module of
    the author's without its factory (`mygw`, `mygw.make`: MODULE:FACTORY), or nothing."""
    if hint := did_you_mean(name, known):
        return hint
    module, dot, attr = name.rpartition(".")
    for candidate, factory in (*(((module, attr),) if dot else ()), (name, "FACTORY")):
        top = candidate.partition(".")[0]
        if (Path.cwd() / f"{top}.py").is_file() or (Path.cwd() / top / "__init__.py").is_file() or _findable(top):
            return f" (a gateway module of yours is named with its factory: --gateway {candidate}:{factory})"
    return ""


def _findable(module: str) -> bool:
    try:
        return module.isidentifier() and importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _takes_an_argument(factory: Callable[..., Any]) -> bool:
    """Whether `factory(arg)` is a call it accepts (an entry point's NAME:ARG)."""
    try:
        inspect.signature(factory).bind("arg")
    except TypeError:
        return False
    except ValueError:  # no signature to read (a builtin): let the call say
        return True
    return True


def _require(head: str) -> None:
    if head not in REQUIRES:
        return
    requirement = REQUIRES[head]
    if callable(requirement):
        try:
            requirement()
        except LookupError as err:
            raise UnknownGateway(f"gateway {head!r}: {err}") from None
        return
    package, how = requirement
    try:
        distribution(package)
    except PackageNotFoundError:
        raise UnknownGateway(f"gateway {head!r} needs {package}, which is not installed; {how}") from None


def _checked(name: str, make: Callable[..., Any], bare: bool) -> Callable[[], Gateway]:
    """`make`, with its failures and non-gateways turned into one line naming the gateway.
    Arguments pass through: `resolve("exec")(command)` is the entry point's factory, called."""

    def checked(*args: Any) -> Gateway:
        try:
            gateway = make(*args)
        except UnknownGateway as err:
            known = str(err).partition("known: ")[2]
            if bare and not args and known:  # e.g. plain `selftest`: the factory wanted an argument
                raise UnknownGateway(f"gateway {name!r} takes an argument, {name}:ARG; known: {known}") from None
            raise
        except BaseException as err:  # SystemExit, KeyboardInterrupt…: the factory's failure, never an exit
            if signalled(err):
                raise
            raise GatewayCodeFailed(f"gateway {name!r}: its factory raised {_one_line(err)}", raised_at(err)) from None
        try:
            missing = [method for method in CORE_METHODS if not callable(getattr(gateway, method, None))]
        except BaseException as err:  # a property of the gateway's that raises when looked up
            if signalled(err):
                raise
            raise GatewayCodeFailed(f"gateway {name!r}: looking up its methods raised {_one_line(err)}", raised_at(err)) from None
        if missing:
            raise GatewayCodeFailed(f"gateway {name!r}: its factory returned {type(gateway).__name__}, "
                                    f"not a gateway (no {', '.join(missing)})")
        return gateway

    return checked


def _one_line(err: BaseException) -> str:
    """`Type: message`, first line only (a KeyError's message without its repr quotes)."""
    try:
        text = str(err.args[0]) if isinstance(err, KeyError) and err.args else str(err)
    except Exception:  # a factory's exception whose message raises
        text = ""
    first = text.splitlines()[0] if text.strip() else ""
    return f"{type(err).__name__}: {first}" if first else type(err).__name__


def raised_at(err: BaseException) -> str:
    """` (at FILE:LINE)`: the innermost frame of `err`'s traceback outside Python's own library
    (a `json.load` that raised is placed at the gateway's line that called it), FILE relative to
    the working directory when under it. Read from the frames alone: no source file is opened."""
    own = tuple({sysconfig.get_path("stdlib"), sysconfig.get_path("platstdlib")})
    installed = tuple({sysconfig.get_path("purelib"), sysconfig.get_path("platlib")})
    for frame, line in reversed(list(traceback.walk_tb(err.__traceback__))):
        filename = frame.f_code.co_filename
        if filename.startswith("<") or filename == __file__ or (filename.startswith(own) and not filename.startswith(installed)):
            continue  # <frozen importlib._bootstrap>, this module's own call, the standard library
        try:
            shown = str(Path(filename).resolve().relative_to(Path.cwd()))
        except (ValueError, OSError):
            shown = filename
        return f" (at {shown}:{line})"
    return ""


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
