"""Object storage: one global resourceVersion counter (as etcd's revision), buckets per resource,
a bounded per-bucket event history for watches that resume from a resourceVersion, and a fan-out
of events to the open watches of each bucket.

Everything runs on the server's single event loop, so writes are atomic without locks. Stored
objects are never mutated in place: each write stores a fresh dict.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

JSON = dict[str, Any]
BucketKey = tuple[str, str]  # (group, plural)
ObjKey = tuple[str, str]  # (namespace or "", name)


@dataclass(frozen=True)
class Event:
    rv: int
    type: str  # ADDED, MODIFIED, DELETED
    obj: JSON
    old: JSON | None = None


@dataclass(eq=False)
class Watcher:
    bucket: BucketKey
    queue: asyncio.Queue[Event | None] = field(default_factory=asyncio.Queue)


@dataclass
class Bucket:
    objects: dict[ObjKey, JSON] = field(default_factory=dict)
    history: collections.deque[Event] = field(default_factory=collections.deque)
    horizon: int = 0  # events with rv > horizon are all in history
    watchers: set[Watcher] = field(default_factory=set)


class Expired(Exception):
    """The requested resourceVersion is older than the kept history (410 Gone)."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")


class Store:
    def __init__(self, history: int = 10_000) -> None:
        self.rv = 0
        self.history_limit = history
        self.buckets: dict[BucketKey, Bucket] = {}
        self.uids: dict[str, tuple[BucketKey, ObjKey]] = {}
        self.dropped: dict[BucketKey, int] = {}
        self.listeners: list[Any] = []  # callables(bucket_key, event): GC and controllers

    def bucket(self, key: BucketKey) -> Bucket:
        b = self.buckets.get(key)
        if b is None:
            # A new bucket missed nothing, unless an earlier one of the same key was dropped.
            b = self.buckets[key] = Bucket(horizon=self.dropped.get(key, 0))
        return b

    def next_rv(self) -> int:
        self.rv += 1
        return self.rv

    # ------------------------------------------------------------ reads

    def get(self, key: BucketKey, ns: str, name: str) -> JSON | None:
        return self.bucket(key).objects.get((ns, name))

    def items(self, key: BucketKey, ns: str | None = None) -> Iterator[JSON]:
        objs = self.bucket(key).objects
        for (ons, _), obj in sorted(objs.items()):
            if ns is None or ons == ns:
                yield obj

    def by_uid(self, uid: str) -> tuple[BucketKey, JSON] | None:
        where = self.uids.get(uid)
        if where is None:
            return None
        obj = self.bucket(where[0]).objects.get(where[1])
        return (where[0], obj) if obj is not None else None

    def all_objects(self) -> Iterator[tuple[BucketKey, JSON]]:
        for key, b in list(self.buckets.items()):
            for obj in list(b.objects.values()):
                yield key, obj

    # ------------------------------------------------------------ writes

    def put(self, key: BucketKey, obj: JSON, *, stamp: bool = True) -> JSON:
        """Create or replace; stamps a new resourceVersion and emits ADDED or MODIFIED."""
        meta = obj["metadata"]
        okey = (meta.get("namespace", ""), meta["name"])
        b = self.bucket(key)
        old = b.objects.get(okey)
        if stamp:
            meta["resourceVersion"] = str(self.next_rv())
        b.objects[okey] = obj
        self.uids[meta["uid"]] = (key, okey)
        self._emit(key, b, Event(int(meta["resourceVersion"]), "MODIFIED" if old else "ADDED", obj, old))
        return obj

    def delete(self, key: BucketKey, ns: str, name: str) -> JSON | None:
        b = self.bucket(key)
        old = b.objects.pop((ns, name), None)
        if old is None:
            return None
        final = dict(old)
        final["metadata"] = dict(old["metadata"], resourceVersion=str(self.next_rv()))
        self.uids.pop(old["metadata"].get("uid", ""), None)
        self._emit(key, b, Event(self.rv, "DELETED", final, old))
        return final

    def drop_bucket(self, key: BucketKey) -> None:
        b = self.buckets.pop(key, None)
        self.dropped[key] = self.rv
        if b:
            for w in list(b.watchers):
                w.queue.put_nowait(None)

    def _emit(self, key: BucketKey, b: Bucket, event: Event) -> None:
        b.history.append(event)
        while len(b.history) > self.history_limit:
            b.horizon = b.history.popleft().rv
        for w in list(b.watchers):
            w.queue.put_nowait(event)
        for listener in self.listeners:
            listener(key, event)

    # ------------------------------------------------------------ watches

    def subscribe(self, key: BucketKey, since: int | None) -> tuple[Watcher, list[Event]]:
        """Open a watch; return it and the kept events after `since` (None: no replay)."""
        b = self.bucket(key)
        replay: list[Event] = []
        if since is not None:
            if since < b.horizon:
                raise Expired(since, b.horizon)
            replay = [e for e in b.history if e.rv > since]
        w = Watcher(key)
        b.watchers.add(w)
        return w, replay

    def unsubscribe(self, w: Watcher) -> None:
        b = self.buckets.get(w.bucket)
        if b:
            b.watchers.discard(w)

    def close_all_watches(self) -> None:
        for b in self.buckets.values():
            for w in list(b.watchers):
                w.queue.put_nowait(None)

    def compact(self) -> None:
        """Forget all history (as etcd compaction): watches from older resourceVersions get 410."""
        for b in self.buckets.values():
            b.history.clear()
            b.horizon = self.rv
