"""The transaction coordinator when its `__transaction_state` partition moves under it: a write that
was waiting for its acknowledgement when the partition was unloaded sets nothing, and a partition
loaded again at a new leader epoch is replayed afresh, not kept from an earlier leadership."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from brook import tasks
from brook.protocol.errors import ErrorCode, KafkaError
from brook.transactions.coordinator import TransactionCoordinator, TxnSettings
from brook.transactions.state import TxnState

PARTITIONS = 1


class StateLog:
    """One in-memory `__transaction_state` partition; `hold` keeps appends waiting (acks=all)."""

    def __init__(self) -> None:
        self.batches: list[bytes] = []
        self.epoch = 0
        self.hold: asyncio.Event | None = None

    async def ensure_topic(self, partitions: int, replication_factor: int) -> None:
        pass

    def is_local_leader(self, partition: int) -> bool:
        return True

    def leader_epoch(self, partition: int) -> int:
        return self.epoch

    def topic_exists(self, topic: str) -> bool:
        return True

    async def append(self, partition: int, batch: bytes) -> None:
        self.batches.append(batch)
        if self.hold is not None:
            await self.hold.wait()

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.batches


class NoMarkers:
    async def write_markers(self, *args: object) -> dict[object, ErrorCode]:
        return {}


def coordinator(log: StateLog) -> TransactionCoordinator:
    pids = iter(range(1000, 2000))

    async def allocate() -> int:
        return next(pids)

    c = TransactionCoordinator(log, NoMarkers(), allocate, TxnSettings(state_log_partitions=PARTITIONS))
    c.load_partition(0)
    return c


def test_a_write_waiting_when_the_partition_is_unloaded_sets_nothing() -> None:
    async def run() -> None:
        log = StateLog()
        c = coordinator(log)
        log.hold = asyncio.Event()
        init = asyncio.create_task(c.init_producer_id("t1", 60_000))  # a new id: nothing to compare
        await asyncio.sleep(0.01)
        c.unload_partition(0)  # another broker leads the partition now
        log.hold.set()
        with pytest.raises(KafkaError) as e:
            await init
        assert e.value.code == ErrorCode.NOT_COORDINATOR
        assert "t1" not in c._txns  # nothing stale kept for the expiry loop or a later leadership

    asyncio.run(run())


def test_loaded_again_at_a_new_epoch_replays_the_log() -> None:
    async def run() -> None:
        log = StateLog()
        c = coordinator(log)
        _, epoch = await c.init_producer_id("t1", 60_000)
        # The partition moved away and back without this coordinator hearing that it went; meanwhile
        # the other leader's coordinator bumped the producer (a new InitProducerId) in the log.
        other = coordinator(log)
        _, bumped = await other.init_producer_id("t1", 60_000)
        assert bumped == epoch + 1
        log.epoch = 3
        c.load_partition(0)
        meta = c.describe("t1")
        assert meta.state is TxnState.EMPTY and meta.producer_epoch == bumped

    asyncio.run(run())


def test_a_write_whose_request_went_away_still_completes() -> None:
    """A producer killed during AddPartitionsToTxn: its connection closes and the request's task is
    cancelled while the state write waits for acks=all. The write must still land, so the next
    producer of the id aborts the transaction instead of being told CONCURRENT_TRANSACTIONS for ever."""

    async def run() -> None:
        log = StateLog()
        c = coordinator(log)
        pid, epoch = await c.init_producer_id("t1", 60_000)
        log.hold = asyncio.Event()
        add = asyncio.create_task(c.add_partitions("t1", pid, epoch, [("events", 0)]))
        await asyncio.sleep(0.01)
        add.cancel()  # the connection of the killed producer closed
        with pytest.raises(asyncio.CancelledError):
            await add
        log.hold.set()  # the followers acknowledge the write
        await asyncio.sleep(0.01)
        log.hold = None
        meta = c.describe("t1")
        assert meta.state is TxnState.ONGOING and not meta.pending
        written = len(log.batches)
        with pytest.raises(KafkaError) as e:  # the next producer: its transaction is aborted first
            await c.init_producer_id("t1", 60_000)
        assert e.value.code == ErrorCode.CONCURRENT_TRANSACTIONS
        assert len(log.batches) > written
        assert c.describe("t1").producer_epoch == epoch + 1

    asyncio.run(run())


def test_a_long_partition_is_replayed_in_the_background_answering_load_in_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replayed in one go, a long `__transaction_state` partition held a soak broker's event loop
    past its etcd lease; now the replay yields, and its ids are answered COORDINATOR_LOAD_IN_PROGRESS
    (retriable, as Kafka answers) until it has ended."""

    async def run() -> None:
        log = StateLog()
        first = coordinator(log)
        pids = {f"t{i}": (await first.init_producer_id(f"t{i}", 60_000))[0] for i in range(20)}
        monkeypatch.setattr(tasks, "SLICE_S", 0.0)  # every batch is a slice
        log.epoch = 1
        again = coordinator(log)
        with pytest.raises(KafkaError) as e:
            await again.init_producer_id("t0", 60_000)
        assert e.value.code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        for _ in range(200):  # the event loop is free between slices: the replay ends by itself
            await asyncio.sleep(0)
        assert {t: again._txns[t].producer_id for t in pids} == pids
        pid, epoch = await again.init_producer_id("t0", 60_000)
        assert (pid, epoch) == (pids["t0"], 1)

        log.epoch = 2
        moved = coordinator(log)
        replay = moved._loading[0][1]
        moved.unload_partition(0)  # another broker leads it now: the replay stops, nothing is kept
        for _ in range(200):
            await asyncio.sleep(0)
        assert replay.cancelled() and moved._txns == {}
        with pytest.raises(KafkaError) as e:
            await moved.init_producer_id("t0", 60_000)
        assert e.value.code == ErrorCode.NOT_COORDINATOR

    asyncio.run(run())
