"""The `_schemas` topic, through Kafka clients only (confluent-kafka, in worker threads): a consumer
tails it into this node's RegistryState, and writes go through one transactional id shared by every
registry of the cluster, so exactly one node can write at a time.

Why ids never collide: a node that wants to write calls InitProducerId with that transactional id, which
fences every other node's producer (their next produce or commit fails with a fencing error). Right after,
it commits a NOOP record and waits until its consumer has applied it: its state then holds every record
committed before its epoch began. From then on no other node can commit without fencing it first, so
the ids it hands out (the largest id seen + 1) are unused, and a commit that fails because another node
took over is retried from the start (fence back, catch up, check again). A node killed -9 mid-write
leaves an open transaction, which the next node's InitProducerId aborts (Kafka's transaction rules), so
a half-written registration never shows. Registrations are acknowledged only once committed (acks=all)
and applied locally, so a client reads its own writes on the node it wrote to; other nodes see a write
once their consumer's long poll returns it (measured in docs/schema-registry.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .errors import RegistryError, store_timeout, store_unavailable
from .state import RegistryState, encode

log = logging.getLogger(__name__)

Record = tuple[dict[str, Any], dict[str, Any] | None]
NOOP: Record = ({"keytype": "NOOP", "magic": 0}, None)
# What brokers answer for a topic created a moment ago, until its metadata has reached them all.
_NOT_YET_KNOWN = (
    KafkaError._UNKNOWN_PARTITION,  # the client's metadata does not show the new partition yet
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
)


class SchemaStore:
    def __init__(
        self,
        bootstrap: str,
        replication_factor: int = 1,
        topic: str = "_schemas",
        transactional_id: str = "brook-schema-registry",
        client_config: dict[str, str] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        self.topic = topic
        self.state = RegistryState()
        self._config: dict[str, Any] = {
            "logger": log,
            "bootstrap.servers": bootstrap,
            **(client_config or {}),
        }
        self._transactional_id = transactional_id
        self._timeout_s = timeout_s
        self._replication_factor = replication_factor
        self._producer: Producer | None = None
        self._write_lock = asyncio.Lock()
        self._position = 0  # the consumer's next offset: every record before it is applied
        self._waiters: list[tuple[int, asyncio.Future[None]]] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        await asyncio.to_thread(self._create_topic)
        self._thread = threading.Thread(target=self._tail, name="schemas-tail", daemon=True)
        self._thread.start()
        end = await asyncio.to_thread(self._end_offset)
        try:
            await self._applied(end - 1)  # serve nothing older than what the topic held at start
        except RegistryError:
            log.warning(
                "%s not read up to offset %d in %.0fs: serving what is read", self.topic, end, self._timeout_s
            )

    async def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 10)
        for _, waiter in self._waiters:
            waiter.cancel()
        self._producer = None

    # Writes

    async def write(self, build: Callable[[RegistryState], list[Record]]) -> None:
        """Commit the records `build` makes from an up-to-date state (it may raise RegistryError), as
        this cluster's only writer, and return once they are applied here."""
        async with self._write_lock:
            deadline = time.monotonic() + self._timeout_s
            attempt = 0
            while True:
                attempt += 1
                try:
                    if self._producer is None:
                        await asyncio.to_thread(self._init_producer)
                        await self._applied(await asyncio.to_thread(self._commit, [NOOP]))
                    records = build(self.state)
                    if not records:
                        return
                    await self._applied(await asyncio.to_thread(self._commit, records))
                    return
                except KafkaException as e:
                    self._producer = None  # fenced (another node took over) or broken: fence back
                    if time.monotonic() > deadline:
                        raise store_unavailable(str(e)) from None
                    log.info("schema write attempt %d failed, retrying as a new writer: %s", attempt, e)
                    # Writers fencing each other in turn back off at random, so one of them gets through.
                    await asyncio.sleep(random.uniform(0, min(0.05 * 2**attempt, 1.0)))

    def _init_producer(self) -> None:
        producer = Producer(
            {
                **self._config,
                "transactional.id": self._transactional_id,
                # A writer killed mid-write holds back read_committed readers until this passes (or the
                # next writer's InitProducerId aborts its transaction).
                "transaction.timeout.ms": 10_000,
                "linger.ms": 0,
            }
        )
        try:
            producer.init_transactions(self._timeout_s)
        except KafkaException as e:
            raise KafkaException(e.args[0]) from e
        self._producer = producer

    def _commit(self, records: list[Record]) -> int:
        """Produce `records` in one transaction; the offset of the last one."""
        producer = self._producer
        assert producer is not None
        offsets: list[int] = []
        errors: list[KafkaError] = []

        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is not None:
                errors.append(err)
            else:
                offsets.append(msg.offset())

        producer.begin_transaction()
        try:
            for key, value in records:
                producer.produce(self.topic, encode(value), encode(key), partition=0, on_delivery=delivered)
            producer.flush(self._timeout_s)
            if errors or len(offsets) != len(records):
                raise KafkaException(errors[0] if errors else KafkaError(KafkaError._TIMED_OUT))
            producer.commit_transaction(self._timeout_s)
        except Exception as e:
            # A fenced producer can surface through the delivery callback as a SystemError: one path.
            with contextlib.suppress(Exception):
                producer.abort_transaction(5)
            raise (
                e if isinstance(e, KafkaException) else KafkaException(KafkaError(KafkaError._FAIL, str(e)))
            ) from e
        return max(offsets)

    async def _applied(self, offset: int) -> None:
        if self._position > offset:
            return
        assert self._loop is not None
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._waiters.append((offset, waiter))
        try:
            await asyncio.wait_for(waiter, self._timeout_s)
        except TimeoutError as e:
            raise store_timeout(
                f"the write at offset {offset} was not read back in {self._timeout_s}s"
            ) from e

    # Reads: the tail

    def _create_topic(self) -> None:
        """Create the topic unless it exists; retried while the cluster has fewer brokers than replicas
        (brokers of a cluster start one by one)."""
        admin = AdminClient(self._config)
        topic = NewTopic(
            self.topic,
            num_partitions=1,
            replication_factor=self._replication_factor,
            # acks=all then means two copies: an acknowledged schema survives its leader's loss.
            config={
                "cleanup.policy": "compact",
                "min.insync.replicas": str(min(2, self._replication_factor)),
            },
        )
        deadline = time.monotonic() + self._timeout_s * 4
        while True:
            if self.topic in admin.list_topics(timeout=self._timeout_s).topics:
                return
            future = admin.create_topics([topic], operation_timeout=5)[self.topic]
            try:
                future.result(10)
                log.info("created %s (replication factor %d)", self.topic, self._replication_factor)
                return
            except TimeoutError:
                pass  # created or not: the metadata says on the next round
            except KafkaException as e:
                code = e.args[0].code()
                if code == KafkaError.TOPIC_ALREADY_EXISTS:
                    return
                if code not in (KafkaError.INVALID_REPLICATION_FACTOR, KafkaError.REQUEST_TIMED_OUT):
                    raise
            if time.monotonic() > deadline:
                raise store_timeout(f"{self.topic} could not be created")
            time.sleep(0.5)

    def _end_offset(self) -> int:
        """The topic's end (read_committed), waiting out a topic too new for every broker to know. A
        new client each try: one that saw the topic without the partition keeps that view for minutes."""
        deadline = time.monotonic() + self._timeout_s
        while True:
            consumer = Consumer(
                {**self._config, "group.id": "brook-schema-registry", "isolation.level": "read_committed"}
            )
            try:
                return int(consumer.get_watermark_offsets(TopicPartition(self.topic, 0), self._timeout_s)[1])
            except KafkaException as e:
                retry = e.args[0].retriable() or e.args[0].code() in _NOT_YET_KNOWN
                if not retry or time.monotonic() > deadline:
                    raise
            finally:
                consumer.close()
            time.sleep(0.2)

    def _tail(self) -> None:
        consumer = Consumer(
            {
                **self._config,
                "group.id": f"brook-schema-registry-{uuid.uuid4()}",  # never joined: partitions are assigned
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 100,
                "fetch.error.backoff.ms": 100,
            }
        )
        tp = TopicPartition(self.topic, 0, OFFSET_BEGINNING)
        consumer.assign([tp])
        try:
            while not self._stopping.is_set():
                # consume(n, timeout) would wait out its timeout for n records: one poll waits, then
                # whatever else is already fetched is taken without waiting.
                first = consumer.poll(0.2)
                batch = [first, *consumer.consume(1000, 0)] if first is not None else []
                records = [(m.key(), m.value()) for m in batch if m.error() is None]
                position = consumer.position([TopicPartition(self.topic, 0)])[0].offset
                assert self._loop is not None
                if records or position > self._position:
                    self._loop.call_soon_threadsafe(self._on_records, records, position)
        except RuntimeError:
            pass  # the loop closed under us
        finally:
            consumer.close()

    def _on_records(self, records: list[tuple[bytes | None, bytes | None]], position: int) -> None:
        for key, value in records:
            self.state.apply(key, value)
        self._position = max(self._position, position)
        waiting = []
        for offset, waiter in self._waiters:
            if offset < self._position:
                if not waiter.done():
                    waiter.set_result(None)
            else:
                waiting.append((offset, waiter))
        self._waiters = waiting

    @property
    def position(self) -> int:
        return self._position


__all__ = ["NOOP", "Record", "RegistryError", "SchemaStore"]
