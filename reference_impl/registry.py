"""Gateway factories registered under the `sessiongate.gateways` entry-point group."""

from __future__ import annotations

from reference_impl.gateway import ReferenceGateway


def reference() -> ReferenceGateway:
    return ReferenceGateway()
