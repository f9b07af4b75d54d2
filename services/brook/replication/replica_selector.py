"""Which replica a consumer should fetch from (KIP-392), as Kafka's ReplicaManager.findPreferredReadReplica
with org.apache.kafka.common.replica.RackAwareReplicaSelector decides it.

The leader considers itself and each in-sync follower that holds `fetch_offset` (log start <= it < log
end, as far as the follower's last fetch told). With a client rack: the leader when it is in that rack
or when no candidate is; otherwise the candidate of that rack with the largest log end offset (then the
one caught up most recently). Without a rack: the leader. Only a follower is ever returned (and only one
the cluster knows an endpoint for); None means "keep fetching from the leader".
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from .replica import LeaderReplica


def preferred_read_replica(
    p: LeaderReplica, client_rack: str, fetch_offset: int, racks: Mapping[int, str | None]
) -> int | None:
    """The follower a consumer in `client_rack` should fetch `fetch_offset` of `p` from; `racks` holds
    every live broker's rack (brokers missing from it have no endpoint)."""
    if not client_rack or not p.is_leader or racks.get(p.node_id) == client_rack:
        return None
    now = time.monotonic() * 1000
    best: tuple[int, float, int] | None = None  # (log end offset, -ms since caught up, broker id)
    for replica in p.role.replicas:
        state = p.followers.get(replica)
        if (
            state is None
            or replica not in p.isr
            or racks.get(replica) != client_rack
            or not state.log_start_offset <= fetch_offset <= state.log_end_offset
        ):
            continue
        key = (state.log_end_offset, state.caught_up_ms - now, replica)
        if best is None or key[:2] > best[:2]:
            best = key
    return best[2] if best is not None else None
