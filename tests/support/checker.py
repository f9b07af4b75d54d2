"""A workload of real clients (confluent_kafka, so librdkafka) and a check of what they saw.

`Workload` runs, each in a thread: an idempotent producer (acks=all) numbering its records, a
transactional producer whose transactions of five records are committed, or aborted one time in four,
and a read_committed member of a consumer group that commits its position after each poll. After the
faults, `check()` reads every partition from the start (read_committed) and returns a `Verdict`:

- lost: acknowledged records (idempotent, or of a committed transaction) not in the log;
- duplicated: a record in the log twice;
- reordered: an idempotent record before a lower-numbered one of the same partition;
- aborted_read: a record of an aborted transaction seen by a read_committed reader;
- offsets_back: a committed offset read back lower than one committed (and acknowledged) before;
- unconsumed: acknowledged records the group never delivered.
A transaction whose commit failed either way (a timeout, a fenced producer) may be in or out.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


@dataclass
class Verdict:
    acknowledged: int = 0
    committed_txns: int = 0
    aborted_txns: int = 0
    consumed: int = 0
    lost: list[bytes] = field(default_factory=list)
    duplicated: list[bytes] = field(default_factory=list)
    reordered: list[tuple[int, bytes]] = field(default_factory=list)
    aborted_read: list[bytes] = field(default_factory=list)
    offsets_back: list[tuple[str, int, int, int]] = field(default_factory=list)  # topic, partition, was, now
    unconsumed: list[bytes] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.lost or self.duplicated or self.reordered or self.aborted_read
                    or self.offsets_back or self.unconsumed)  # fmt: skip

    def __str__(self) -> str:
        bad = {k: v[:5] for k, v in vars(self).items() if isinstance(v, list) and v}
        counts = f"{self.acknowledged} acknowledged, {self.committed_txns} transactions committed"
        return f"{counts}, {self.aborted_txns} aborted, {self.consumed} consumed; problems: {bad or 'none'}"


# An idempotent producer this long without a delivery while it has records to send is taken as stuck:
# longer than any fault and its recovery, and than a request's timeout (30 s); shorter than the
# soak's 60 s wait for acknowledgements, so a stuck client is not read as a stalled cluster.
WEDGED_S = 45.0


class Workload:
    def __init__(self, bootstrap: str, topic: str, txn_topic: str, group: str) -> None:
        self.bootstrap, self.topic, self.txn_topic, self.group = bootstrap, topic, txn_topic, group
        self.acked: set[bytes] = set()
        self.committed: set[bytes] = set()  # records of committed transactions
        self.aborted: set[bytes] = set()
        self.uncertain: set[bytes] = set()
        self.seen: set[bytes] = set()
        self.offsets_back: list[tuple[str, int, int, int]] = []
        self.errors: Counter[str] = Counter()
        self.txns = Counter[str]()
        self._stop = threading.Event()
        self._producers_done = threading.Event()
        self._lock = threading.Lock()
        self._threads = [
            threading.Thread(target=f, daemon=True) for f in (self._idem, self._txn, self._group)
        ]

    def start(self) -> Workload:
        for t in self._threads:
            t.start()
        return self

    def stop(self, drain: float = 30.0) -> None:
        """Stop producing, then let the group catch up with what was acknowledged (up to `drain` s)."""
        self._producers_done.set()
        for t in self._threads[:2]:
            t.join(60)
        want = self.acked | self.committed
        deadline = time.monotonic() + drain
        while time.monotonic() < deadline and not want <= self.seen:
            time.sleep(0.2)
        self._stop.set()
        self._threads[2].join(60)

    def _config(self, **extra: Any) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap, "retry.backoff.ms": 50, **extra}

    def _idem(self) -> None:
        delivered_at = [time.monotonic()]

        def delivered(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.acked.add(msg.value())
                    delivered_at[0] = time.monotonic()
                else:
                    self.errors[f"idempotent: {err.name()}"] += 1

        n = 0
        while not self._producers_done.is_set():
            # debug=eos: the producer's idempotence states (drains, epoch bumps) in the log, so a
            # producer that stops sending can be read afterwards.
            idempotent = {"enable.idempotence": True, "linger.ms": 5}
            p = Producer(self._config(acks="all", debug="eos", **idempotent))
            delivered_at[0] = time.monotonic()
            try:
                while not self._producers_done.is_set():
                    if time.monotonic() - delivered_at[0] > WEDGED_S:
                        # A soak saw one librdkafka producer deliver nothing more after a burst of
                        # leader changes while a new one was served at once: counted, and replaced.
                        self.errors[f"idempotent producer: nothing delivered in {WEDGED_S:.0f} s"] += 1
                        break
                    try:
                        p.produce(self.topic, b"i-%08d" % n, key=b"%d" % (n % 16), on_delivery=delivered)
                    except BufferError:  # the local queue is full while the cluster is away: retry n
                        p.poll(0.1)
                        continue
                    p.poll(0.002)
                    n += 1
                p.flush(60 if self._producers_done.is_set() else 5)
            except KafkaException as e:
                # Fatal for this producer (its queued records fail: unacknowledged, maybe written);
                # a broker's wrong answer is the usual cause, so it is counted, and a new producer
                # (a new producer id) goes on: the workload outlives it.
                self.errors[f"idempotent producer: {e.args[0].name()}"] += 1
                with contextlib.suppress(KafkaException):
                    p.flush(5)

    def _txn(self) -> None:
        k = 0
        while not self._producers_done.is_set():
            p = Producer(
                self._config(**{"transactional.id": f"{self.group}-txn", "transaction.timeout.ms": 20000})
            )
            try:
                p.init_transactions(30)
                while not self._producers_done.is_set():
                    values = [b"t-%06d-%d" % (k, j) for j in range(5)]
                    commit = k % 4 != 3
                    k += 1
                    p.begin_transaction()
                    try:
                        for v in values:
                            p.produce(self.txn_topic, v, key=v)
                        p.flush(30)  # else an abort drops them unsent: aborted records must be in the log
                        (p.commit_transaction if commit else p.abort_transaction)(30)
                    except KafkaException as e:
                        self.uncertain.update(values)
                        self.errors[f"transaction: {e.args[0].name()}"] += 1
                        if e.args[0].txn_requires_abort():
                            p.abort_transaction(30)
                            continue
                        raise
                    (self.committed if commit else self.aborted).update(values)
                    self.txns["committed" if commit else "aborted"] += 1
            except KafkaException as e:  # fatal (fenced) or retriable beyond its tries: a new producer
                self.errors[f"transactional producer: {e.args[0].name()}"] += 1
                time.sleep(0.5)

    def _group(self) -> None:
        c = Consumer(self._config(**{
            "group.id": self.group, "isolation.level": "read_committed", "enable.auto.commit": False,
            "auto.offset.reset": "earliest", "session.timeout.ms": 10000,
        }))  # fmt: skip
        c.subscribe([self.topic, self.txn_topic])
        confirmed: dict[tuple[str, int], int] = {}
        try:
            while not self._stop.is_set():
                msgs = c.consume(500, 0.5)
                for m in msgs:
                    if m.error() is None:
                        with self._lock:
                            self.seen.add(m.value())
                if not msgs:
                    continue
                try:
                    done = c.commit(asynchronous=False) or []
                    back = c.committed([TopicPartition(t.topic, t.partition) for t in done], timeout=10)
                except KafkaException as e:
                    self.errors[f"group: {e.args[0].name()}"] += 1
                    continue
                for tp in back:
                    was = confirmed.get((tp.topic, tp.partition), -1)
                    if 0 <= tp.offset < was:
                        self.offsets_back.append((tp.topic, tp.partition, was, tp.offset))
                for tp in done:
                    if tp.error is None and tp.offset >= 0:
                        confirmed[(tp.topic, tp.partition)] = tp.offset
        finally:
            c.close()

    def check(self, log: list[tuple[int, int, bytes]] | None = None) -> Verdict:
        """`log`: what read_all returns (read here when None)."""
        if log is None:
            log = read_all(self.bootstrap, [self.topic, self.txn_topic])
        values = [v for _, _, v in log]
        counts = Counter(values)
        v = Verdict(len(self.acked), self.txns["committed"], self.txns["aborted"], len(self.seen))
        v.lost = sorted((self.acked | self.committed) - set(values))
        v.duplicated = sorted(x for x, n in counts.items() if n > 1)
        last: dict[int, bytes] = {}
        for topic_index, partition, value in log:
            if topic_index == 0:
                if partition in last and value < last[partition]:
                    v.reordered.append((partition, value))
                last[partition] = value
        v.aborted_read = sorted((set(values) | self.seen) & (self.aborted - self.uncertain))
        v.offsets_back = list(self.offsets_back)
        v.unconsumed = sorted((self.acked | self.committed) - self.seen)
        return v


def read_all(bootstrap: str, topics: list[str], timeout: float = 60.0) -> list[tuple[int, int, bytes]]:
    """(topic's index in `topics`, partition, value) of every record up to each partition's end now,
    in log order per partition, read_committed. A client whose metadata lags a leadership move (it
    may keep a partition unknown for many seconds after a deposed leader refused it) is replaced."""
    deadline = time.monotonic() + timeout
    while True:
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-all-{time.monotonic()}",
                      "isolation.level": "read_committed", "enable.auto.commit": False})  # fmt: skip
        try:
            md = c.list_topics(timeout=20).topics
            tps = [TopicPartition(t, p, 0) for t in topics for p in md[t].partitions]
            ends = {(tp.topic, tp.partition): int(c.get_watermark_offsets(tp, timeout=10)[1]) for tp in tps}
        except KafkaException as e:
            c.close()
            if time.monotonic() > deadline:
                raise AssertionError(f"no high watermarks for {topics}: {e}") from None
            time.sleep(0.5)
            continue
        try:
            return _read_to(c, topics, tps, ends, deadline)
        finally:
            c.close()


def _read_to(
    c: Consumer,
    topics: list[str],
    tps: list[TopicPartition],
    ends: dict[tuple[str, int], int],
    deadline: float,
) -> list[tuple[int, int, bytes]]:
    c.assign(tps)
    out: list[tuple[int, int, bytes]] = []
    while time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error() is None:
                out.append((topics.index(m.topic()), m.partition(), m.value()))
        if all(tp.offset >= ends[(tp.topic, tp.partition)] for tp in c.position(tps)):
            return out
    raise AssertionError(f"could not read {topics} to their ends {ends} in time")
