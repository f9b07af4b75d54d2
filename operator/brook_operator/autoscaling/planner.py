"""Partition moves that balance a cluster over a set of brokers (pure).

Given every partition's replicas and the brokers that should hold them, the plan:
1. moves every replica held by a broker outside the set (scale-in: the departing ordinals) to the
   broker of the set with the fewest replicas that does not hold the partition yet;
2. then, while the fullest broker holds two or more replicas more than the emptiest, moves one replica
   from the fullest to the emptiest (never onto a broker that already holds the partition). Among the
   candidates it prefers partitions the source leads when the source leads more partitions than the
   destination (the moved replica keeps its position, so the destination becomes the preferred leader
   and, when the move completes, the leader), else partitions it follows; and among those, partitions
   of the topic the source holds (or leads) most more of than the destination, so each topic, and the
   produce traffic its leaders take, spreads too.

Each move replaces one replica in place, so the replication factor and the order of the others are
kept. Without departing brokers the number of replica moves is the minimum for balanced counts (each
broker above its share gives up exactly its excess); a replica leaving a departing broker moves once,
and can only go where its partition is not, which costs at most one more move.

Partitions being moved already (`fixed`: their target replicas) count as they will be and are not
moved again. Moves come in the order the balancing chose them, so a plan can be carried out a few
moves at a time, planning again after each batch (which may cost a replica move or two more than the
whole plan at once; the tests bound it).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True)
class Assignment:
    topic: str
    partition: int
    replicas: tuple[int, ...]  # the first is the preferred leader

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class Move:
    topic: str
    partition: int
    current: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def key(self) -> PartitionKey:
        return (self.topic, self.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition} {list(self.current)} → {list(self.target)}"


@dataclass(frozen=True, slots=True)
class Plan:
    moves: tuple[Move, ...]
    unplaceable: tuple[PartitionKey, ...] = ()  # replication factor above the number of brokers

    @property
    def done(self) -> bool:
        return not self.moves


def replica_counts(assignments: Iterable[Assignment], brokers: Iterable[int]) -> dict[int, int]:
    """broker → replicas it holds (every broker of `brokers` present, others only if they hold some)."""
    counts = dict.fromkeys(brokers, 0)
    for a in assignments:
        for b in a.replicas:
            counts[b] = counts.get(b, 0) + 1
    return counts


def leader_counts(assignments: Iterable[Assignment], brokers: Iterable[int]) -> dict[int, int]:
    """broker → partitions whose preferred leader (first replica) it is."""
    counts = dict.fromkeys(brokers, 0)
    for a in assignments:
        if a.replicas:
            counts[a.replicas[0]] = counts.get(a.replicas[0], 0) + 1
    return counts


def is_balanced(assignments: Sequence[Assignment], brokers: Collection[int]) -> bool:
    """Every replica on a broker of the set and replica counts within one of each other."""
    counts = replica_counts(assignments, brokers)
    if any(b not in brokers and n for b, n in counts.items()):
        return False
    inside = [counts[b] for b in brokers]
    return not inside or max(inside) - min(inside) <= 1


def plan(
    assignments: Sequence[Assignment],
    brokers: Collection[int],
    *,
    fixed: Collection[PartitionKey] = (),
) -> Plan:
    """The moves that put every partition on `brokers` and balance replica counts over them."""
    members = sorted(set(brokers))
    if not members:
        return Plan((), tuple(a.key for a in assignments))
    b = _Balancer(assignments, members, set(fixed))

    # 1. Replicas on brokers outside the set go to the emptiest broker that lacks the partition.
    unplaceable: list[PartitionKey] = []
    for key in b.order:
        reps = b.replicas[key]
        if key in b.pinned or all(x in b.inside for x in reps):
            continue
        if len(reps) > len(members):
            unplaceable.append(key)
            continue
        for pos, old in enumerate(list(reps)):
            if old not in b.inside:  # some broker of the set lacks the partition: RF <= len(members)
                b.place(key, pos, old, min((u for u in members if u not in reps), key=b.fill_rank(key, pos)))

    # 2. Fullest → emptiest until the counts are within one of each other.
    while (step := b.balancing_step()) is not None:
        b.place(*step)

    moves = tuple(
        Move(key[0], key[1], b.current[key], tuple(b.replicas[key]))
        for key in sorted(b.touched, key=b.touched.__getitem__)
        if tuple(b.replicas[key]) != b.current[key]
    )
    return Plan(moves, tuple(unplaceable))


class _Balancer:
    """The assignment being planned, with replica and preferred-leader counts per broker, overall and
    per topic (so a topic's partitions, and the produce traffic its leaders take, spread too)."""

    def __init__(
        self, assignments: Sequence[Assignment], members: list[int], pinned: set[PartitionKey]
    ) -> None:
        self.members = members
        self.inside = set(members)
        self.pinned = pinned
        self.current = {a.key: a.replicas for a in assignments}
        self.replicas: dict[PartitionKey, list[int]] = {a.key: list(a.replicas) for a in assignments}
        self.order = sorted(self.replicas)
        self.counts: Counter[int] = Counter(dict.fromkeys(members, 0))
        self.leaders: Counter[int] = Counter(dict.fromkeys(members, 0))
        self.topic_counts: Counter[tuple[str, int]] = Counter()
        self.topic_leaders: Counter[tuple[str, int]] = Counter()
        self.touched: dict[PartitionKey, int] = {}  # partition → the step that first changed it
        self.holding: dict[int, set[PartitionKey]] = {x: set() for x in members}  # movable partitions
        for key in self.order:
            if key not in pinned:
                for x in self.replicas[key]:
                    if x in self.inside:
                        self.holding[x].add(key)
            for pos, x in enumerate(self.replicas[key]):
                if x in self.inside:
                    self._add(key, pos, x, 1)

    def _add(self, key: PartitionKey, pos: int, broker: int, n: int) -> None:
        self.counts[broker] += n
        self.topic_counts[(key[0], broker)] += n
        if pos == 0:
            self.leaders[broker] += n
            self.topic_leaders[(key[0], broker)] += n

    def place(self, key: PartitionKey, pos: int, old: int, new: int) -> None:
        self.touched.setdefault(key, len(self.touched))
        self.replicas[key][pos] = new
        if old in self.inside:
            self._add(key, pos, old, -1)
            self.holding[old].discard(key)
        self._add(key, pos, new, 1)
        if key not in self.pinned:
            self.holding[new].add(key)

    def fill_rank(self, key: PartitionKey, pos: int) -> Callable[[int], tuple[int, int, int, int]]:
        """Where a replica leaving the set goes: fewest replicas, then (a leader) fewest leaders, then
        fewest of this topic."""
        topic = key[0]

        def rank(u: int) -> tuple[int, int, int, int]:
            lead = self.leaders[u] if pos == 0 else 0
            mine = self.topic_leaders[(topic, u)] if pos == 0 else self.topic_counts[(topic, u)]
            return (self.counts[u], lead, mine, u)

        return rank

    def balancing_step(self) -> tuple[PartitionKey, int, int, int] | None:
        """One move from a fullest to an emptiest broker (a candidate partition must exist), or None.

        Among the candidates: a partition the source leads when it leads more than the destination (else
        one it follows), of the topic the source holds (or leads) most more of than the destination."""
        counts, leaders = self.counts, self.leaders
        sources = sorted(self.members, key=lambda x: (-counts[x], -leaders[x], x))
        dests = sorted(self.members, key=lambda x: (counts[x], leaders[x], x))
        for src in sources:
            for dst in dests:
                if counts[src] - counts[dst] <= 1:
                    break
                prefer_leading = leaders[src] > leaders[dst] + 1
                best: tuple[tuple[int, int, PartitionKey], int] | None = None
                for key in self.holding[src]:
                    reps = self.replicas[key]
                    if dst in reps:
                        continue
                    pos = reps.index(src)
                    per_topic = self.topic_leaders if pos == 0 else self.topic_counts
                    skew = per_topic[(key[0], src)] - per_topic[(key[0], dst)]
                    rank = (0 if (pos == 0) == prefer_leading else 1, -skew, key)
                    if best is None or rank < best[0]:
                        best = (rank, pos)
                if best is not None:
                    return best[0][2], best[1], src, dst
        return None
