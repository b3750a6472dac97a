"""Gateway factories registered under the `sessiongate.gateways` entry-point group."""

from __future__ import annotations

from reference_impl.gateway import ReferenceGateway


def reference(name: str | None = None) -> ReferenceGateway:
    """The reference gateway, or with a name (`reference:<name>`) one of its bug-zoo variants."""
    return variant(name) if name else ReferenceGateway()


def variant(name: str) -> ReferenceGateway:
    """The bug-zoo variant `name`: the reference with one reported bug put back."""
    from reference_impl.variants import make

    return make(name)
