"""Loading a partition of `__consumer_offsets`: a long one is replayed in slices, its groups answered
COORDINATOR_LOAD_IN_PROGRESS (retriable, as Kafka answers) until it has ended; nothing acts on a
group half read back (offset expiry, session expiry), and a replay cut short is started afresh."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

import pytest

from brook import tasks
from brook.groups.coordinator import GroupCoordinator
from brook.groups.ports import OffsetCommit
from brook.protocol.errors import ErrorCode

from .test_coordinator import Clock, MemoryOffsetsLog, coordinator, join


class LeaderLog(MemoryOffsetsLog):
    """Leads the partitions in `leading`; its replay of `broken` fails once after the batches it has."""

    def __init__(self) -> None:
        super().__init__(4)
        self.leading = {0, 1, 2, 3}
        self.broken: int | None = None

    def is_local_leader(self, partition: int) -> bool:
        return partition in self.leading

    def read_batches(self, partition: int) -> Iterator[bytes]:
        yield from self.batches[partition]
        if partition == self.broken:
            self.broken = None
            raise OSError("segment replaced under the replay")


def _always(topic: str, partition: int) -> bool:
    return True


async def _commit(c: GroupCoordinator, group: str, offset: int) -> None:
    commits = [OffsetCommit("t", 0, offset, -1, "")]
    assert await c.commit_offsets(group, -1, "", None, commits, _always) == {("t", 0): ErrorCode.NONE}


async def _settle() -> None:
    for _ in range(200):  # the event loop is free between slices: replays end by themselves
        await asyncio.sleep(0)


def test_a_long_partition_is_replayed_in_slices_answering_load_in_progress(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def run() -> None:
        log = LeaderLog()
        first = coordinator(log)
        names = [f"g{i}" for i in range(40)]
        for i, g in enumerate(names):
            await _commit(first, g, i)
        monkeypatch.setattr(tasks, "SLICE_S", 0.0)  # every batch is a slice

        again = coordinator(log)
        assert set(again._loading) == {0, 1, 2, 3}
        assert {again.fetch_offsets(g, None)[0] for g in names} == {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
        await _settle()
        assert again._loading == {}
        for i, g in enumerate(names):
            code, rows = again.fetch_offsets(g, None)
            assert code is ErrorCode.NONE and [v.offset for _, _, v in rows if v] == [i]

        moved = coordinator(log)
        task = moved._loading[2]
        log.leading.discard(2)
        moved.unload_partition(2)  # another broker leads it now: the replay stops, nothing is kept
        await _settle()
        assert task.cancelled()
        in_2 = [g for g in names if moved.partition_for(g) == 2]
        assert in_2 and not set(in_2) & set(moved._offsets)
        assert {moved.fetch_offsets(g, None)[0] for g in in_2} == {ErrorCode.NOT_COORDINATOR}

    asyncio.run(run())


def test_offsets_are_not_expired_from_a_group_half_read_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The group's offsets come before its members in the log: between the two, the group looks
    empty, and expiring its offsets then would delete what an active group committed."""

    async def run() -> None:
        clock = Clock()
        log = LeaderLog()
        c = coordinator(log, clock)
        await _commit(c, "live", 5)
        member, gen, err = await join(c, "live")
        assert err is ErrorCode.NONE
        await c.sync("live", gen, member, None, None, None, {member: b"x"})
        await _settle()  # the group's record is written
        p = c.partition_for("live")
        written = len(log.batches[p])
        assert written >= 2
        clock.now += c.settings.offsets_retention_minutes * 60 * 2

        monkeypatch.setattr(tasks, "SLICE_S", 0.0)
        again = coordinator(log, clock)
        assert p in again._loading and "live" in again._offsets and "live" not in again._groups
        assert await again.expire_offsets() == 0
        assert len(log.batches[p]) == written
        await _settle()
        assert await again.expire_offsets() == 0  # loaded: a group with a member keeps its offsets
        assert [v.offset for _, _, v in again.fetch_offsets("live", None)[1] if v] == [5]
        await again.stop()
        await c.stop()

    asyncio.run(run())


def test_a_failed_replay_starts_afresh_keeping_nothing_meanwhile() -> None:
    async def run() -> None:
        log = LeaderLog()
        c = coordinator(log)
        await _commit(c, "g", 7)
        p = c.partition_for("g")

        log.broken = p
        again = coordinator(log)
        assert p in again._loading
        await asyncio.sleep(0.5)  # the first replay failed; the second waits its second
        assert p in again._loading
        assert "g" not in again._offsets  # nothing half read back is kept
        await asyncio.sleep(0.7)
        assert p not in again._loading and p in again._loaded
        code, rows = again.fetch_offsets("g", None)
        assert code is ErrorCode.NONE and [v.offset for _, _, v in rows if v] == [7]

    asyncio.run(run())


class SlowLog(MemoryOffsetsLog):
    """Each batch takes 20 ms to read; notes how many batches the partition held at each read."""

    def __init__(self) -> None:
        super().__init__(4)
        self.held: list[int] = []

    def read_batches(self, partition: int) -> Iterator[bytes]:
        batches = self.batches[partition]
        i = 0
        while i < len(batches):
            time.sleep(0.02)
            self.held.append(len(batches))
            yield batches[i]
            i += 1


def test_no_session_expires_while_its_partition_is_replayed(monkeypatch: pytest.MonkeyPatch) -> None:
    """A classic member's session starts when its partition is loaded: its group, read back early in
    a long replay, is not expired meanwhile (and no rebalance written into the partition being read)."""

    async def run() -> None:
        log = SlowLog()
        c = coordinator(log)
        member, gen, err = await join(c, "g", timeout_ms=1000)
        assert err is ErrorCode.NONE
        await c.sync("g", gen, member, None, None, None, {member: b"x"})
        await _settle()  # the group's record is written
        p = c.partition_for("g")
        others = [f"o{i}" for i in range(200) if c.partition_for(f"o{i}") == p][:20]
        for i, g in enumerate(others):  # 20 batches after the group's: 0.4 s of replay
            await _commit(c, g, i)
        await c.stop()
        written = len(log.batches[p])

        monkeypatch.setattr(tasks, "SLICE_S", 0.0)
        log.held.clear()
        again = coordinator(log)
        again.start()  # its session expiry runs every 0.1 s
        while p in again._loading:
            await asyncio.sleep(0.01)
        assert set(log.held) == {written}
        await asyncio.sleep(0.3)  # ticks of session expiry, inside the member's fresh second
        assert list(again._groups["g"].members) == [member]
        await again.stop()

    asyncio.run(run())
