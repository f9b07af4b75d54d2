"""What a leader knows of one follower of a partition: where its log ends and starts, when it last
fetched and when it was last caught up (the ISR and high watermark decisions of isr.py read it).

Kafka updates this on every fetch for every partition of the follower's fetch session
(Partition.updateFollowerFetchState): caught up at the fetch's time when the fetch offset reaches the
leader's log end, else at the previous fetch's time when it reaches the log end the leader had then.
Brook's leader does not walk an idle session's partitions (see fetch_sessions.py): a partition is
walked again when its position or the leader's log changes. In between, the follower's session `clock`
ticks on each of its fetches and stands for a fetch of every session partition at the position the
leader holds: the position and the log end are those of the last walk, so Kafka's rule gives "caught
up at each tick" when that walk found the follower at the log end, and nothing new otherwise.
`caught_up_ms` and `fetched_ms` are the values Kafka's per-partition walk would hold.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True, eq=False)
class FetchClock:
    """The time (monotonic ms) of a follower's latest fetch through its fetch session."""

    fetch_ms: float = 0.0
    stale: bool = False  # the ISR loop has looked at its partitions since it stopped ticking

    def tick(self, now_ms: float) -> None:
        self.fetch_ms = now_ms
        self.stale = False


@dataclass(slots=True)
class FollowerProgress:
    log_end_offset: int = -1
    last_caught_up_ms: float = 0.0
    last_fetch_leader_leo: int = -1
    last_fetch_ms: float = 0.0
    out_of_isr_since_ms: float = 0.0  # 0: in the ISR; re-entry needs a fetch after this
    log_start_offset: int = -1  # as the follower's last fetch said
    clock: FetchClock | None = None  # the follower's session, whose fetches count here since the last walk

    @property
    def caught_up_at_walk(self) -> bool:
        """At the last walk the follower had everything the leader had."""
        return self.log_end_offset >= self.last_fetch_leader_leo

    @property
    def caught_up_ms(self) -> float:
        c = self.clock
        if c is not None and c.fetch_ms > self.last_caught_up_ms and self.caught_up_at_walk:
            return c.fetch_ms
        return self.last_caught_up_ms

    @property
    def fetched_ms(self) -> float:
        c = self.clock
        return c.fetch_ms if c is not None and c.fetch_ms > self.last_fetch_ms else self.last_fetch_ms

    def settle(self) -> None:
        """Fold the session's fetches since the last walk into the fields (before a walk or a detach)."""
        self.last_caught_up_ms = self.caught_up_ms
        self.last_fetch_ms = self.fetched_ms
