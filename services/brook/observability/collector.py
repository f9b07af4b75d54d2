"""Gauges that describe state, computed at scrape time from a BrokerView (no background loop updates
them, so they can never be stale or drift from the broker's state)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from .view import BrokerView

log = logging.getLogger(__name__)

_TP = ["topic", "partition"]
_GTP = ["group", "topic", "partition"]
# Share groups' record counters (KIP-932), in ShareRecordCounts' order.
_SHARE_COUNTS = {
    "brook_share_records_acquired": "Records acquired by share group members (each delivery).",
    "brook_share_records_acknowledged": "Records accepted by share group members.",
    "brook_share_records_released": "Records released by members or when their share session closed.",
    "brook_share_records_archived": "Records rejected, or archived at the delivery count limit.",
    "brook_share_lock_expiries": "Acquired records whose acquisition lock ran out.",
}


def _gauge(name: str, doc: str, labels: list[str] | None = None) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, doc, labels=labels)


class StateCollector(Collector):
    """Reads the view once per scrape: O(hosted partitions + committed offsets)."""

    def __init__(self, view: BrokerView) -> None:
        self._view = view
        self._errors = 0  # sections that raised during a scrape (logged; the rest is still exported)

    def describe(self) -> Iterator[Metric]:
        # Names only, so the registry detects collisions without reading the broker at registration.
        yield from self._families()

    def collect(self) -> Iterator[Metric]:
        f = self._families()
        view = self._view
        fam = {m.name: m for m in f}
        try:
            fam["brook_broker_info"].add_sample("brook_broker_info", {"broker": str(view.node_id)}, 1)
        except Exception:
            self._failed("broker info")

        try:
            controller = view.is_controller()
            fam["brook_active_controller_count"].add_sample(
                "brook_active_controller_count", {}, 1 if controller else 0
            )
            offline = view.offline_partitions() if controller else 0
            fam["brook_offline_partitions_count"].add_sample("brook_offline_partitions_count", {}, offline)
        except Exception:
            self._failed("controller")

        try:
            fam["brook_offline_log_directory_count"].add_sample(
                "brook_offline_log_directory_count", {}, view.offline_log_dirs()
            )
        except Exception:
            self._failed("log directories")

        # Partitions: per-replica log gauges, broker-level counts, and the stable ends lag needs (the last
        # stable offset: the high watermark unless a transaction is open, as read_committed reads).
        hw: dict[tuple[str, int], int] = {}
        try:
            size, start, end, hwm = (
                fam["brook_log_size_bytes"],
                fam["brook_log_start_offset"],
                fam["brook_log_end_offset"],
                fam["brook_high_watermark"],
            )
            n_replicas, n_isr = fam["brook_partition_replicas"], fam["brook_partition_in_sync_replicas"]
            hosted = leaders = urp = under_min = at_min = 0
            for p in view.partitions():
                topic, index = p.topic, p.index
                labels = {"topic": topic, "partition": str(index)}
                high = p.high_watermark
                size.add_sample("brook_log_size_bytes", labels, p.log_size_bytes)
                start.add_sample("brook_log_start_offset", labels, p.log_start_offset)
                end.add_sample("brook_log_end_offset", labels, p.log_end_offset)
                hwm.add_sample("brook_high_watermark", labels, high)
                hosted += 1
                hw[(topic, index)] = p.last_stable_offset  # a follower's mirrors its leader's
                if not p.is_leader:
                    continue
                leaders += 1
                replicas, isr = len(p.replicas), len(p.isr)
                n_replicas.add_sample("brook_partition_replicas", labels, replicas)
                n_isr.add_sample("brook_partition_in_sync_replicas", labels, isr)
                if isr < replicas:
                    urp += 1
                min_isr = p.min_insync_replicas
                if isr < min_isr:
                    under_min += 1
                elif isr == min_isr:
                    at_min += 1
            for name, value in (
                ("brook_partitions", hosted),
                ("brook_leader_count", leaders),
                ("brook_under_replicated_partitions", urp),
                ("brook_under_min_isr_partitions", under_min),
                ("brook_at_min_isr_partitions", at_min),
            ):
                fam[name].add_sample(name, {}, value)
        except Exception:
            self._failed("partitions")

        try:
            committed, lag = fam["brook_consumer_group_committed_offset"], fam["brook_consumer_group_lag"]
            for group, topic, partition, offset in view.group_offsets():
                if offset < 0:  # -1: "no offset" (a commit of -1 is how some clients reset)
                    continue
                labels = {"group": group, "topic": topic, "partition": str(partition)}
                committed.add_sample("brook_consumer_group_committed_offset", labels, offset)
                # Hosted here; otherwise the recording rule brook:consumer_group_lag has it.
                readable = hw.get((topic, partition))
                if readable is not None:
                    lag.add_sample("brook_consumer_group_lag", labels, max(readable - offset, 0))
        except Exception:
            self._failed("consumer groups")

        try:
            for protocol, state, n in view.groups():
                labels = {"protocol": protocol, "state": state}
                fam["brook_consumer_groups"].add_sample("brook_consumer_groups", labels, n)
            for protocol, n in view.group_rebalances():
                fam["brook_consumer_group_rebalances"].add_sample(
                    "brook_consumer_group_rebalances_total", {"protocol": protocol}, n
                )
        except Exception:
            self._failed("group coordinator")

        try:
            counts = view.share_records()
            for name, value in zip(_SHARE_COUNTS, counts, strict=True):
                fam[name].add_sample(f"{name}_total", {}, value)
            start, in_flight, acquired = (
                fam[n]
                for n in (
                    "brook_share_partition_start_offset",
                    "brook_share_partition_in_flight_records",
                    "brook_share_partition_acquired_records",
                )
            )
            for st in view.share_partitions():
                labels = {"group": st.group, "topic": st.topic, "partition": str(st.partition)}
                start.add_sample(start.name, labels, st.start_offset)
                in_flight.add_sample(in_flight.name, labels, st.in_flight)
                acquired.add_sample(acquired.name, labels, st.acquired)
        except Exception:
            self._failed("share groups")

        try:
            fam["brook_open_connections"].add_sample("brook_open_connections", {}, view.open_connections())
        except Exception:
            self._failed("connections")

        fam["brook_metrics_collect_errors"].add_sample("brook_metrics_collect_errors_total", {}, self._errors)
        yield from f

    def _failed(self, section: str) -> None:
        self._errors += 1
        log.exception("metrics: reading %s from the broker failed; that part of the scrape is empty", section)

    @staticmethod
    def _families() -> list[Metric]:
        return [
            _gauge(
                "brook_broker_info",
                "This broker's id (join on the target labels for a broker label).",
                ["broker"],
            ),
            _gauge("brook_active_controller_count", "1 while this broker is the active controller."),
            _gauge(
                "brook_offline_partitions_count",
                "Partitions without a live leader (reported by the active controller, 0 elsewhere).",
            ),
            _gauge(
                "brook_offline_log_directory_count",
                "Log directories of this broker taken offline by a failed write (a full disk, I/O errors).",
            ),
            _gauge("brook_partitions", "Partition replicas hosted by this broker."),
            _gauge("brook_leader_count", "Partitions led by this broker."),
            _gauge(
                "brook_under_replicated_partitions",
                "Partitions led here whose ISR is smaller than their replica set.",
            ),
            _gauge(
                "brook_under_min_isr_partitions",
                "Partitions led here whose ISR is smaller than min.insync.replicas.",
            ),
            _gauge(
                "brook_at_min_isr_partitions",
                "Partitions led here whose ISR size equals min.insync.replicas.",
            ),
            _gauge("brook_partition_replicas", "Replicas of a partition led here.", _TP),
            _gauge("brook_partition_in_sync_replicas", "In-sync replicas of a partition led here.", _TP),
            _gauge("brook_log_size_bytes", "Bytes of a hosted partition's log (all segments).", _TP),
            _gauge("brook_log_start_offset", "First offset of a hosted partition's log.", _TP),
            _gauge("brook_log_end_offset", "Offset the next record appended to the log gets.", _TP),
            _gauge(
                "brook_high_watermark",
                "Offset up to which the partition is committed (what consumers can read).",
                _TP,
            ),
            _gauge(
                "brook_consumer_group_committed_offset",
                "Offset committed by a consumer group (groups this broker coordinates).",
                _GTP,
            ),
            _gauge(
                "brook_consumer_group_lag",
                "High watermark minus committed offset, where this broker hosts the partition.",
                _GTP,
            ),
            _gauge(
                "brook_consumer_groups",
                "Groups this broker coordinates, by protocol (classic, consumer) and state.",
                ["protocol", "state"],
            ),
            CounterMetricFamily(
                "brook_consumer_group_rebalances",
                "Rebalances run by this broker's coordinator: classic joins completed, consumer "
                "protocol target assignments computed.",
                labels=["protocol"],
            ),
            _gauge("brook_open_connections", "Connections open on the Kafka listener."),
            *(CounterMetricFamily(name, doc) for name, doc in _SHARE_COUNTS.items()),
            _gauge(
                "brook_share_partition_start_offset",
                "A share group's start offset on a partition led here (below it all is done).",
                _GTP,
            ),
            _gauge(
                "brook_share_partition_in_flight_records",
                "Records of a share-partition between its start offset and the next never delivered.",
                _GTP,
            ),
            _gauge(
                "brook_share_partition_acquired_records", "Records of a share-partition acquired now.", _GTP
            ),
            CounterMetricFamily(
                "brook_metrics_collect_errors",
                "Parts of scrapes whose broker state could not be read (logged).",
            ),
        ]
