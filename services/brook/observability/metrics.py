"""Brook's Prometheus metrics, with Kafka's meaning.

Events (bytes, messages, requests, ISR changes) are counted by `BrokerMetrics` from the hot paths, once
per request-partition (never per record). State (logs, replication health, controller, lag,
connections) is read at scrape time by `StateCollector` from a `BrokerView`. Each broker has its own
`CollectorRegistry`, so several brokers can live in one process (tests).

Broker identity: no `broker` label on the series. Each broker is its own scrape target, so Prometheus'
target labels (`instance`, and `pod`/`namespace` under a ServiceMonitor) already tell brokers apart;
`brook_broker_info{broker="<node id>"} 1` gives the Kafka broker id when it is needed
(`... * on (instance) group_left (broker) brook_broker_info`). Kafka's per-broker "all topics" value is
a sum over the `topic` label in PromQL.

Request names are Kafka's (the `request` tag of kafka.network RequestMetrics): `Produce`,
`FetchConsumer`, `FetchFollower`, `Metadata`, `OffsetCommit`, ... Fetch is split by role as Kafka does.

=========================================  ===============================================================
Brook metric                               Kafka equivalent
=========================================  ===============================================================
brook_broker_bytes_in_total{topic}          kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec,topic=T
brook_broker_bytes_out_total{topic}         ...BrokerTopicMetrics,name=BytesOutPerSec,topic=T (consumers)
brook_broker_messages_in_total{topic}       ...BrokerTopicMetrics,name=MessagesInPerSec,topic=T
brook_broker_replication_bytes_in_total     ...BrokerTopicMetrics,name=ReplicationBytesInPerSec
brook_broker_replication_bytes_out_total    ...BrokerTopicMetrics,name=ReplicationBytesOutPerSec
brook_request_total{api}                    kafka.network:type=RequestMetrics,name=RequestsPerSec,request=A
brook_request_errors_total{api,error}       kafka.network:type=RequestMetrics,name=ErrorsPerSec,request,error
brook_request_duration_seconds{api}         kafka.network:type=RequestMetrics,name=TotalTimeMs,request=A
  (histogram; seconds, not ms)
brook_isr_shrinks_total                     kafka.server:type=ReplicaManager,name=IsrShrinksPerSec
brook_isr_expands_total                     kafka.server:type=ReplicaManager,name=IsrExpandsPerSec
brook_under_replicated_partitions           kafka.server:type=ReplicaManager,name=UnderReplicatedPartitions
brook_under_min_isr_partitions              kafka.server:type=ReplicaManager,name=UnderMinIsrPartitionCount
brook_at_min_isr_partitions                 kafka.server:type=ReplicaManager,name=AtMinIsrPartitionCount
brook_offline_log_directory_count           kafka.log:type=LogManager,name=OfflineLogDirectoryCount
brook_partitions                            kafka.server:type=ReplicaManager,name=PartitionCount
brook_leader_count                          kafka.server:type=ReplicaManager,name=LeaderCount
brook_offline_partitions_count              kafka.controller:type=KafkaController,name=OfflinePartitionsCount
brook_active_controller_count               kafka.controller:type=KafkaController,name=ActiveControllerCount
brook_partition_replicas{topic,partition}   kafka.cluster:type=Partition,name=ReplicasCount (leader only)
brook_partition_in_sync_replicas{...}       kafka.cluster:type=Partition,name=InSyncReplicasCount
brook_log_size_bytes{topic,partition}       kafka.log:type=Log,name=Size,topic=T,partition=P
brook_log_start_offset{topic,partition}     kafka.log:type=Log,name=LogStartOffset,...
brook_log_end_offset{topic,partition}       kafka.log:type=Log,name=LogEndOffset,...
brook_high_watermark{topic,partition}       (none; kafka_exporter's kafka_topic_partition_current_offset)
brook_consumer_group_committed_offset{...}  (none; kafka_exporter's kafka_consumergroup_current_offset)
brook_consumer_group_lag{group,topic,part}  (none; kafka_exporter's kafka_consumergroup_lag)
brook_consumer_groups{protocol,state}       kafka.server:type=group-coordinator-metrics,name=group-count
  (protocol=classic|consumer) and consumer-group-count / classic-group-count by state
brook_consumer_group_rebalances_total       ...group-coordinator-metrics,name=consumer-group-rebalance-count
  {protocol}                                  and classic-group-completed-rebalance-count
brook_open_connections                      kafka.server:type=socket-server-metrics,name=connection-count
brook_share_records_acquired_total          kafka.server:type=share-group-metrics (KIP-932's record counts:
brook_share_records_acknowledged_total        acquired, acknowledged, released, archived and lock expiries
brook_share_records_released_total            on the share-partitions of partitions led here)
brook_share_records_archived_total
brook_share_lock_expiries_total
brook_share_partition_start_offset{...}     (none; a share group's start offset, group/topic/partition)
brook_share_partition_in_flight_records     (none; records between the start offset and the next never
brook_share_partition_acquired_records        delivered, and those acquired now)
brook_broker_info{broker}                   (the broker id; kafka.server:type=app-info)
brook_metrics_collect_errors_total          (Brook's own: parts of scrapes the view failed to answer)
=========================================  ===============================================================

Consumer lag is log end as consumers see it (the last stable offset: the high watermark, which
ListOffsets LATEST answers and KEDA and kafka_exporter use, unless a transaction is open, when
read_committed consumers stop at its first record) minus the committed offset, floored at 0. A broker
exports it for the groups it coordinates on partitions it hosts; in a cluster the coordinator may not
host a partition, so `assets/alerts.yaml` also records `brook:consumer_group_lag` from
`brook_high_watermark` and `brook_consumer_group_committed_offset` across brokers, which is complete
(that one measures to the high watermark).
"""

from __future__ import annotations

import contextvars
from bisect import bisect_left
from collections.abc import Iterator, Sequence

import prometheus_client
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

from brook.protocol.errors import ErrorCode
from brook.protocol.versions import ApiKey

from .collector import StateCollector
from .view import BrokerView

# Request latency buckets (seconds): sub-millisecond metadata answers up to long-polling fetches.
LATENCY_BUCKETS: tuple[float, ...] = (
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
)  # fmt: skip

# Fetch request names by role, as Kafka's RequestMetrics names them.
CONSUMER = "consumer"
FOLLOWER = "follower"

# The role of the request being handled, for the dispatcher's on_request: only the Fetch handler knows
# it (replica_id in the body). The dispatcher sets None before awaiting the handler, the handler sets
# CONSUMER or FOLLOWER, the dispatcher reads it back (an awaited coroutine shares the task's context).
REQUEST_ROLE: contextvars.ContextVar[str | None] = contextvars.ContextVar("brook_request_role", default=None)


def request_name(api: int | str, role: str | None = None) -> str:
    """Kafka's request name: ApiKey.LIST_OFFSETS (or 2, or "LIST_OFFSETS") -> "ListOffsets";
    Fetch -> "FetchConsumer" or "FetchFollower" by role."""
    if isinstance(api, int):
        try:
            api = ApiKey(api).name
        except ValueError:
            return f"Api{int(api)}"
    if "_" in api or api.isupper():
        api = "".join(word.capitalize() for word in api.split("_"))
    if api == "Fetch":
        return "FetchFollower" if role == FOLLOWER else "FetchConsumer"
    return api


def error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(int(code))


class _RequestStats:
    """One request name's count and latency histogram, as plain numbers (see _HotSeries)."""

    __slots__ = ("buckets", "count", "errors_name", "sum")

    def __init__(self, name: str, nbuckets: int) -> None:
        self.errors_name = name
        self.count = 0
        self.sum = 0.0
        self.buckets = [0] * nbuckets  # per bucket (not cumulative); the last one is +Inf


class _HotSeries(Collector):
    """The series counted on every request (requests, their latency, bytes and records in), kept as
    plain Python numbers and turned into metric families at scrape time: prometheus-client's
    Counter.inc and Histogram.observe take a lock and several calls each, which cost ~4 % of the broker's
    CPU on small Produce requests (docs/benchmarks.md, issue 12)."""

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = tuple(b for b in bounds if b != float("inf"))  # +Inf is always the last bucket
        self.le = [floatToGoString(b) for b in self.bounds] + ["+Inf"]  # type: ignore[no-untyped-call]
        self.requests: dict[str, _RequestStats] = {}
        self.topics_in: dict[str, list[int]] = {}  # topic -> [bytes, records]

    def collect(self) -> Iterator[Metric]:
        bytes_in = CounterMetricFamily(
            "brook_broker_bytes_in", "Bytes of records appended by producers.", labels=["topic"]
        )
        messages_in = CounterMetricFamily(
            "brook_broker_messages_in", "Records appended by producers.", labels=["topic"]
        )
        for topic, (nbytes, records) in list(self.topics_in.items()):
            bytes_in.add_metric([topic], nbytes)
            messages_in.add_metric([topic], records)
        requests = CounterMetricFamily(
            "brook_request", "Requests answered, by Kafka request name.", labels=["api"]
        )
        duration = HistogramMetricFamily(
            "brook_request_duration_seconds",
            "Time from a request's dispatch to its response being ready (Kafka's TotalTimeMs).",
            labels=["api"],
        )
        for name, st in list(self.requests.items()):
            requests.add_metric([name], st.count)
            cumulative, total = [], 0
            for le, n in zip(self.le, st.buckets, strict=True):
                total += n
                cumulative.append((le, total))
            duration.add_metric([name], cumulative, st.sum)
        yield from (bytes_in, messages_in, requests, duration)


class BrokerMetrics:
    """The event side: counters and the latency histogram, on this broker's own registry.

    Every method is O(1): labelled children are looked up once per label value and cached in a dict;
    the per-request series are plain numbers exported at scrape time (_HotSeries).
    """

    def __init__(
        self,
        view: BrokerView | None = None,
        registry: CollectorRegistry | None = None,
        latency_buckets: Sequence[float] = LATENCY_BUCKETS,
    ) -> None:
        # `_created` series would double every counter's series count for a value nobody graphs.
        # (Process-wide setting of prometheus-client.)
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self._hot = _HotSeries(latency_buckets)
        r.register(self._hot)
        self._bytes_out = Counter(
            "brook_broker_bytes_out", "Bytes of records sent to consumers.", ["topic"], registry=r
        )
        self._repl_in = Counter(
            "brook_broker_replication_bytes_in",
            "Bytes of records a follower fetched from leaders.",
            registry=r,
        )
        self._repl_out = Counter(
            "brook_broker_replication_bytes_out", "Bytes of records sent to followers.", registry=r
        )
        self._errors = Counter(
            "brook_request_errors",
            "Error codes answered, by request name and Kafka error name (per partition where the "
            "response has one per partition).",
            ["api", "error"],
            registry=r,
        )
        self._isr_shrinks = Counter(
            "brook_isr_shrinks", "Partitions led here whose ISR shrank (once per change).", registry=r
        )
        self._isr_expands = Counter(
            "brook_isr_expands", "Partitions led here whose ISR grew (once per change).", registry=r
        )
        self._throttle = Counter(
            "brook_quota_throttle_seconds",
            "Time clients were throttled for exceeding a quota (Kafka's throttle-time), by quota key.",
            ["quota"],
            registry=r,
        )
        self._refused = Counter(
            "brook_connections_refused",
            "Connections closed at once for a connection limit, by the limit's Kafka name.",
            ["limit"],
            registry=r,
        )
        # Cached children: the label lookup of prometheus-client costs more than the increment.
        self._in = self._hot.topics_in
        self._out: dict[str, Counter] = {}
        self._req: dict[tuple[int | str, str | None], _RequestStats] = {}
        self._err: dict[tuple[str, int], Counter] = {}
        self._collector: StateCollector | None = None
        if view is not None:
            self.attach(view)

    def attach(self, view: BrokerView) -> None:
        """Export the scrape-time state of `view` (once; call it when the broker can answer it)."""
        if self._collector is not None:
            raise RuntimeError("a broker view is already attached")
        self._collector = StateCollector(view)
        self.registry.register(self._collector)

    # -- hot paths ---------------------------------------------------------------------------------
    def on_produce(self, topic: str, nbytes: int, records: int) -> None:
        """A producer's records were appended to a partition of `topic` (once per request-partition)."""
        c = self._in.get(topic)
        if c is None:
            c = self._in[topic] = [0, 0]
        c[0] += nbytes
        c[1] += records

    def on_fetch_out(self, topic: str, nbytes: int, follower: bool = False) -> None:
        """Record bytes of `topic` went into a Fetch response (consumers: per topic; followers:
        replication bytes, broker-wide, as Kafka counts them)."""
        if follower:
            self._repl_out.inc(nbytes)
            return
        c = self._out.get(topic)
        if c is None:
            c = self._out[topic] = self._bytes_out.labels(topic)
        c.inc(nbytes)

    def on_replication_in(self, nbytes: int) -> None:
        """A follower appended `nbytes` fetched from a leader."""
        self._repl_in.inc(nbytes)

    def on_request(self, api: int | str, role: str | None, seconds: float, error_code: int = 0) -> None:
        """A request was answered after `seconds`. `api`: an ApiKey, its number or a name; `role`:
        "consumer" or "follower" for Fetch (None otherwise). A non-zero `error_code` is counted once."""
        key = (api, role)
        st = self._req.get(key)
        if st is None:
            name = request_name(api, role)
            st = self._hot.requests.get(name)  # "METADATA" and ApiKey.METADATA share one
            if st is None:
                st = self._hot.requests[name] = _RequestStats(name, len(self._hot.le))
            self._req[key] = st
        st.count += 1
        st.sum += seconds
        st.buckets[bisect_left(self._hot.bounds, seconds)] += 1
        if error_code:
            self._count_error(st.errors_name, error_code, 1)

    def on_error(self, api: int | str, role: str | None, error_code: int, count: int = 1) -> None:
        """`count` partitions (or responses) of a request were answered with `error_code`."""
        if error_code:
            self._count_error(request_name(api, role), error_code, count)

    def _count_error(self, name: str, code: int, count: int) -> None:
        c = self._err.get((name, code))
        if c is None:
            c = self._err[(name, code)] = self._errors.labels(name, error_name(code))
        c.inc(count)

    def on_throttle(self, quota: str, ms: int) -> None:
        """A client was throttled `ms` for its `quota` (producer_byte_rate, ...)."""
        self._throttle.labels(quota).inc(ms / 1000)

    def on_connection_refused(self, limit: str) -> None:
        self._refused.labels(limit).inc()

    def on_isr_shrink(self) -> None:
        """A partition led here shrank its ISR (call once per partition and change)."""
        self._isr_shrinks.inc()

    def on_isr_expand(self) -> None:
        """A partition led here grew its ISR (call once per partition and change)."""
        self._isr_expands.inc()

    # -- cardinality -------------------------------------------------------------------------------
    def forget_topic(self, topic: str) -> None:
        """Drop a deleted topic's counters (state gauges disappear by themselves)."""
        self._in.pop(topic, None)
        if self._out.pop(topic, None) is not None:
            self._bytes_out.remove(topic)
