"""A watch that survives etcd restarts and compactions without missing or repeating a change."""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from collections.abc import Iterable

from brook.tasks import raise_if_cancelling

from .client import EtcdClient, RawWatch
from .errors import CompactedError, EtcdUnavailableError, MetadataError
from .kv import EventType, KeyValue, WatchEvent

log = logging.getLogger(__name__)


class PrefixWatch:
    """Every change to the keys in [key, range_end) from `start_revision` on, in revision order.

    When the stream breaks (etcd restarted, connection lost) it is re-created from the last revision
    seen; changes of that revision already delivered are skipped, so nothing is missed or repeated
    even if a multi-key transaction was cut in the middle. When etcd has compacted the history it
    needs, the watch re-lists the range and reports the difference with what it knew (`known`: the
    keys as they were at start_revision - 1, e.g. from a snapshot; then every change it delivered)
    as events marked `resync=True`, then goes on from the re-list's revision.

    Iterate with `async for`; `aclose()` ends it. Not for concurrent consumers.
    """

    def __init__(
        self,
        client: EtcdClient,
        key: bytes,
        range_end: bytes | None,
        start_revision: int,
        known: Iterable[KeyValue] = (),
    ) -> None:
        self._client = client
        self._key = key
        self._end = range_end
        self._floor = start_revision - 1  # every change at or below it is delivered (or covered)
        self._cur_rev = 0  # the revision of the last live event delivered ...
        self._cur_keys: set[bytes] = set()  # ... and the keys delivered at that revision
        self._known: dict[bytes, tuple[int, bytes]] = {kv.key: (kv.mod_revision, kv.value) for kv in known}
        self._pending: deque[WatchEvent] = deque()
        self._raw: RawWatch | None = None
        self._closed = False
        self.reconnects = 0
        self.resyncs = 0

    @property
    def revision(self) -> int:
        """The last revision delivered."""
        return max(self._floor, self._cur_rev)

    def __aiter__(self) -> PrefixWatch:
        return self

    async def __anext__(self) -> WatchEvent:
        while True:
            raise_if_cancelling()
            if self._pending:
                return self._deliver(self._pending.popleft())
            if self._closed:
                raise StopAsyncIteration
            if self._raw is None:
                await self._open()
                continue
            try:
                ev = await self._raw.next()
            except StopAsyncIteration:
                self._raw = None
                continue
            except CompactedError:
                await self._drop()
                await self._resync()
                continue
            except EtcdUnavailableError as e:
                if not self._closed:
                    log.info("etcd watch broke (%s); resuming from revision %d", e, self.revision)
                    self.reconnects += 1
                await self._drop()
                continue
            if self._accept(ev):
                return self._deliver(ev)

    def _accept(self, ev: WatchEvent) -> bool:
        if ev.revision <= self._floor:
            return False
        if ev.revision < self._cur_rev:
            return False
        return not (ev.revision == self._cur_rev and ev.key in self._cur_keys)

    def _deliver(self, ev: WatchEvent) -> WatchEvent:
        if not ev.resync:
            if ev.revision > self._cur_rev:
                self._cur_rev = ev.revision
                self._cur_keys = {ev.key}
            else:
                self._cur_keys.add(ev.key)
        if ev.type is EventType.PUT:
            self._known[ev.key] = (ev.revision, ev.value)
        else:
            self._known.pop(ev.key, None)
        return ev

    def _start_revision(self) -> int:
        return self._cur_rev if self._cur_rev > self._floor else self._floor + 1

    async def _open(self) -> None:
        delay = 0.05
        while not self._closed:
            if self._client.closed:
                self._closed = True
                return
            try:
                self._raw = await self._client.open_watch(self._key, self._end, self._start_revision())
                return
            except CompactedError:
                await self._resync()
                continue
            except EtcdUnavailableError as e:
                log.debug("etcd watch: cannot open yet: %s", e)
            except MetadataError as e:
                log.warning("etcd watch: cannot open: %s", e)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def _resync(self) -> None:
        delay = 0.05
        while True:
            try:
                rr = await self._client.get_range(self._key, self._end)
                break
            except MetadataError as e:
                if self._closed or self._client.closed:
                    self._closed = True
                    return
                log.debug("etcd watch: re-list failed: %s", e)
                await asyncio.sleep(delay)
                delay = min(delay * 2, 1.0)
        current = {kv.key: kv for kv in rr.kvs}
        log.warning(
            "etcd watch: history compacted; re-listed %d keys at revision %d", len(current), rr.revision
        )
        for key, (_, value) in sorted(self._known.items()):
            if key not in current:
                self._pending.append(WatchEvent(EventType.DELETE, key, value, rr.revision, resync=True))
        for kv in sorted(current.values(), key=lambda kv: kv.mod_revision):
            seen = self._known.get(kv.key)
            if seen is None or seen[0] != kv.mod_revision:
                self._pending.append(
                    WatchEvent(
                        EventType.PUT, kv.key, kv.value, kv.mod_revision, kv.create_revision, kv.version, True
                    )
                )
        self._floor = max(self._floor, rr.revision)
        self.resyncs += 1

    async def _drop(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            await raw.cancel()

    async def aclose(self) -> None:
        self._closed = True
        await self._drop()

    async def __aenter__(self) -> PrefixWatch:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def watch_prefix(
    client: EtcdClient, prefix: bytes, start_revision: int, known: Iterable[KeyValue] = ()
) -> PrefixWatch:
    from .kv import prefix_end

    return PrefixWatch(client, prefix, prefix_end(prefix), start_revision, known)


def watch_key(
    client: EtcdClient, key: bytes, start_revision: int, known: KeyValue | None = None
) -> PrefixWatch:
    return PrefixWatch(client, key, None, start_revision, [known] if known is not None else [])
