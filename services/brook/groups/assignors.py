"""Server-side assignors of the consumer group protocol (KIP-848): `uniform` (the default) and `range`.

An assignor maps each member to the partitions it should own (the target assignment), from the
members' subscribed topic ids, the partition counts of those topics and the previous target. Pure
functions over plain data: the coordinator calls them when the group epoch moves.
"""

from __future__ import annotations

from collections.abc import Mapping, Set

__all__ = ["ASSIGNORS", "Assignment", "assign_range", "assign_uniform"]

# topic id -> partition indexes
Assignment = dict[bytes, set[int]]


def assign_uniform(
    subscriptions: Mapping[str, Set[bytes]],
    partitions: Mapping[bytes, int],
    previous: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    """Every subscribed partition to one member, member loads differing by at most one among members
    that could take a partition, keeping a partition where it was whenever balance allows (sticky)."""
    members = sorted(subscriptions)
    owner: dict[tuple[bytes, int], str] = {}
    load = dict.fromkeys(members, 0)
    wanted = [
        (t, p)
        for t in sorted({t for s in subscriptions.values() for t in s})
        for p in range(partitions.get(t, 0))
    ]
    eligible = {tp: [m for m in members if tp[0] in subscriptions[m]] for tp in wanted}
    # A member keeps what it had (still subscribed) up to the even share (rounded down) of what it
    # may take, then one more while the remainder lasts: with the same subscriptions, a member that
    # joins or leaves moves only its own share, never partitions between the others.
    n = max(1, len(members))
    floor = {m: sum(1 for tp in wanted if tp[0] in subscriptions[m]) // n for m in members}
    extra = len(wanted) - sum(floor.values()) if members else 0
    kept: dict[str, list[tuple[bytes, int]]] = {
        m: [
            (t, p)
            for t, ps in sorted(previous.get(m, {}).items())
            if t in subscriptions[m]
            for p in sorted(ps)
            if (t, p) in eligible
        ]
        for m in members
    }
    for m in members:
        for tp in kept[m]:
            if tp not in owner and load[m] < floor[m]:
                owner[tp] = m
                load[m] += 1
    for m in members:
        if extra <= 0:
            break
        more = next((tp for tp in kept[m] if tp not in owner), None)
        if more is not None:
            owner[more] = m
            load[m] += 1
            extra -= 1
    # The rest to the least loaded member that may take it, the most constrained partitions first.
    for tp in sorted((tp for tp in wanted if tp not in owner), key=lambda tp: (len(eligible[tp]), tp)):
        if eligible[tp]:
            m = min(eligible[tp], key=lambda m: (load[m], m))
            owner[tp] = m
            load[m] += 1
    _even_out(owner, load, eligible)
    out: dict[str, Assignment] = {m: {} for m in members}
    for (t, p), m in owner.items():
        out[m].setdefault(t, set()).add(p)
    return out


def _even_out(
    owner: dict[tuple[bytes, int], str], load: dict[str, int], eligible: Mapping[tuple[bytes, int], list[str]]
) -> None:
    """Move partitions from the most to the least loaded members until no move narrows the gap
    (heterogeneous subscriptions can leave the greedy pass uneven)."""
    moved = True
    while moved:
        moved = False
        for tp, m in sorted(owner.items(), key=lambda item: -load[item[1]]):
            if not eligible[tp]:
                continue
            target = min(eligible[tp], key=lambda x: (load[x], x))
            if load[m] - load[target] > 1:
                owner[tp] = target
                load[m] -= 1
                load[target] += 1
                moved = True


def assign_range(
    subscriptions: Mapping[str, Set[bytes]],
    partitions: Mapping[bytes, int],
    previous: Mapping[str, Mapping[bytes, Set[int]]],
) -> dict[str, Assignment]:
    """Per topic, its subscribers (sorted by member id) take contiguous ranges; the first
    `partitions % members` take one more (Kafka's RangeAssignor, co-partitioning topics)."""
    del previous  # ranges follow from the sorted members alone
    out: dict[str, Assignment] = {m: {} for m in subscriptions}
    for t in sorted({t for s in subscriptions.values() for t in s}):
        subs = sorted(m for m, s in subscriptions.items() if t in s)
        n = partitions.get(t, 0)
        base, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = base + (1 if i < extra else 0)
            if count:
                out[m][t] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS = {"uniform": assign_uniform, "range": assign_range}
