"""Every patch sessiongate puts on Hermes, once per process, in order: the common seams, the
memory providers' seams, then the rest with each fork's shims last (a shim wraps what the memory
seams put in place). Importing this imports Hermes: HERMES_HOME must be set first (`home`)."""

from __future__ import annotations

from conformance.adapters.hermes import memory, seams


def install() -> None:
    """Idempotent: a second call patches nothing."""
    if seams.install():
        memory.install()
        seams.install_after_memory()
