"""Replica placement: Kafka's algorithm (AdminUtils.assignReplicasToBrokers), pure.

Rack-unaware: partition p's first replica (its preferred leader) is broker (start + p) mod n of the
sorted brokers, and the others follow at a shift that grows by one after every n partitions, so
leaders and followers both spread evenly.

Rack-aware (every broker has a rack): the brokers are first listed alternating between racks
(rack a's first broker, rack b's first, ..., rack a's second, ...), the leaders are placed as above
over that list, and each further replica skips brokers whose rack already holds a replica of the
partition until every rack holds one, so each partition spans min(RF, racks) racks.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


class PlacementError(ValueError):
    pass


def assign_replicas(
    brokers: Sequence[tuple[int, str | None]],
    partitions: int,
    replication_factor: int,
    start_index: int | None = None,
    *,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> list[list[int]]:
    """Replica lists (preferred leader first) for partitions start_partition .. start_partition +
    partitions - 1, over `brokers` as (broker id, rack or None).

    `start_index` fixes where the round-robin begins (Kafka picks it at random, which `rng` can seed);
    when adding partitions to a topic pass the existing partition count as `start_partition` and the
    index of partition 0's leader as `start_index` to continue the same pattern (the follower shift
    continues too, where Kafka restarts it: for start_partition 0 both give the same result).
    """
    if partitions <= 0:
        raise PlacementError(f"the number of partitions must be positive, got {partitions}")
    if replication_factor <= 0:
        raise PlacementError(f"the replication factor must be positive, got {replication_factor}")
    ids = [b for b, _ in brokers]
    if len(set(ids)) != len(ids):
        raise PlacementError(f"duplicate broker ids in {sorted(ids)}")
    if replication_factor > len(brokers):
        raise PlacementError(
            f"replication factor {replication_factor} is larger than the {len(brokers)} available brokers"
        )
    if start_partition < 0:
        raise PlacementError("start_partition cannot be negative")
    racks = {b: r for b, r in brokers if r is not None}
    with_rack = list(racks)
    if with_rack and len(with_rack) != len(brokers):
        missing = sorted(b for b, r in brokers if r is None)
        raise PlacementError(f"some brokers have a rack and some do not (no rack: {missing}); set one on all")
    rng = rng or random.Random()
    n = len(brokers)
    start = start_index if start_index is not None else rng.randrange(n)
    shift = start_index if start_index is not None else rng.randrange(n)
    if not with_rack:
        return _unaware(sorted(ids), partitions, replication_factor, start, shift, start_partition)
    return _rack_aware(racks, partitions, replication_factor, start, shift, start_partition)


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _unaware(
    ids: list[int], partitions: int, rf: int, start: int, shift: int, first_p: int
) -> list[list[int]]:
    n = len(ids)
    out: list[list[int]] = []
    for p in range(first_p, first_p + partitions):
        first = (p + start) % n
        s = shift + p // n
        out.append([ids[first]] + [ids[_replica_index(first, s, j, n)] for j in range(rf - 1)])
    return out


def rack_alternated(racks: dict[int, str]) -> list[int]:
    """Brokers listed alternating between racks (racks in name order, brokers by id within one)."""
    by_rack: dict[str, list[int]] = {}
    for b in sorted(racks):
        by_rack.setdefault(racks[b], []).append(b)
    names = sorted(by_rack)
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for name in names:
            if i < len(by_rack[name]):
                out.append(by_rack[name][i])
        i += 1
    return out


def _rack_aware(
    racks: dict[int, str], partitions: int, rf: int, start: int, shift: int, first_p: int
) -> list[list[int]]:
    arranged = rack_alternated(racks)
    n = len(arranged)
    n_racks = len(set(racks.values()))
    out: list[list[int]] = []
    for p in range(first_p, first_p + partitions):
        first = (p + start) % n
        s = (shift + p // n) * n_racks
        leader = arranged[first]
        replicas = [leader]
        used_racks = {racks[leader]}
        used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                b = arranged[_replica_index(first, s, k, n)]
                k += 1
                rack_ok = racks[b] not in used_racks or len(used_racks) == n_racks
                broker_ok = b not in used or len(used) == n
                if rack_ok and broker_ok:
                    replicas.append(b)
                    used_racks.add(racks[b])
                    used.add(b)
                    break
        out.append(replicas)
    return out
