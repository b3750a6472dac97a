"""Gateway factories registered under the `sessiongate.gateways` entry-point group."""

from __future__ import annotations

from reference_impl.gateway import ReferenceGateway


def reference(variant: str | None = None) -> ReferenceGateway:
    """`reference`, or `reference:<variant>` for a gateway from the bug zoo."""
    if variant is None:
        return ReferenceGateway()
    from reference_impl.variants import make

    return make(variant)
