"""How many partition replicas a broker may host: a limit the admin API enforces (as KIP-578 proposed).

Each hosted replica holds an open file (its active segment), so a broker past its open-file limit
fails to open logs (EMFILE), which takes its log directory offline. Refusing a CreateTopics or
CreatePartitions that would go past the limit, with POLICY_VIOLATION and a message naming the broker
and the way out, is a clear answer instead. The default, a quarter of the open-file limit, is what
max.connections (three quarters by default) leaves; segments already read keep a file open too, so
it is a ceiling, not a reservation. Brook's own internal topics are counted but never refused: the
cluster cannot work without them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from brook.metadata import BrokerInfo, Reassignment, TopicRecord
from brook.protocol.errors import ErrorCode, KafkaError

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


def partition_budget(configured: int, open_files: int) -> int:
    """max.broker.partitions: `configured` when set (>= 0), else a quarter of the open-file limit."""
    return configured if configured >= 0 else max(open_files // 4, 1)


def replicas_per_broker(assignments: Iterable[Sequence[Sequence[int]]]) -> Counter[int]:
    """Replicas each broker hosts, over topics' assignments (a replica list per partition)."""
    counts: Counter[int] = Counter()
    for assignment in assignments:
        for replicas in assignment:
            counts.update(replicas)
    return counts


def check_budget(
    topic: str,
    hosted: Mapping[int, int],
    adding: Sequence[Sequence[int]],
    budgets: Mapping[int, int | None],
) -> None:
    """POLICY_VIOLATION when placing `adding` (replica lists) would take a broker past its budget
    (None: the broker announced none, an older version: not checked)."""
    if topic in INTERNAL_TOPICS:
        return
    extra = replicas_per_broker([adding])
    for broker, n in sorted(extra.items()):
        budget = budgets.get(broker)
        have = hosted.get(broker, 0)
        if budget is not None and have + n > budget:
            raise KafkaError(
                ErrorCode.POLICY_VIOLATION,
                f"topic '{topic}': broker {broker} hosts {have} partition replicas and would get {n} more, "
                f"past its max.broker.partitions of {budget}; raise its open-file limit (each replica "
                "keeps a file open) or --max-broker-partitions, add brokers, or use fewer partitions",
            )


def check_cluster_budget(
    topic: str,
    adding: Sequence[Sequence[int]],
    topics: Mapping[str, TopicRecord],
    reassignments: Mapping[tuple[str, int], Reassignment],
    live: Mapping[int, BrokerInfo],
) -> None:
    """check_budget over a cluster's view: replicas being added by reassignments in progress count."""
    hosted = replicas_per_broker(rec.assignment for rec in topics.values())
    for (t, i), moving in reassignments.items():
        rec = topics.get(t)
        if rec is not None and i < rec.partitions:
            hosted.update(b for b in moving.target if b not in rec.assignment[i])
    check_budget(topic, hosted, adding, {b: info.max_partitions for b, info in live.items()})
