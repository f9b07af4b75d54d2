"""A leader's ISR and high-watermark decisions, as Kafka's Partition makes them: pure functions of the
partition's assignment, its ISR and what the leader knows of each follower (follower_progress.py). The
broker's Partition holds that state and calls these; its ISR loop records the changes in the metadata.
Times are monotonic milliseconds, given by the caller."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TypeVar

from .follower_progress import FetchClock, FollowerProgress
from .replica import LedReplica

L = TypeVar("L", bound=LedReplica)


def due_isr_changes(
    due: set[L], lag_max_ms: int, current: Callable[[L], bool]
) -> Iterator[tuple[L, list[int]]]:
    """The ISR changes the led replicas in `due` call for, one at a time (the caller records each before
    the next is decided); a replica no longer `current` (dropped, replaced) or settled leaves `due`."""
    for p in list(due):
        if not current(p):
            due.discard(p)
            continue
        new_isr = p.isr_change(lag_max_ms)
        if new_isr is None and p.isr_settled(lag_max_ms):
            due.discard(p)
        if new_isr is not None:
            yield p, new_isr


def record_fetch(
    state: FollowerProgress, fetch_offset: int, leader_leo: int, now_ms: float, clock: FetchClock | None
) -> bool:
    """A follower fetched at `fetch_offset` (it holds everything before it) while the leader's log ended
    at `leader_leo`: Kafka's updateFollowerFetchState. True when its log end moved."""
    if fetch_offset >= leader_leo:
        state.last_caught_up_ms = now_ms
    elif fetch_offset >= state.last_fetch_leader_leo >= 0:
        state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
    moved = fetch_offset != state.log_end_offset
    state.log_end_offset = fetch_offset
    state.last_fetch_leader_leo = leader_leo
    state.last_fetch_ms = now_ms
    state.clock = clock
    return moved


def maximal_isr(isr: list[int], version: int, proposed: tuple[int, list[int]] | None) -> list[int]:
    """The ISR plus the members an ISR write based on metadata `version` adds (Kafka's maximal ISR):
    the controller may elect such a member as soon as the write lands."""
    if proposed is None or proposed[0] != version:
        return isr
    return isr + [r for r in proposed[1] if r not in isr]


def committed_end(
    node_id: int, leader_leo: int, isr: list[int], followers: Mapping[int, FollowerProgress]
) -> int:
    """Where every member of `isr` has the log: the high watermark's candidate."""
    if len(isr) == 1 and isr[0] == node_id:  # no follower to wait for (every append of RF=1)
        return leader_leo
    ends = [followers[r].log_end_offset if r in followers else -1 for r in isr if r != node_id]
    return min(leader_leo, *ends) if ends else leader_leo


def isr_change(
    node_id: int,
    replicas: list[int],
    isr: list[int],
    followers: Mapping[int, FollowerProgress],
    *,
    now_ms: float,
    lag_max_ms: int,
    high_watermark: int,
    epoch_start: int,
) -> list[int] | None:
    """The ISR a leader should record now (followers lagging too long out, caught-up ones in), or None
    when it is right as it is."""
    new = [node_id]
    for r in replicas:
        if r == node_id:
            continue
        state = followers.get(r)
        if state is None:
            continue
        if r in isr:
            if now_ms - state.caught_up_ms <= lag_max_ms:
                new.append(r)
        elif (
            state.fetched_ms > state.out_of_isr_since_ms  # alive: it fetched since it left
            and state.log_end_offset >= high_watermark
            and state.log_end_offset >= epoch_start
        ):
            new.append(r)
    if sorted(new) == sorted(isr):
        return None
    return sorted(new)


def isr_settled(
    node_id: int,
    replicas: list[int],
    isr: list[int],
    followers: Mapping[int, FollowerProgress],
    *,
    now_ms: float,
    lag_max_ms: int,
) -> bool:
    """No ISR change can be due before the partition changes or a follower's fetch session stops
    ticking: every replica is in the ISR, caught up at its last walk, and counted as fetching by a
    session that fetched within the lag time."""
    if sorted(isr) != sorted(replicas):
        return False
    for r in replicas:
        if r == node_id:
            continue
        state = followers.get(r)
        if state is None or state.clock is None or not state.caught_up_at_walk:
            return False
        if now_ms - state.clock.fetch_ms > lag_max_ms:
            return False
    return True
