"""What the metrics collector reads at scrape time: a read-only view of this broker and its server."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Sequence

from brook.broker.broker import Broker
from brook.broker.partition import Partition
from brook.observability.view import SharePartitionStat, ShareRecordCounts

from .listener import KafkaServer


class PartitionState:
    __slots__ = ("_p",)

    def __init__(self, p: Partition) -> None:
        self._p = p

    @property
    def topic(self) -> str:
        return self._p.topic

    @property
    def index(self) -> int:
        return self._p.index

    @property
    def is_leader(self) -> bool:
        return self._p.is_leader

    @property
    def replicas(self) -> Sequence[int]:
        return self._p.role.replicas

    @property
    def isr(self) -> Sequence[int]:
        return self._p.role.isr

    @property
    def log_size_bytes(self) -> int:
        return self._p.log.size_bytes

    @property
    def log_start_offset(self) -> int:
        return self._p.log.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._p.log.log_end_offset

    @property
    def high_watermark(self) -> int:
        return self._p.high_watermark

    @property
    def last_stable_offset(self) -> int:
        return self._p.last_stable_offset

    @property
    def min_insync_replicas(self) -> int:
        return self._p.log.config.min_insync_replicas


class BrokerState:
    def __init__(self, broker: Broker, server: KafkaServer) -> None:
        self.broker = broker
        self.server = server

    @property
    def node_id(self) -> int:
        return self.broker.node_id

    def is_controller(self) -> bool:
        return self.broker.controller_id == self.broker.node_id

    def offline_partitions(self) -> int:
        return self.broker.metadata.offline_partitions()

    def offline_log_dirs(self) -> int:
        return 1 if self.broker.replicas.log_dir.offline else 0

    def partitions(self) -> Iterable[PartitionState]:
        return [PartitionState(p) for p in self.broker.replicas.partitions()]

    def group_offsets(self) -> Iterator[tuple[str, str, int, int]]:
        coordinator = self.broker.groups
        ids = [g.group_id for g in coordinator.list_groups()]
        ids += [g.group_id for g in coordinator.consumer.list_groups()]
        for group_id in ids:
            _, offsets = coordinator.fetch_offsets(group_id, None)
            for topic, partition, value in offsets:
                if value is not None:
                    yield group_id, topic, partition, value.offset

    def groups(self) -> Iterator[tuple[str, str, int]]:
        coordinator = self.broker.groups
        classic = Counter(g.state.value for g in coordinator.list_groups())
        consumer = Counter(g.state for g in coordinator.consumer.list_groups())
        for protocol, counts in (("classic", classic), ("consumer", consumer)):
            for state, n in sorted(counts.items()):
                yield protocol, state, n

    def group_rebalances(self) -> Iterator[tuple[str, int]]:
        yield "classic", self.broker.groups.rebalances
        yield "consumer", self.broker.groups.consumer.rebalances

    def open_connections(self) -> int:
        return len(self.server.connections)

    def share_records(self) -> ShareRecordCounts:
        c = self.broker.share.totals()
        return ShareRecordCounts(c.acquired, c.acknowledged, c.released, c.archived, c.lock_expiries)

    def share_partitions(self) -> Iterator[SharePartitionStat]:
        for key, sp in self.broker.share.partitions.items():
            meta = self.broker.replicas.topic_by_id(key.topic_id)
            if meta is not None:
                yield SharePartitionStat(
                    key.group_id, meta.name, key.partition, sp.start_offset, sp.in_flight, sp.acquired_count()
                )

    def ready(self) -> tuple[bool, str]:
        """Ready for traffic: listening, its log directory online, and in a cluster registered and in
        sync where it replicates."""
        log_dir = self.broker.replicas.log_dir
        if log_dir.failure is not None:
            return False, f"log directory {log_dir.path} is offline: {log_dir.failure}"
        if not self.broker.metadata.registered:
            return False, "not registered in the cluster"
        behind = [
            f"{p.topic}-{p.index}"
            for p in self.broker.replicas.partitions()
            if p.role.leader >= 0 and self.broker.node_id not in p.role.isr
        ]
        if behind:
            return False, f"catching up on {len(behind)} partitions, e.g. {behind[0]}"
        return True, "serving"
