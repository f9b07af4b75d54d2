"""The group coordinator's settings (Kafka's names in comments) and the offsets topic's name."""

from __future__ import annotations

from dataclasses import dataclass, field

OFFSETS_TOPIC = "__consumer_offsets"


@dataclass(slots=True)
class GroupSettings:
    offsets_topic_partitions: int = 50  # offsets.topic.num.partitions
    offsets_topic_replication_factor: int = 1  # offsets.topic.replication.factor
    offsets_retention_minutes: int = 7 * 24 * 60  # offsets.retention.minutes
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    min_session_timeout_ms: int = 6_000  # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000  # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000  # group.initial.rebalance.delay.ms
    offset_metadata_max_bytes: int = 4096  # offset.metadata.max.bytes
    classic_max_size: int = 2**31 - 1  # group.max.size: most members in a classic group
    # The consumer group protocol (KIP-848): the broker owns sessions, heartbeats and assignors.
    consumer_heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    consumer_session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    consumer_max_size: int = 2**31 - 1  # group.consumer.max.size
    consumer_assignors: tuple[str, ...] = field(default=("uniform", "range"))  # group.consumer.assignors
    # group.consumer.migration.policy: which way a live group may change protocol (KIP-848's online
    # migration): bidirectional (Kafka 4.x's default), upgrade, downgrade or disabled.
    consumer_migration_policy: str = "bidirectional"

    @property
    def upgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "upgrade")

    @property
    def downgrade_enabled(self) -> bool:
        return self.consumer_migration_policy in ("bidirectional", "downgrade")
