"""What the log says happened, and what the contract says should have: the checks' oracle.

`RunModel.build(records)` reads only the observation log. From the inputs (messages,
commands, the configuration) it derives, per chat, the *segments* a conforming gateway must
produce: runs of turns that share one session, and the boundary that ends each one. The
checks then compare the gateway's outputs against those segments. Indexes (records by kind
and session, turns by session) are built once, so every check stays linear on big logs, and
the model asserts its own invariants once built (`invariants`).

The modules: `facts` (the types), `log` (the records and their indexes), `walk` (the one
pass over the log), `segments` (where the contract cuts), `invariants`, `run` (`RunModel`).
"""

from conformance.checks.model.facts import (
    NEVER,
    SESSION_KINDS,
    Downtime,
    Expiry,
    Moment,
    OracleError,
    Segment,
    Stamp,
    Turn,
    Window,
    expiry_instant,
    time_text,
)
from conformance.checks.model.run import RunModel

__all__ = ["NEVER", "SESSION_KINDS", "Downtime", "Expiry", "Moment", "OracleError", "RunModel", "Segment", "Stamp",
           "Turn", "Window", "expiry_instant", "time_text"]
