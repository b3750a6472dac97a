"""A clean reference gateway that keeps the whole session-lifecycle contract."""

from reference_impl.gateway import ReferenceGateway

__all__ = ["ReferenceGateway"]
