"""The "brook" data source: batch and streaming reads of Kafka topics (Brook or any Kafka broker).

Streaming offsets are JSON `{"topic": {"0": 42, ...}}` (the next offset to read per partition), the
same shape as Spark's Kafka source. The checkpoint is the source of truth: the stream reader keeps no
state a restart needs, and `commit()` only publishes progress as a consumer group's committed offsets.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, TopicPartition
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from .kafka import TP, Cluster, OffsetRange, data_loss, read_range, split_ranges
from .options import EARLIEST, LATEST, OffsetSpec, ReadOptions, parse_read_options, parse_write_options
from .schema import ddl

log = logging.getLogger("pyspark_brook")
_FINAL_COMMIT_WAIT = 30.0  # seconds a caught-up latestOffset() waits for the group commit


class BrookPartition(InputPartition):
    """One Spark task: the offsets [start, end) of one topic-partition."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__((topic, partition, start, end))
        self.topic, self.partition, self.start, self.end = topic, partition, start, end

    def range(self) -> OffsetRange:
        return OffsetRange(self.topic, self.partition, self.start, self.end)


def encode_offsets(offsets: dict[TP, int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, part), off in sorted(offsets.items()):
        out.setdefault(topic, {})[str(part)] = int(off)
    return out


def decode_offsets(data: dict[str, Any] | None) -> dict[TP, int]:
    out: dict[TP, int] = {}
    for topic, parts in (data or {}).items():
        for part, off in parts.items():
            out[(topic, int(part))] = int(off)
    return out


def resolve_offsets(cluster: Cluster, spec: OffsetSpec, tps: list[TP], default: str) -> dict[TP, int]:
    """earliest / latest / JSON (with -2 earliest, -1 latest; partitions not named take `default`)."""
    if isinstance(spec, str):
        return cluster.earliest(tps) if spec == "earliest" else cluster.latest(tps)
    want: dict[TP, int] = {}
    for tp in tps:
        off = spec.get(tp[0], {}).get(tp[1])
        want[tp] = (EARLIEST if default == "earliest" else LATEST) if off is None else off
    need_early = [tp for tp, o in want.items() if o == EARLIEST]
    need_late = [tp for tp, o in want.items() if o == LATEST]
    early = cluster.earliest(need_early)
    late = cluster.latest(need_late)
    return {tp: early.get(tp, late.get(tp, o)) if o < 0 else o for tp, o in want.items()}


def _read(opts: ReadOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, BrookPartition)
    yield from read_range(
        opts.consumer_config(),
        partition.range(),
        include_headers=opts.include_headers,
        fail_on_data_loss=opts.fail_on_data_loss,
        poll_timeout_ms=opts.poll_timeout_ms,
        read_timeout_ms=opts.read_timeout_ms,
        fetch_batch=opts.fetch_batch,
        arrow_batch=opts.arrow_batch,
    )


class BrookBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts

    def partitions(self) -> Sequence[InputPartition]:
        cluster = Cluster(self.opts.client)
        tps = cluster.partitions(self.opts.subscription)
        start = resolve_offsets(cluster, self.opts.starting, tps, "earliest")
        end = resolve_offsets(cluster, self.opts.ending, tps, "latest")
        low = cluster.earliest(tps)
        ranges: list[OffsetRange] = []
        for tp in tps:
            s, e = start[tp], end[tp]
            if s < low[tp] and e > s:
                data_loss(
                    f"{tp[0]}-{tp[1]}: offsets {s}..{min(low[tp], e) - 1} are no longer available",
                    self.opts.fail_on_data_loss,
                )
                s = min(low[tp], e)
            ranges.append(OffsetRange(tp[0], tp[1], s, e))
        pieces = split_ranges(ranges, self.opts.max_records_per_partition, self.opts.min_partitions)
        if not pieces:
            return [BrookPartition("", 0, 0, 0)]  # an empty read still needs one task
        return [BrookPartition(r.topic, r.partition, r.start, r.end) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)


class GroupCommitter:
    """Publishes the query's progress as a consumer group's committed offsets, off the query's path.

    A background thread commits the newest offsets handed to it (older pending ones are dropped); a
    failure is logged, never raised: the checkpoint, not the group, is the source of truth. flush()
    waits for what was handed over: Spark may kill the reader's Python process as soon as the query
    ends, before stop() runs, so the caught-up position is committed while Spark still waits on us.
    """

    def __init__(self, conf: dict[str, Any], group_id: str) -> None:
        self.conf = {
            **{k: v for k, v in conf.items() if not k.startswith(("enable.partition.eof", "auto.offset"))},
            "group.id": group_id,
            "enable.auto.commit": False,
        }
        self.group_id = group_id
        self._q: queue.Queue[dict[TP, int] | None] = queue.Queue()
        self._progress = threading.Condition()
        self._submitted = 0  # offsets handed over so far
        self._settled = 0  # of those, how many were committed or dropped for a newer one
        self._thread = threading.Thread(target=self._run, name=f"brook-commit-{group_id}", daemon=True)
        self._thread.start()
        self._warned = False

    def submit(self, offsets: dict[TP, int]) -> None:
        with self._progress:
            self._submitted += 1
        self._q.put(offsets)

    def flush(self, timeout: float) -> bool:
        """Wait until everything submitted so far is committed (or failed); False at the deadline."""
        with self._progress:
            target = self._submitted
            return self._progress.wait_for(lambda: self._settled >= target, timeout)

    def _settle(self, n: int) -> None:
        with self._progress:
            self._settled += n
            self._progress.notify_all()

    def close(self, timeout: float = 10.0) -> None:
        self._q.put(None)
        self._thread.join(timeout)

    def _run(self) -> None:
        consumer: Consumer | None = None
        try:
            while True:
                item = self._q.get()
                taken = 1
                while item is not None and not self._q.empty():
                    nxt = self._q.get()  # only the newest progress matters
                    if nxt is None:
                        self._commit(consumer, item)
                        self._settle(taken)
                        return
                    item, taken = nxt, taken + 1
                if item is None:
                    return
                if consumer is None:
                    consumer = Consumer(self.conf)
                self._commit(consumer, item)
                self._settle(taken)
        finally:
            if consumer is not None:
                consumer.close()

    def _commit(self, consumer: Consumer | None, offsets: dict[TP, int]) -> None:
        if consumer is None:
            consumer = Consumer(self.conf)
        try:
            consumer.commit(
                offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
            )
        except Exception as e:
            level = logging.DEBUG if self._warned else logging.WARNING
            log.log(level, "could not commit progress to group %s: %s", self.group_id, e)
            self._warned = True


class BrookStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions) -> None:
        self.opts = opts
        self._cluster: Cluster | None = None
        self._committer: GroupCommitter | None = None
        self._target: dict[TP, int] | None = None  # Trigger.AvailableNow: never read past these
        self._latest: dict[TP, int] | None = None
        self._published: dict[TP, int] | None = None

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled to the executors for read(): clients and threads stay on the driver.
        state = dict(self.__dict__)
        state["_cluster"] = None
        state["_committer"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.opts.client)
        return self._cluster

    def initialOffset(self) -> dict[str, Any]:
        tps = self.cluster.partitions(self.opts.subscription)
        return encode_offsets(resolve_offsets(self.cluster, self.opts.starting, tps, "earliest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.cluster.partitions(self.opts.subscription)
        self._target = self.cluster.latest(tps)
        log.info("Trigger.AvailableNow: reading up to %s", encode_offsets(self._target))

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, Any]:
        begin = decode_offsets(start)
        # Spark asks for the next batch only once the previous one is committed, and it calls commit()
        # for a batch only when it plans the next one: publishing `start` here keeps the group's
        # offsets current while the query idles, and after the last batch of Trigger.AvailableNow.
        self._publish(begin)
        if self._target is not None:
            tps = list(self._target)
            highs = self.cluster.latest_at_least(tps, begin)
            highs = {tp: min(h, self._target[tp]) for tp, h in highs.items()}
        else:
            tps = self.cluster.partitions(self.opts.subscription)
            highs = self.cluster.latest_at_least(tps, begin)
        self._latest = dict(highs)
        caught_up = all(tp in begin and h <= begin[tp] for tp, h in highs.items())
        # Caught up (the end of an AvailableNow run, or an idle query): make the group current now.
        if caught_up and self._committer is not None and not self._committer.flush(_FINAL_COMMIT_WAIT):
            log.warning("group %s: progress not committed within %.0f s", self.opts.commit_group_id,
                        _FINAL_COMMIT_WAIT)
        end: dict[TP, int] = {}
        # Partitions seen for the first time (new topic, CreatePartitions) enter at their log start,
        # with nothing read in this batch; the next batch reads them. Deterministic on replay.
        new = [tp for tp in highs if tp not in begin]
        if new:
            log.info("new partitions: %s", ", ".join(f"{t}-{p}" for t, p in new))
            end.update(self.cluster.earliest(new))
        for tp, s in begin.items():
            if tp not in highs:
                if self._target is not None and tp not in self._target:
                    end[tp] = s  # not part of this AvailableNow run's target: keep it as it is
                    continue
                data_loss(f"{tp[0]}-{tp[1]}: the partition no longer exists", self.opts.fail_on_data_loss)
                continue
            h = highs[tp]
            if h < s:
                data_loss(
                    f"{tp[0]}-{tp[1]}: the log now ends at {h}, before the query's position {s} (truncated "
                    "or recreated)",
                    self.opts.fail_on_data_loss,
                )
            end[tp] = h
        if isinstance(limit, ReadMaxRows):
            end = self._rate_limit(begin, end, limit.max_rows)
        return encode_offsets(end)

    @staticmethod
    def _rate_limit(begin: dict[TP, int], end: dict[TP, int], max_rows: int) -> dict[TP, int]:
        """Spread max_rows over the partitions in proportion to what each has (as Spark's Kafka source)."""
        avail = {tp: end[tp] - begin[tp] for tp in end if tp in begin and end[tp] > begin[tp]}
        total = sum(avail.values())
        if total <= max_rows:
            return end
        out = dict(end)
        for tp, size in avail.items():
            share = max_rows * size / total
            take = int(share) if share >= 1 else (1 if share > 0 else 0)
            out[tp] = begin[tp] + min(size, take)
        return out

    def reportLatestOffset(self) -> dict[str, Any] | None:
        return encode_offsets(self._latest) if self._latest is not None else None

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        begin, stop = decode_offsets(start), decode_offsets(end)
        ranges = [
            OffsetRange(tp[0], tp[1], begin[tp], e) for tp, e in stop.items() if tp in begin and e > begin[tp]
        ]
        pieces = split_ranges(ranges, self.opts.max_records_per_partition, self.opts.min_partitions)
        return [BrookPartition(r.topic, r.partition, r.start, r.end) for r in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(self.opts, partition)

    def commit(self, end: dict[str, Any]) -> None:
        self._publish(decode_offsets(end))

    def _publish(self, offsets: dict[TP, int]) -> None:
        offsets = {tp: o for tp, o in offsets.items() if o >= 0}  # a position, never a marker
        if self.opts.commit_group_id is None or not offsets or offsets == self._published:
            return
        if self._committer is None:
            self._committer = GroupCommitter(self.opts.client, self.opts.commit_group_id)
        self._committer.submit(offsets)
        self._published = dict(offsets)

    def stop(self) -> None:
        if self._committer is not None:
            self._committer.close()
            self._committer = None


class BrookDataSource(DataSource):
    """`spark.read.format("brook")` / `readStream` / `write` / `writeStream`: Kafka topics as tables."""

    @classmethod
    def name(cls) -> str:
        return "brook"

    def schema(self) -> str:
        include = str(dict(self.options).get("includeheaders", "false")).strip().lower() == "true"
        return ddl(include)

    def reader(self, schema: StructType) -> DataSourceReader:
        return BrookBatchReader(parse_read_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return BrookStreamReader(parse_read_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from .sink import BrookBatchWriter

        return BrookBatchWriter(parse_write_options(self.options, streaming=False), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from .sink import BrookStreamWriter

        return BrookStreamWriter(parse_write_options(self.options, streaming=True), schema)
