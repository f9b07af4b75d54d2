"""Share groups (KIP-932): membership, share-partitions' record states, share sessions, their store."""

from .coordinator import ShareCoordinator

__all__ = ["ShareCoordinator"]
