"""Kafka client work shared by the source and the sink: metadata, watermarks, reading an offset range.

Everything goes through confluent-kafka (librdkafka), so the source works against Brook and against
any Kafka-compatible broker. Reading builds Arrow record batches column-wise from `consume()` lists:
one C-level `map` per column, no per-row Python tuple.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, cast

import numpy as np
import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec  # re-exported by .admin, untyped there

from .options import Subscription
from .schema import HEADER_TYPE, arrow_schema

log = logging.getLogger("pyspark_brook")

TP = tuple[str, int]
Headers = list[tuple[str, bytes]]


def offset_of(m: Message) -> int:
    """A fetched message's offset (the client's type says Optional; a record always has one)."""
    return cast(int, m.offset())


def headers_of(m: Message) -> Headers:
    """A consumed message's headers: librdkafka hands them as a list of (key, value) pairs."""
    return cast(Headers, m.headers() or [])


class BrookDataLossError(RuntimeError):
    """Records the query needs are gone (retention, truncation, deleted topic) and failOnDataLoss=true."""


class BrookOffsetsUnavailableError(RuntimeError):
    """A partition's offsets could not be learned before the deadline (no leader for that long)."""


OFFSETS_TIMEOUT_S = 30.0  # how long a partition may have no leader before a look-up gives up
_RETRY_S = 0.5
_ATTEMPT_S = 5.0  # one request's timeout: one spent waiting on a dead leader must leave time to retry

# librdkafka's offset markers (confluent_kafka.OFFSET_*): an answer carrying one knew no offset (e.g. the
# partition had no leader, or the request timed out), it is never a position in the log.
_MARKERS = {-1: "OFFSET_END", -2: "OFFSET_BEGINNING", -1000: "OFFSET_STORED", -1001: "OFFSET_INVALID"}

# Errors that go away once a leader is elected and known (or a request is simply answered).
_TRANSIENT = {
    KafkaError._TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._DESTROY_BROKER,
    KafkaError._NODE_UPDATE,
    KafkaError._NOENT,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.FENCED_LEADER_EPOCH,
    KafkaError.UNKNOWN_LEADER_EPOCH,
    KafkaError.BROKER_NOT_AVAILABLE,
    KafkaError.REPLICA_NOT_AVAILABLE,
    KafkaError.KAFKA_STORAGE_ERROR,
}


def transient(e: KafkaException) -> bool:
    """Whether a failed offsets look-up is worth asking again (a leader is moving, a broker is down)."""
    err = e.args[0] if e.args else None
    return isinstance(err, KafkaError) and (err.retriable() or err.code() in _TRANSIENT)


def real_offset(offset: int | None) -> int | None:
    """An offset librdkafka answered, or None when it is one of its markers (or missing)."""
    return offset if offset is not None and offset >= 0 else None


def describe(offset: int | None) -> str:
    return f"{offset} ({_MARKERS[offset]})" if offset in _MARKERS else str(offset)


def watermarks(
    consumer: Consumer, tp: TopicPartition, timeout_s: float = OFFSETS_TIMEOUT_S
) -> tuple[int, int]:
    """(log start, high watermark) of a partition from its leader, asking again while there is none.

    get_watermark_offsets raises _TIMED_OUT while the leader is down, and its answers may be the
    OFFSET_INVALID marker: neither is an offset. BrookOffsetsUnavailableError after `timeout_s`.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        attempt = max(1.0, min(_ATTEMPT_S, deadline - time.monotonic()))
        try:
            low, high = consumer.get_watermark_offsets(tp, timeout=attempt, cached=False)
            if real_offset(low) is not None and real_offset(high) is not None:
                return low, high
            problem = f"the answer was {describe(low)}, {describe(high)}"
        except KafkaException as e:
            if not transient(e):
                raise
            problem = str(e.args[0])
        if time.monotonic() >= deadline:
            raise BrookOffsetsUnavailableError(
                f"{tp.topic}-{tp.partition}: no watermarks within {timeout_s:.0f} s ({problem}); "
                "is the partition without a leader?"
            )
        time.sleep(_RETRY_S)
        try:  # fresh metadata: the leader librdkafka has cached may be the dead one
            consumer.list_topics(tp.topic, timeout=_ATTEMPT_S)
        except KafkaException as e:
            log.info("metadata of %s: %s", tp.topic, e)


def data_loss(message: str, fail: bool) -> None:
    """Raise when failOnDataLoss is true; otherwise log and let the caller skip ahead."""
    text = (
        message + ". Records were deleted (retention, truncation or a deleted topic) before the query read "
        "them. Set the option failOnDataLoss=false to skip them instead of failing."
    )
    if fail:
        raise BrookDataLossError(text)
    log.warning("%s (failOnDataLoss=false: skipping)", message)


class Cluster:
    """Driver-side metadata and offset look-ups, batched per request."""

    def __init__(self, client: dict[str, Any], timeout_s: float = OFFSETS_TIMEOUT_S) -> None:
        admin_conf = {k: v for k, v in client.items() if not k.startswith(("group.", "enable.auto", "auto."))}
        self.admin = AdminClient(admin_conf)
        self.timeout_s = timeout_s

    def topics(self) -> dict[str, list[int]]:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                md = self.admin.list_topics(timeout=max(1.0, min(_ATTEMPT_S, deadline - time.monotonic())))
                break
            except KafkaException as e:  # e.g. the broker asked was frozen: another may answer
                if not transient(e) or time.monotonic() >= deadline:
                    raise
                time.sleep(_RETRY_S)
        out: dict[str, list[int]] = {}
        for name, t in md.topics.items():
            if t.error is not None and t.error.code() != KafkaError.NO_ERROR:
                continue
            out[name] = sorted(t.partitions)
        return out

    def partitions(self, sub: Subscription) -> list[TP]:
        """The topic-partitions the subscription covers now (patterns skip internal `__` topics)."""
        topics = self.topics()
        if sub.kind == "assign":
            missing = [f"{t}-{p}" for t, p in sub.assigned if p not in topics.get(t, [])]
            if missing:
                log.warning("assigned partitions do not exist (yet): %s", ", ".join(missing))
            return [(t, p) for t, p in sub.assigned if p in topics.get(t, [])]
        out: list[TP] = []
        for name in sorted(topics):
            if sub.kind == "pattern" and name.startswith("__"):
                continue
            if sub.matches(name):
                out.extend((name, p) for p in topics[name])
        return out

    def _list(self, tps: Iterable[TP], spec: OffsetSpec, what: str) -> dict[TP, int]:
        """Real offsets for every partition, asked again for those without one (no leader, a timeout:
        librdkafka then answers an error or the OFFSET_INVALID marker) until `timeout_s` has passed."""
        pending = list(dict.fromkeys(tps))
        out: dict[TP, int] = {}
        problems: dict[TP, str] = {}
        deadline = time.monotonic() + self.timeout_s
        while pending:
            attempt = max(1.0, min(_ATTEMPT_S, deadline - time.monotonic()))
            try:
                futures = self.admin.list_offsets(
                    {TopicPartition(t, p): spec for t, p in pending}, request_timeout=attempt
                )
                for tp, f in futures.items():
                    key = (tp.topic, tp.partition)
                    try:
                        answer = f.result().offset
                    except KafkaException as e:
                        if not transient(e):
                            raise
                        problems[key] = str(e.args[0])
                        continue
                    offset = real_offset(answer)
                    if offset is None:
                        problems[key] = f"the answer was {describe(answer)}"
                    else:
                        out[key] = offset
            except KafkaException as e:
                if not transient(e):
                    raise
                problems.update({tp: str(e.args[0]) for tp in pending})
            pending = [tp for tp in pending if tp not in out]
            if not pending:
                break
            if time.monotonic() >= deadline:
                detail = "; ".join(f"{t}-{p}: {problems.get((t, p), '?')}" for t, p in pending)
                raise BrookOffsetsUnavailableError(
                    f"no {what} offsets within {self.timeout_s:.0f} s for {detail}; "
                    "are these partitions without a leader?"
                )
            time.sleep(_RETRY_S)  # a leader is moving (failover) or metadata is catching up
            self._refresh_metadata({t for t, _ in pending})
        return out

    def _refresh_metadata(self, topics: set[str]) -> None:
        """Ask for the topics' metadata now: librdkafka would otherwise keep sending ListOffsets to a
        dead leader it has cached, answering OFFSET_INVALID each time, for minutes."""
        for topic in sorted(topics):
            try:
                self.admin.list_topics(topic, timeout=_ATTEMPT_S)
            except KafkaException as e:
                log.info("metadata of %s: %s", topic, e)

    def earliest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list(tps, OffsetSpec.earliest(), "earliest")  # type: ignore[no-untyped-call]

    def latest(self, tps: Iterable[TP]) -> dict[TP, int]:
        return self._list(tps, OffsetSpec.latest(), "latest")  # type: ignore[no-untyped-call]

    def latest_at_least(self, tps: Iterable[TP], floor: dict[TP, int]) -> dict[TP, int]:
        """Latest offsets, asked again (until `timeout_s`) for partitions answering below `floor`: just
        after a failover the new leader's high watermark can lag the one the query already read up to.
        Still below at the deadline: the log was truncated, the caller decides."""
        highs = self.latest(tps)
        deadline = time.monotonic() + self.timeout_s
        while True:
            low = [tp for tp, h in highs.items() if h < floor.get(tp, 0)]
            if not low or time.monotonic() >= deadline:
                return highs
            time.sleep(_RETRY_S)
            highs.update(self.latest(low))

    def create_topic(self, name: str, partitions: int, replication: int, config: dict[str, str]) -> None:
        from confluent_kafka.cimpl import NewTopic

        fut = self.admin.create_topics([NewTopic(name, partitions, replication, config=config)])[name]
        try:
            fut.result(self.timeout_s)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                raise

    def broker_count(self) -> int:
        return len(self.admin.list_topics(timeout=self.timeout_s).brokers)


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # inclusive
    end: int  # exclusive

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    ranges: list[OffsetRange], max_records: int | None, min_partitions: int | None
) -> list[OffsetRange]:
    """Cut ranges so none holds more than max_records, and there are at least min_partitions pieces."""
    ranges = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in ranges)
    cap = max_records
    if min_partitions and total and len(ranges) < min_partitions:
        per = -(-total // min_partitions)
        cap = min(cap, per) if cap else per
    if not cap:
        return ranges
    out: list[OffsetRange] = []
    for r in ranges:
        pieces = -(-r.size // cap)
        step = -(-r.size // pieces)
        for s in range(r.start, r.end, step):
            out.append(OffsetRange(r.topic, r.partition, s, min(s + step, r.end)))
    return out


def _timestamps(msgs: list[Message]) -> tuple[np.ndarray, np.ndarray]:
    """(microseconds since the epoch, Spark's timestampType) for each message."""
    n = len(msgs)
    flat = np.fromiter(itertools.chain.from_iterable(map(Message.timestamp, msgs)), np.int64, 2 * n)
    kinds = flat[0::2]
    micros = flat[1::2] * 1000
    # librdkafka: 0 not available, 1 create time, 2 log-append time; Spark (Java): -1, 0, 1.
    return micros, (kinds - 1).astype(np.int32)


def _offsets(msgs: list[Message]) -> np.ndarray:
    first, last = offset_of(msgs[0]), offset_of(msgs[-1])
    if last - first + 1 == len(msgs):  # no gap (no compaction, no control record): no per-row call
        return np.arange(first, last + 1, dtype=np.int64)
    return np.fromiter(map(Message.offset, msgs), np.int64, len(msgs))


def _headers_array(msgs: list[Message]) -> pa.Array:
    rows = []
    for m in msgs:
        h = m.headers()
        rows.append(None if h is None else [{"key": k, "value": v} for k, v in cast(Headers, h)])
    return pa.array(rows, HEADER_TYPE)


def to_record_batch(
    msgs: list[Message], topic: str, partition: int, include_headers: bool, schema: pa.Schema
) -> pa.RecordBatch:
    n = len(msgs)
    micros, kinds = _timestamps(msgs)
    columns: list[pa.Array] = [
        pa.array(list(map(Message.key, msgs)), pa.binary()),
        pa.array(list(map(Message.value, msgs)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.array(np.full(n, partition, np.int32)),
        pa.array(_offsets(msgs)),
        pa.array(micros, pa.timestamp("us", tz="UTC")),
        pa.array(kinds),
    ]
    if include_headers:
        columns.append(_headers_array(msgs))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def read_range(
    consumer_conf: dict[str, Any],
    rng: OffsetRange,
    *,
    include_headers: bool,
    fail_on_data_loss: bool,
    poll_timeout_ms: int = 1000,
    read_timeout_ms: int = 120_000,
    fetch_batch: int = 2_000,
    arrow_batch: int = 8_192,
) -> Iterator[pa.RecordBatch]:
    """Yield the records of [start, end) of one partition as Arrow batches, in offset order.

    Gaps inside the range (compaction, transaction markers) are fine. Records missing because the log
    start moved past them, or because the log ends before `end` (truncation), are data loss.
    """
    if rng.size <= 0:
        return
    schema = arrow_schema(include_headers)
    conf = dict(consumer_conf)
    # Prefetch no further than the range: records past `end` would be fetched and parsed for nothing.
    conf.setdefault("queued.min.messages", max(1, min(100_000, rng.size)))
    consumer = Consumer(conf)
    topic, partition, end = rng.topic, rng.partition, rng.end
    pending: list[Message] = []

    def build() -> pa.RecordBatch:
        batch = to_record_batch(pending, topic, partition, include_headers, schema)
        pending.clear()
        return batch

    try:
        consumer.assign([TopicPartition(topic, partition, rng.start)])
        expected = rng.start  # the next offset we have not accounted for
        idle_since = time.monotonic()
        while expected < end:
            # consume() waits until it has num_messages or the timeout passes: never ask for more than
            # the range still holds, or the range's last call would idle for the whole timeout.
            want = max(1, min(fetch_batch, end - expected))
            msgs = consumer.consume(num_messages=want, timeout=poll_timeout_ms / 1000)
            if not msgs:
                if (time.monotonic() - idle_since) * 1000 > read_timeout_ms:
                    raise TimeoutError(
                        f"no progress reading {topic}-{partition} at offset {expected} (until {end}) "
                        f"for {read_timeout_ms} ms"
                    )
                continue
            idle_since = time.monotonic()
            if any(map(Message.error, msgs)):
                good: list[Message] = []
                for m in msgs:
                    err = m.error()
                    if err is None:
                        good.append(m)
                        continue
                    if good:
                        pending.extend(_in_range(good, expected, end))
                        expected = max(expected, offset_of(good[-1]) + 1)
                        good = []
                    expected = _handle_error(consumer, err, m, rng, expected, fail_on_data_loss)
                    if expected >= end:
                        break
                msgs = good
                if not msgs:
                    continue
            first = offset_of(msgs[0])
            if first > expected and expected == rng.start:
                _check_start_gap(consumer, rng, first, fail_on_data_loss)
            pending.extend(_in_range(msgs, expected, end))
            expected = max(expected, offset_of(msgs[-1]) + 1)
            if len(pending) >= arrow_batch:
                yield build()
        if pending:
            yield build()
    finally:
        consumer.close()


def _in_range(msgs: list[Message], expected: int, end: int) -> list[Message]:
    """The messages with expected <= offset < end (offsets rise within one partition)."""
    if offset_of(msgs[-1]) >= end:
        lo, hi = 0, len(msgs)
        while lo < hi:
            mid = (lo + hi) // 2
            if offset_of(msgs[mid]) < end:
                lo = mid + 1
            else:
                hi = mid
        msgs = msgs[:lo]
    if msgs and offset_of(msgs[0]) < expected:
        msgs = [m for m in msgs if offset_of(m) >= expected]  # a re-delivery after a seek: never twice
    return msgs


def _check_start_gap(consumer: Consumer, rng: OffsetRange, first: int, fail: bool) -> None:
    low, _high = watermarks(consumer, TopicPartition(rng.topic, rng.partition))
    if low > rng.start:
        data_loss(
            f"{rng.topic}-{rng.partition}: offsets {rng.start}..{min(first, low) - 1} are no longer "
            f"available (log start offset is {low})",
            fail,
        )


def _end_reached(consumer: Consumer, tp: TopicPartition, end: int) -> tuple[int, int]:
    """Watermarks, asked again while the high watermark is below `end`: a new leader's high watermark
    can lag its predecessor's for a moment after a failover. Truncation if it stays below."""
    deadline = time.monotonic() + OFFSETS_TIMEOUT_S
    while True:
        low, high = watermarks(consumer, tp)
        if high >= end or time.monotonic() >= deadline:
            return low, high
        time.sleep(_RETRY_S)


def _handle_error(
    consumer: Consumer, err: KafkaError, m: Message, rng: OffsetRange, expected: int, fail: bool
) -> int:
    """Deal with one error event; answer the next offset to account for."""
    code = err.code()
    tp = TopicPartition(rng.topic, rng.partition)
    if code == KafkaError._PARTITION_EOF:
        high = offset_of(m)  # librdkafka reports the high watermark as the EOF offset
        if high >= rng.end:
            return rng.end  # the rest of the range was compaction gaps or control records
        low, high = _end_reached(consumer, tp, rng.end)
        if high >= rng.end:
            return expected  # the log grew meanwhile; keep reading
        data_loss(
            f"{rng.topic}-{rng.partition}: the log ends at offset {high} but the query planned to read up "
            f"to {rng.end} (truncated, e.g. after an unclean leader change)",
            fail,
        )
        return rng.end
    if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
        low, high = watermarks(consumer, tp)
        if low > expected:
            data_loss(
                f"{rng.topic}-{rng.partition}: offsets {expected}..{min(low, rng.end) - 1} are no longer "
                f"available (log start offset is {low})",
                fail,
            )
            if low >= rng.end:
                return rng.end
            consumer.assign([TopicPartition(rng.topic, rng.partition, low)])
            return low
        if high < rng.end and high <= expected:
            low, high = _end_reached(consumer, tp, rng.end)
        if high < rng.end and high <= expected:
            data_loss(
                f"{rng.topic}-{rng.partition}: the log ends at offset {high} but the query planned to read "
                f"up to {rng.end}",
                fail,
            )
            return rng.end
        consumer.assign([TopicPartition(rng.topic, rng.partition, expected)])
        return expected
    if code in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_TOPIC):
        data_loss(f"{rng.topic}-{rng.partition}: the partition no longer exists", fail)
        return rng.end
    if err.fatal():
        raise KafkaException(err)
    # Transport errors, leader changes and the like: librdkafka retries on its own.
    log.info("reading %s-%s: %s (retrying)", rng.topic, rng.partition, err)
    return expected
