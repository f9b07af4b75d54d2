"""Consumer groups: membership and rebalancing (the classic protocol), committed offsets kept in
`__consumer_offsets`."""

from .coordinator import GroupCoordinator, GroupSettings

__all__ = ["GroupCoordinator", "GroupSettings"]
