"""Writing DataFrames to topics, as Spark's Kafka sink, exactly once per (sink id, batch id).

Columns (as Spark's Kafka sink): value (required, binary or string), key (binary or string), topic
(string; or the `topic` option), partition (int; else the partitioner: murmur2 as the Java client),
headers (array<struct<key: string, value: binary>>).

The protocol (exactlyOnce=true, the default) -- see services/pyspark_brook/README.md for the failure analysis:

1. Tasks stage: each task normalises its rows to Arrow and returns them, as Arrow IPC bytes, in its
   commit message. Nothing is visible in any topic yet, so failed or retried task attempts leave
   nothing behind, and `abort` has nothing to undo.
2. The driver's `commit(messages, batchId)` reads the sink's marker -- the latest record keyed by the
   sink id in the compacted topic `__brook_sink_commits`:
   - `committed` with this batch id (or a later one): the batch is already in the topics; refuse it
     (a replay after a failure between our commit and Spark's commit log). An id older than the
     committed one is an error: a different query (or a reset checkpoint) reuses the sink id.
   - `begin` with this batch id: an earlier attempt died while writing. Scan the target partitions
     from the offsets the marker recorded, count the records carrying this sink's and batch's
     headers, and write only the ones not already there.
   - otherwise: write a `begin` marker holding the target partitions' end offsets, acks=all.
3. The driver produces the records with an idempotent producer (acks=all), each with the headers
   `brook.sink.id` and `brook.sink.batch`, flushes, checks every delivery report.
4. The driver writes the `committed` marker. Only then does Spark write its own commit log.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .kafka import TP, Cluster, headers_of, offset_of
from .options import WriteOptions
from .schema import HEADER_TYPE

log = logging.getLogger("pyspark_brook")

SINK_ID_HEADER = "brook.sink.id"
SINK_BATCH_HEADER = "brook.sink.batch"

STAGED_SCHEMA = pa.schema(
    [
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("headers", HEADER_TYPE),
    ]
)


class BrookSinkError(RuntimeError):
    pass


def check_input_schema(schema: StructType, default_topic: str | None) -> None:
    """Fail at planning time, with Spark's Kafka sink's rules, rather than inside a task."""
    names = {f.name.lower(): f for f in schema.fields}
    if "value" not in names:
        raise BrookSinkError("the DataFrame to write needs a value column (binary or string)")
    if "topic" not in names and not default_topic:
        raise BrookSinkError("the DataFrame to write needs a topic column, or set the topic option")
    allowed = {"key", "value", "topic", "partition", "headers"}
    for name, f in names.items():
        t = f.dataType.simpleString()
        if name in ("key", "value") and t not in ("binary", "string"):
            raise BrookSinkError(f"column {name} must be binary or string, not {t}")
        if name == "topic" and t != "string":
            raise BrookSinkError(f"column topic must be a string, not {t}")
        if name == "partition" and t != "int":
            raise BrookSinkError(f"column partition must be an int, not {t}")
        if name == "headers" and t != "array<struct<key:string,value:binary>>":
            raise BrookSinkError(f"column headers must be array<struct<key:string,value:binary>>, not {t}")
        if name not in allowed:
            log.debug("column %s is not written", name)


def normalise(batch: pa.RecordBatch, default_topic: str | None) -> pa.RecordBatch:
    """Any accepted input shape -> STAGED_SCHEMA (topic filled from the option, strings as bytes)."""
    cols = {name.lower(): batch.column(i) for i, name in enumerate(batch.schema.names)}
    n = batch.num_rows

    def as_binary(name: str) -> pa.Array:
        arr = cols.get(name)
        if arr is None:
            return pa.nulls(n, pa.binary())
        return arr if arr.type == pa.binary() else pc.cast(arr, pa.binary())

    topic = cols.get("topic")
    if topic is None:
        topic = pa.repeat(pa.scalar(default_topic, pa.string()), n)
    elif topic.null_count:
        if not default_topic:
            raise BrookSinkError("null topic present in the data; use the topic option for a default topic")
        topic = pc.fill_null(topic, default_topic)
    partition = cols.get("partition")
    if partition is None:
        partition = pa.nulls(n, pa.int32())
    elif partition.type != pa.int32():
        partition = pc.cast(partition, pa.int32())
    headers = cols.get("headers")
    if headers is None:
        headers = pa.nulls(n, HEADER_TYPE)
    elif headers.type != HEADER_TYPE:
        headers = headers.cast(HEADER_TYPE)
    return pa.RecordBatch.from_arrays(
        [topic, partition, as_binary("key"), as_binary("value"), headers], schema=STAGED_SCHEMA
    )


def rows_of(batch: pa.RecordBatch) -> Iterator[tuple[str, int | None, bytes | None, bytes | None, list[Any]]]:
    topics = batch.column(0).to_pylist()
    parts = batch.column(1).to_pylist()
    keys = batch.column(2).to_pylist()
    values = batch.column(3).to_pylist()
    headers = batch.column(4).to_pylist()
    for t, p, k, v, h in zip(topics, parts, keys, values, headers, strict=True):
        yield t, p, k, v, [(x["key"], x["value"]) for x in h] if h else []


@dataclass
class StagedRecords(WriterCommitMessage):
    """A task's records, as an Arrow IPC stream, carried to the driver by Spark."""

    ipc: bytes
    rows: int

    def batches(self) -> list[pa.RecordBatch]:
        if not self.rows:
            return []
        return list(pa.ipc.open_stream(self.ipc))


@dataclass
class DirectWritten(WriterCommitMessage):
    rows: int


def stage(batches: Iterable[pa.RecordBatch], default_topic: str | None) -> StagedRecords:
    sink = pa.BufferOutputStream()
    rows = 0
    with pa.ipc.new_stream(sink, STAGED_SCHEMA) as w:
        for b in batches:
            if b.num_rows:
                w.write_batch(normalise(b, default_topic))
                rows += b.num_rows
    return StagedRecords(sink.getvalue().to_pybytes(), rows)


class _Delivery:
    def __init__(self) -> None:
        self.errors: list[str] = []
        self.delivered = 0

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(f"{msg.topic()}: {err}")
        else:
            self.delivered += 1


def _produce(
    producer: Producer,
    deliver: _Delivery,
    topic: str,
    value: bytes | None,
    key: bytes | None,
    partition: int | None,
    headers: list[Any],
) -> None:
    kwargs: dict[str, Any] = {"value": value, "key": key, "headers": headers, "on_delivery": deliver}
    if partition is not None:
        kwargs["partition"] = partition
    while True:
        try:
            producer.produce(topic, **kwargs)
            return
        except BufferError:
            producer.poll(0.05)


def _flush(producer: Producer, deliver: _Delivery, timeout_s: float = 120.0) -> None:
    remaining = producer.flush(timeout_s)
    if remaining:
        raise BrookSinkError(f"{remaining} records not acknowledged within {timeout_s} s")
    if deliver.errors:
        raise BrookSinkError(f"{len(deliver.errors)} records failed: {deliver.errors[:5]}")


def write_direct(opts: WriteOptions, batches: Iterable[pa.RecordBatch]) -> DirectWritten:
    """exactlyOnce=false: the task produces its rows itself (at least once, as Spark's Kafka sink)."""
    producer = Producer(opts.producer_config())
    deliver = _Delivery()
    rows = 0
    for b in batches:
        nb = normalise(b, opts.topic)
        for t, p, k, v, h in rows_of(nb):
            _produce(producer, deliver, t, v, k, p, h)
            rows += 1
    _flush(producer, deliver)
    return DirectWritten(rows)


# ---- the marker topic -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Marker:
    batch: int
    state: str  # "begin" | "committed"
    start: dict[TP, int]

    def to_json(self) -> bytes:
        start = [[t, p, o] for (t, p), o in sorted(self.start.items())]
        return json.dumps({"batch": self.batch, "state": self.state, "start": start}).encode()

    @staticmethod
    def from_json(raw: bytes) -> Marker:
        d = json.loads(raw)
        return Marker(
            int(d["batch"]), str(d["state"]), {(t, int(p)): int(o) for t, p, o in d.get("start", [])}
        )


class MarkerStore:
    """The latest marker per sink id, in a one-partition compacted topic."""

    def __init__(self, cluster: Cluster, client: dict[str, Any], topic: str, replication: int | None) -> None:
        self.cluster = cluster
        self.client = client
        self.topic = topic
        self.replication = replication

    def ensure(self) -> None:
        if self.topic in self.cluster.topics():
            return
        rf = self.replication or min(3, max(1, self.cluster.broker_count()))
        self.cluster.create_topic(self.topic, 1, rf, {"cleanup.policy": "compact"})
        deadline = time.monotonic() + 30
        while self.topic not in self.cluster.topics():
            if time.monotonic() > deadline:
                raise BrookSinkError(f"marker topic {self.topic} did not appear")
            time.sleep(0.1)

    def read(self, sink_id: str) -> Marker | None:
        """Scan backwards in growing windows from the end: the newest record for the key wins."""
        tp = (self.topic, 0)
        low = self.cluster.earliest([tp])[tp]
        high = self.cluster.latest([tp])[tp]
        key = sink_id.encode()
        window = 1024
        stop = high
        consumer = Consumer(
            {
                **{k: v for k, v in self.client.items()},
                "group.id": "pyspark-brook-sink",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        try:
            while stop > low:
                begin = max(low, stop - window)
                found = self._scan(consumer, begin, stop, key)
                if found is not None:
                    return Marker.from_json(found)
                stop = begin
                window *= 8
            return None
        finally:
            consumer.close()

    def _scan(self, consumer: Consumer, begin: int, stop: int, key: bytes) -> bytes | None:
        consumer.assign([TopicPartition(self.topic, 0, begin)])
        latest: bytes | None = None
        position = begin
        deadline = time.monotonic() + 60
        while position < stop:
            if time.monotonic() > deadline:
                raise BrookSinkError(f"timed out reading the marker topic {self.topic}")
            # consume() waits for num_messages or the timeout: ask for no more than is left.
            for m in consumer.consume(max(1, min(10_000, stop - position)), 0.2):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        position = max(position, stop)  # compaction gaps up to the end
                        continue
                    if err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                        raise BrookSinkError(f"marker topic {self.topic}: {err}")
                    continue
                if offset_of(m) >= stop:
                    position = stop
                    break
                position = offset_of(m) + 1
                if m.key() == key and m.value() is not None:
                    latest = m.value()
        return latest

    def write(self, sink_id: str, marker: Marker, producer: Producer) -> None:
        """Through the batch's own idempotent producer (acks=all), flushed before returning."""
        deliver = _Delivery()
        producer.produce(
            self.topic, key=sink_id.encode(), value=marker.to_json(), partition=0, on_delivery=deliver
        )
        _flush(producer, deliver, 60)


# ---- the driver's commit ----------------------------------------------------------------------------


def _identity(topic: str, key: bytes | None, value: bytes | None, headers: list[Any]) -> tuple[Any, ...]:
    return (topic, key, value, tuple(headers))


def _already_written(
    client: dict[str, Any], start: dict[TP, int], ends: dict[TP, int], sink_id: str, batch_id: int
) -> Counter[tuple[Any, ...]]:
    """Records of (sink id, batch id) an earlier attempt wrote after the begin marker."""
    sid, bid = sink_id.encode(), str(batch_id).encode()
    found: Counter[tuple[Any, ...]] = Counter()
    consumer = Consumer(
        {
            **client,
            "group.id": "pyspark-brook-sink",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        for tp, s in start.items():
            e = ends.get(tp, s)
            if e <= s:
                continue
            consumer.assign([TopicPartition(tp[0], tp[1], s)])
            pos = s
            deadline = time.monotonic() + 120
            while pos < e and time.monotonic() < deadline:
                for m in consumer.consume(max(1, min(10_000, e - pos)), 0.2):
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            pos = e
                        elif err.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                            raise BrookSinkError(f"recovery scan of {tp}: {err}")
                        continue
                    if offset_of(m) >= e:
                        pos = e
                        break
                    pos = offset_of(m) + 1
                    headers = headers_of(m)
                    mine = [(k, v) for k, v in headers if k in (SINK_ID_HEADER, SINK_BATCH_HEADER)]
                    if (SINK_ID_HEADER, sid) in mine and (SINK_BATCH_HEADER, bid) in mine:
                        user = [(k, v) for k, v in headers if k not in (SINK_ID_HEADER, SINK_BATCH_HEADER)]
                        found[_identity(tp[0], m.key(), m.value(), user)] += 1
            if pos < e:
                raise BrookSinkError(f"recovery scan of {tp[0]}-{tp[1]} did not reach offset {e}")
    finally:
        consumer.close()
    return found


def commit_staged(
    opts: WriteOptions, messages: Iterable[WriterCommitMessage | None], batch_id: int | None
) -> int:
    """Make staged records visible; with a batch id, at most once per (sink id, batch id).

    Returns how many records this call wrote (0 for a refused replay)."""
    staged = [m for m in messages if isinstance(m, StagedRecords)]
    batches = [b for m in staged for b in m.batches()]
    client = opts.client
    cluster = Cluster(client)
    # Created first: an idempotent producer's start-up (InitProducerId) overlaps the marker look-up.
    producer = _producer(opts)
    try:
        return _commit(opts, cluster, producer, batches, batch_id)
    except BaseException:
        _PRODUCERS.pop(_producer_key(opts), None)  # never reuse a producer that failed mid-batch
        raise


_PRODUCERS: dict[tuple[tuple[str, str], ...], Producer] = {}


def _producer_key(opts: WriteOptions) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, str(v)) for k, v in opts.producer_config().items()))


def _producer(opts: WriteOptions) -> Producer:
    """One producer per configuration per driver process, reused by later commits when the process is."""
    key = _producer_key(opts)
    if key not in _PRODUCERS:
        _PRODUCERS[key] = Producer(opts.producer_config())
    return _PRODUCERS[key]


def _commit(
    opts: WriteOptions,
    cluster: Cluster,
    producer: Producer,
    batches: list[pa.RecordBatch],
    batch_id: int | None,
) -> int:
    client = opts.client
    deliver = _Delivery()
    guarded = batch_id is not None and opts.sink_id is not None
    sink_id = opts.sink_id or ""
    skip: Counter[tuple[Any, ...]] = Counter()
    store = MarkerStore(cluster, client, opts.commits_topic, opts.commits_replication)
    if guarded:
        assert batch_id is not None
        store.ensure()
        marker = store.read(sink_id)
        if marker is not None and marker.state == "committed" and marker.batch >= batch_id:
            if marker.batch > batch_id:
                raise BrookSinkError(
                    f"sink {sink_id!r} already committed batch {marker.batch}, and now batch {batch_id} "
                    "comes: another query (or a reset checkpoint) uses this sink id. Give each query "
                    "its own sinkId option."
                )
            log.warning("sink %s: batch %d was already committed; replay refused", sink_id, batch_id)
            return 0
        topics = sorted({t for b in batches for t in b.column(0).unique().to_pylist()})
        all_topics = cluster.topics()
        missing = [t for t in topics if t not in all_topics]
        if missing:
            raise BrookSinkError(f"topics do not exist: {', '.join(missing)}")
        targets = [(t, p) for t in topics for p in all_topics[t]]
        if marker is not None and marker.state == "begin" and marker.batch == batch_id:
            # An earlier attempt died while writing this batch: find what it wrote.
            ends = cluster.latest(list(marker.start))
            skip = _already_written(client, marker.start, ends, sink_id, batch_id)
            log.warning(
                "sink %s: batch %d resumes after a failed attempt; %d records already written",
                sink_id,
                batch_id,
                sum(skip.values()),
            )
            extra = [tp for tp in targets if tp not in marker.start]
            if extra:
                raise BrookSinkError(
                    f"sink {sink_id!r}: batch {batch_id} resumed with new partitions {extra}"
                )
        else:
            if marker is not None and marker.state == "begin":
                log.warning("sink %s: batch %d was begun and never committed", sink_id, marker.batch)
            store.write(sink_id, Marker(batch_id, "begin", cluster.latest(targets)), producer)
    written = 0
    extra_headers = [(SINK_ID_HEADER, sink_id.encode()), (SINK_BATCH_HEADER, str(batch_id).encode())]
    for b in batches:
        for t, p, k, v, h in rows_of(b):
            if skip:
                ident = _identity(t, k, v, h)
                if skip[ident] > 0:
                    skip[ident] -= 1
                    continue
            _produce(producer, deliver, t, v, k, p, h + extra_headers if guarded else h)
            written += 1
            if opts.crash_after_records is not None and written == opts.crash_after_records:
                _flush(producer, deliver)
                log.error("brook.test.crashAfterRecords: exiting after %d records", written)
                os._exit(86)
        producer.poll(0)
    _flush(producer, deliver)
    if guarded:
        assert batch_id is not None
        store.write(sink_id, Marker(batch_id, "committed", {}), producer)
    return written


class BrookBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_input_schema(schema, opts.topic)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self.opts.exactly_once:
            return write_direct(self.opts, iterator)
        return stage(iterator, self.opts.topic)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if self.opts.exactly_once:
            commit_staged(self.opts, messages, self.opts.batch_id)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("write aborted: staged records discarded, nothing was made visible")


class BrookStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType) -> None:
        check_input_schema(schema, opts.topic)
        self.opts = opts

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if not self.opts.exactly_once:
            return write_direct(self.opts, iterator)
        return stage(iterator, self.opts.topic)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        if self.opts.exactly_once:
            commit_staged(self.opts, messages, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning("batch %d aborted: staged records discarded, nothing was made visible", batchId)
