"""The follower's fetcher: one task per leader broker replicating every partition this broker follows
from it.

On a new leader epoch a partition first asks the leader where its own latest epoch ended
(OffsetForLeaderEpoch) and truncates anything after that point: records a deposed leader wrote but
never committed do not survive. Then it fetches from its log end, appends batches with their offsets and
epochs as they are, and mirrors the leader's high watermark. Fetching at offset N tells the leader the
follower has everything below N; that is how the leader's ISR and high watermark move.

It fetches through a fetch session (KIP-227) and sends only the positions that moved. It learns which
from the partitions themselves (it listens to them, as fetch sessions do: appends, truncation, resets,
log start and role changes all tell it), not by comparing every position on every fetch; every
_FULL_CHECK_S it compares them all anyway, in case something moved without a word.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from brook.protocol import messages
from brook.protocol.batch import LOG_OVERHEAD, peek_offset_and_size
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.replica_fetch import (
    VERSION,
    ReplicaFetchPartition,
    ReplicaFetchResult,
    decode_replica_fetch_response,
    encode_replica_fetch,
)
from brook.protocol.versions import ApiKey

from .peer import PLAINTEXT, PeerConnection, PeerSecurity
from .replica import FollowerReplica

log = logging.getLogger(__name__)

_EPOCH_VERSION = 3
_MAX_WAIT_MS = 500
_PARTITION_MAX_BYTES = 8 * 1024 * 1024
_BACKOFF_S = 0.5
_FULL_CHECK_S = 30.0


def whole_batches(records: memoryview) -> memoryview:
    """The prefix of `records` made of whole batches (a fetch may end mid-batch)."""
    pos, n = 0, len(records)
    while pos + LOG_OVERHEAD <= n:
        _, size = peek_offset_and_size(records, pos)
        if pos + size > n:
            break
        pos += size
    return records[:pos]


class Throttle:
    """A byte-rate limit for replicas being added by a reassignment (leader.replication.throttled.rate)."""

    def __init__(self, bytes_per_s: int) -> None:
        self.rate = bytes_per_s
        self._allowance = float(bytes_per_s)
        self._last = time.monotonic()

    async def take(self, n: int) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        self._allowance = min(float(self.rate), self._allowance + (now - self._last) * self.rate)
        self._last = now
        self._allowance -= n
        if self._allowance < 0:
            await asyncio.sleep(-self._allowance / self.rate)


R = TypeVar("R", bound=FollowerReplica)


class LeaderFetcher(Generic[R]):
    def __init__(
        self,
        node_id: int,
        leader_id: int,
        host: str,
        port: int,
        throttled: Callable[[R], bool],
        throttle: Throttle,
        on_replicated: Callable[[int], None] = lambda n: None,
        security: PeerSecurity = PLAINTEXT,
    ) -> None:
        self.node_id = node_id
        self.leader_id = leader_id
        self.address = (host, port)
        self.partitions: dict[tuple[str, int], R] = {}
        self._needs_truncation: set[tuple[str, int]] = set()
        self._throttled = throttled
        self._throttle = throttle
        self._on_replicated = on_replicated
        self._conn = PeerConnection(
            host,
            port,
            f"brook-replica-{node_id}",
            ssl_context=security.ssl_context,
            authenticate=security.authenticate,
        )
        self._task: asyncio.Task[None] | None = None
        # The fetch session with the leader (KIP-227): its id (0: none yet), the epoch of the next
        # request, and the position the leader holds for each partition, so an idle fetch lists none.
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent: dict[tuple[str, int], tuple[int, int, int]] = {}
        self._moved: set[tuple[str, int]] = set()  # positions to compare with what the session holds
        self._checked_all = 0.0  # monotonic time of the last comparison of every position
        self._wakeup = asyncio.Event()
        self._stopping = False

    def wake(self, p: R, data: bool) -> None:
        """A partition fetched here changed (the broker's Partition.wake_fetchers): its position may
        have moved."""
        self._moved.add((p.topic, p.index))

    def add(self, p: R) -> None:
        key = (p.topic, p.index)
        old = self.partitions.get(key)
        if old is not None and old is not p:
            old.remove_waiter(self)
        self.partitions[key] = p
        p.add_waiter(self)
        self._needs_truncation.add(key)
        self._moved.add(key)
        self._wakeup.set()

    def remove(self, p: R) -> None:
        key = (p.topic, p.index)
        old = self.partitions.pop(key, None)
        if old is not None:
            old.remove_waiter(self)
            self._moved.add(key)
        self._needs_truncation.discard(key)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        # The flag as well as the cancel: a cancel can be lost when a response arrives in the same
        # loop iteration (asyncio.wait_for in Python 3.11), and then the loop must end by itself.
        self._stopping = True
        self._wakeup.set()
        self._conn.close()
        for p in self.partitions.values():
            p.remove_waiter(self)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 5.0)

    async def _run(self) -> None:
        while not self._stopping:
            if not self.partitions:
                self._wakeup.clear()
                await self._wakeup.wait()
                continue
            try:
                if self._needs_truncation:
                    await self._truncate()
                await self._fetch_once()
            except asyncio.CancelledError:
                raise
            except (ConnectionError, OSError, KafkaError, ValueError) as e:
                log.info("replica fetcher %d <- %d: %s; retrying", self.node_id, self.leader_id, e)
                self._reset_session()
                self._conn.close()
                await asyncio.sleep(_BACKOFF_S)
            except Exception:
                log.exception("replica fetcher %d <- %d failed; retrying", self.node_id, self.leader_id)
                self._reset_session()
                self._conn.close()
                await asyncio.sleep(_BACKOFF_S)

    async def _truncate(self) -> None:
        keys = list(self._needs_truncation)
        parts = [self.partitions[k] for k in keys if k in self.partitions]
        topics: dict[str, list[dict[str, int]]] = {}
        for p in parts:
            topics.setdefault(p.topic, []).append(
                {
                    "partition": p.index,
                    "current_leader_epoch": p.leader_epoch,
                    "leader_epoch": p.epochs.latest_epoch,
                }
            )
        body = messages.encode_request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH,
            _EPOCH_VERSION,
            {
                "replica_id": self.node_id,
                "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        raw = await self._conn.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, _EPOCH_VERSION, body)
        resp = messages.decode_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, _EPOCH_VERSION, raw)
        for t in resp.topics:
            for q in t.partitions:
                key = (t.topic, q.partition)
                target = self.partitions.get(key)
                if target is None:
                    continue
                p = target
                if q.error_code != ErrorCode.NONE:
                    continue  # e.g. the leader has not taken over yet: ask again next round
                self._needs_truncation.discard(key)
                self._moved.add(key)  # fetched again from here on
                if p.epochs.latest_epoch < 0:
                    continue  # an empty log has nothing to truncate
                end = q.end_offset if q.end_offset >= 0 else p.high_watermark
                if end < p.log.log_end_offset:
                    log.info(
                        "%s-%d: truncating from %d to %d (leader %d, epoch %d)",
                        p.topic,
                        p.index,
                        p.log.log_end_offset,
                        end,
                        self.leader_id,
                        q.leader_epoch,
                    )
                    p.truncate_to(end)

    async def _fetch_once(self) -> None:
        if len(self._needs_truncation) >= len(self.partitions):  # all wait for their truncation point
            await asyncio.sleep(_BACKOFF_S)
            return
        changed, forgotten = self._changes()
        request = [
            ReplicaFetchPartition(topic, index, offset, epoch, start, _PARTITION_MAX_BYTES)
            for (topic, index), (offset, epoch, start) in changed.items()
        ]
        body = encode_replica_fetch(
            self.node_id, _MAX_WAIT_MS, 1, 64 * 1024 * 1024, request, self._session_id, self._session_epoch,
            forgotten,
        )  # fmt: skip
        raw = await self._conn.request(ApiKey.FETCH, VERSION, body)
        error, session_id, results = decode_replica_fetch_response(raw)
        if error in (ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH):
            self._reset_session()  # the leader lost it (restart, eviction): a full fetch opens another
            return
        if error != ErrorCode.NONE:
            raise KafkaError(ErrorCode(error), "fetch refused by the leader")
        self._session_opened(session_id, changed, forgotten)
        await self._apply(results)

    def _changes(self) -> tuple[dict[tuple[str, int], tuple[int, int, int]], list[tuple[str, int]]]:
        """The positions to send (log end, leader epoch, log start) and the partitions to forget. A new
        session lists every partition; an open one only those whose position moved (an idle fetch lists
        none) and forgets those no longer fetched here (or waiting for their truncation point)."""
        waiting, partitions, sent = self._needs_truncation, self.partitions, self._session_sent
        now = time.monotonic()
        if self._session_id == 0 or now - self._checked_all >= _FULL_CHECK_S:
            self._checked_all = now
            candidates: set[tuple[str, int]] = partitions.keys() | sent.keys()
        else:
            candidates = self._moved
        self._moved = set()
        changed: dict[tuple[str, int], tuple[int, int, int]] = {}
        forgotten: list[tuple[str, int]] = []
        for key in candidates:
            p = partitions.get(key)
            if p is None or key in waiting:
                if key in sent and self._session_id != 0:
                    forgotten.append(key)
                continue
            position = (p.log.log_end_offset, p.leader_epoch, p.log.log_start_offset)
            if self._session_id == 0 or sent.get(key) != position:
                changed[key] = position
        return changed, forgotten

    def _session_opened(
        self,
        session_id: int,
        changed: dict[tuple[str, int], tuple[int, int, int]],
        forgotten: list[tuple[str, int]],
    ) -> None:
        """The leader answered a request that sent `changed` and forgot `forgotten` in `session_id`."""
        sent = self._session_sent
        if session_id == 0:
            self._reset_session()  # no session given (the leader's cache is full): full fetches
        else:
            if self._session_id == 0:
                sent.clear()
            self._session_id = session_id
            self._session_epoch = self._session_epoch + 1 if self._session_epoch < 2**31 - 1 else 1
            for k in forgotten:
                sent.pop(k, None)
            sent.update(changed)

    async def _apply(self, results: list[ReplicaFetchResult]) -> None:
        throttled_bytes = 0
        partitions = self.partitions
        for r in results:
            p = partitions.get((r.topic, r.partition))
            if p is None or p.is_leader:
                continue
            if r.error_code:
                if r.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    self._out_of_range(p, r.log_start_offset)
                continue  # not leader any more, fenced epoch, ...: wait for the metadata to catch up
            records = r.records
            if len(records):
                records = whole_batches(records)
                p.append_replicated(records)
                self._on_replicated(len(records))
                if self._throttled(p):
                    throttled_bytes += len(records)
            # Most partitions of a fetch have nothing new: these two only compare then.
            p.set_follower_high_watermark(r.high_watermark)
            p.set_follower_log_start_offset(r.log_start_offset)
        if throttled_bytes:
            await self._throttle.take(throttled_bytes)

    def _reset_session(self) -> None:
        self._session_id = 0
        self._session_epoch = 0
        self._session_sent.clear()

    def _out_of_range(self, p: R, leader_log_start: int) -> None:
        if leader_log_start > p.log.log_end_offset:
            # The leader's retention passed our log end: start over at its log start.
            log.info("%s-%d: behind the leader's log start %d; resetting", p.topic, p.index, leader_log_start)
            p.reset_to(leader_log_start)
        else:
            self._needs_truncation.add((p.topic, p.index))
            self._moved.add((p.topic, p.index))  # forgotten until truncated
