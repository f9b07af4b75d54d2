"""The one wrapper around aetcd: with channel.py (TLS and etcd authentication) the only module of
Brook that imports it.

Everything that leaves this module is Brook's own type (KeyValue, TxnResult, WatchEvent, the errors
of `brook.metadata.errors`). Ranges, puts, deletes and transactions go straight to etcd's KV service
(so every answer keeps its header revision); leases and watch streams use aetcd's machinery.

Retries: reads and lease refreshes/revocations are retried while etcd is unreachable, for up to
`retry_for` seconds; writes and transactions are not (after a broken connection a write may or may
not have been applied: the caller re-reads, and its compare-and-swap makes the retry safe).
With several endpoints, a connection failure moves to the next one.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import aetcd  # type: ignore[import-untyped,unused-ignore]
from aetcd import rpc  # type: ignore[import-untyped,unused-ignore]

from brook.tasks import raise_if_cancelling

from .channel import EtcdAuth, SecureAetcdClient
from .errors import CompactedError, EtcdAuthError, EtcdUnavailableError, LeaseNotFoundError, MetadataError
from .kv import (
    Compare,
    Delete,
    EventType,
    Get,
    KeyValue,
    Lease,
    Op,
    Put,
    RangeResult,
    Target,
    TxnResult,
    WatchEvent,
    prefix_end,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

_CHANNEL_OPTIONS: dict[str, Any] = {
    # Reconnect quickly after an etcd restart (gRPC's default backoff grows to two minutes).
    "grpc.initial_reconnect_backoff_ms": 100,
    "grpc.min_reconnect_backoff_ms": 100,
    "grpc.max_reconnect_backoff_ms": 1000,
    # Notice a silently dead connection under an open watch. etcd refuses pings more often than every
    # 5 s (--grpc-keepalive-min-time) and pings without an open stream, so neither is done.
    "grpc.keepalive_time_ms": 10_000,
    "grpc.keepalive_timeout_ms": 5_000,
    "grpc.max_receive_message_length": 64 * 1024 * 1024,
}


def parse_endpoint(endpoint: str) -> tuple[str, int]:
    """'host:port', 'http(s)://host:port' or '[::1]:port' -> (host, port); the port defaults to 2379.
    (An https:// endpoint makes the client use TLS: see EtcdClient.)"""
    s = endpoint.strip()
    s = s.removeprefix("https://").removeprefix("http://").rstrip("/")
    if s.startswith("["):  # [IPv6]:port
        host, _, rest = s[1:].partition("]")
        port = rest.removeprefix(":")
        return f"[{host}]", int(port) if port else 2379
    host, sep, port = s.rpartition(":")
    if not sep:
        return s, 2379
    return host, int(port)


def _kv(pb: Any) -> KeyValue:
    return KeyValue(bytes(pb.key), bytes(pb.value), pb.create_revision, pb.mod_revision, pb.version, pb.lease)


_TARGETS = {Target.VERSION: 0, Target.CREATE: 1, Target.MOD: 2, Target.VALUE: 3}
_RESULTS = {"==": 0, ">": 1, "<": 2, "!=": 3}
_INT_FIELDS = {Target.VERSION: "version", Target.CREATE: "create_revision", Target.MOD: "mod_revision"}


def _compare_message(c: Compare) -> Any:
    m = rpc.Compare(key=c.key, result=_RESULTS[c.op], target=_TARGETS[c.target])
    if c.target is Target.VALUE:
        assert isinstance(c.operand, bytes)
        m.value = c.operand
    else:
        assert isinstance(c.operand, int)
        setattr(m, _INT_FIELDS[c.target], c.operand)
    return m


def _op_message(op: Op) -> Any:
    if isinstance(op, Put):
        return rpc.RequestOp(request_put=rpc.PutRequest(key=op.key, value=op.value, lease=op.lease))
    if isinstance(op, Delete):
        req = rpc.DeleteRangeRequest(key=op.key)
        if op.prefix:
            req.range_end = prefix_end(op.key)
        return rpc.RequestOp(request_delete_range=req)
    req = rpc.RangeRequest(key=op.key)
    if op.prefix:
        req.range_end = prefix_end(op.key)
    return rpc.RequestOp(request_range=req)


class _ChannelClosed(Exception):
    """A call cancelled by gRPC because another task closed its channel."""


class _Unanswered(Exception):
    """An attempt that got no answer in the time it was given."""


def _task_cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _unavailable(e: BaseException) -> bool:
    # WatchTimeoutError: etcd took no watch in the client's timeout (paused, or cut off mid-stream).
    return isinstance(
        e,
        aetcd.ConnectionFailedError
        | aetcd.ConnectionTimeoutError
        | aetcd.exceptions.WatchTimeoutError
        | TimeoutError,
    )


# What gRPC says when the TLS handshake fails (an untrusted server certificate, a client certificate
# etcd does not accept): no retry mends that, so a start-up fails at once with the reason.
_TLS_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "Ssl handshake failed", "handshake failed", "SSL_ERROR")


def _rejected(e: BaseException) -> str | None:
    """Why etcd refuses us for good (bad credentials, TLS trust), else None."""
    if isinstance(e, aetcd.InvalidArgumentError) and "authentication failed" in str(e):
        return "etcd refused the user or password (etcdserver: authentication failed)"
    if isinstance(e, aetcd.ClientError) and "user name is empty" in str(e):
        return "etcd has authentication enabled: give --etcd-user and its password"
    if isinstance(e, aetcd.ClientError) and "permission denied" in str(e):
        return (
            "etcd denied access (etcdserver: permission denied): the user, or the client "
            "certificate's common name when no user is given, needs read-write on the cluster's keys"
        )
    if isinstance(e, aetcd.ConnectionFailedError) and any(m in str(e) for m in _TLS_FAILURES):
        # gRPC's text ends with OpenSSL's reason, e.g. "...:CERTIFICATE_VERIFY_FAILED: unable to get
        # local issuer certificate: OK"
        reason = str(e).strip().removesuffix(": OK").rpartition("OPENSSL_internal:")[2]
        return f"the TLS handshake with etcd failed: {reason}"
    return None


def _reraise_rpc(e: Exception) -> None:
    """Map a raw gRPC error (from a direct stub call) to aetcd's exceptions, as aetcd does."""
    if isinstance(e, rpc.AioRpcError):
        code = e.code()
        if code == rpc.StatusCode.UNAVAILABLE:
            raise aetcd.ConnectionFailedError(e.details()) from e
        if code == rpc.StatusCode.DEADLINE_EXCEEDED:
            raise aetcd.ConnectionTimeoutError(e.details()) from e
        if code == rpc.StatusCode.UNAUTHENTICATED:  # e.g. a token etcd forgot when it restarted
            raise aetcd.exceptions.UnauthenticatedError(e.details()) from e
        raise aetcd.ClientError(f"{code.name}: {e.details()}") from e
    raise e


class EtcdClient:
    """An asyncio etcd v3 client for Brook's metadata (endpoints: 'host:port' strings)."""

    def __init__(
        self,
        endpoints: str | Sequence[str],
        *,
        timeout: float = 5.0,
        retry_for: float = 10.0,
        auth: EtcdAuth | None = None,
    ) -> None:
        items = [endpoints] if isinstance(endpoints, str) else list(endpoints)
        eps = [e for item in items for e in item.split(",") if e.strip()]
        if not eps:
            raise ValueError("no etcd endpoint given")
        self._endpoints = [parse_endpoint(e) for e in eps]
        auth = auth or EtcdAuth()
        if not auth.uses_tls and any(e.strip().startswith("https://") for e in eps):
            auth = EtcdAuth(auth.cacert, auth.cert, auth.key, auth.user, auth.password, tls=True)
        self.auth = auth
        self._clients: list[Any] = [None] * len(self._endpoints)
        # Lease refreshes go over a channel of their own, which reset_keepalive() replaces when a
        # refresh gets no answer: that cannot break the watches of the main one.
        self._keepalive_clients: list[Any] = [None] * len(self._endpoints)
        self._current = 0
        self._timeout = timeout
        self.retry_for = retry_for
        self._closed = False

    @property
    def endpoint(self) -> str:
        host, port = self._endpoints[self._current]
        return f"{host}:{port}"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def timeout(self) -> float:
        return self._timeout

    def _aetcd(self) -> Any:
        return self._made(self._clients)

    def _keepalive_aetcd(self) -> Any:
        return self._made(self._keepalive_clients)

    def _made(self, clients: list[Any]) -> Any:
        if self._closed:
            raise MetadataError("the etcd client is closed")
        i = self._current
        if clients[i] is None:
            host, port = self._endpoints[i]
            clients[i] = SecureAetcdClient(
                auth=self.auth, host=host, port=port, timeout=self._timeout, options=_CHANNEL_OPTIONS
            )
        return clients[i]

    async def _drop(self, client: Any, why: str = "auth token no longer valid, authenticating again") -> None:
        """Forget a client (its auth token etcd no longer knows, after a restart; or its channel
        stopped answering): the next call connects and authenticates again."""
        for clients in (self._clients, self._keepalive_clients):
            for i, c in enumerate(clients):
                if c is client:
                    clients[i] = None
                    log.info("etcd: %s", why)
                    await _close_quietly(c)

    @property
    def keepalive_channel(self) -> object:
        """Which keep-alive channel a refresh starting now goes over (for reset_keepalive)."""
        return self._keepalive_clients[self._current]

    async def reset_keepalive(self, used: object = None) -> None:
        """A lease refresh got no answer: the next one goes over a new channel. (A soak once saw one
        broker's refreshes fail for 40 minutes after an etcd restart while its other calls worked.)
        `used`: the keepalive_channel the refresh went over; another lease's reset since then already
        replaced it, and the channel now in use is left alone."""
        client = self._keepalive_clients[self._current]
        if client is not None and (used is None or used is client):
            await self._drop(client, "a lease refresh got no answer: refreshing over a new channel")

    def _failover(self, failed: Any) -> None:
        current = (self._clients[self._current], self._keepalive_clients[self._current])
        if len(self._endpoints) > 1 and any(c is failed for c in current):
            self._current = (self._current + 1) % len(self._endpoints)
            log.warning("etcd: connection failed, trying %s", self.endpoint)

    async def connect(self, probe: bytes = b"\0") -> None:
        """Check that etcd answers by reading `probe` (with etcd's authentication on, a key the user
        may read). Raises EtcdUnavailableError after `retry_for`, EtcdAuthError at once when etcd
        refuses the credentials or the TLS handshake fails."""
        await self.revision(probe)

    async def close(self) -> None:
        self._closed = True
        for clients in (self._clients, self._keepalive_clients):
            for i, c in enumerate(clients):
                if c is not None:
                    clients[i] = None
                    await _close_quietly(c)

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _run(
        self,
        call: Callable[[Any], Awaitable[T]],
        *,
        retry: bool,
        keepalive: bool = False,
        attempt_s: float | None = None,
    ) -> T:
        """Run `call` on a client, retried while etcd is unavailable for up to retry_for (`retry`);
        `attempt_s` bounds each attempt, one that takes longer counting as etcd unavailable."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.retry_for
        delay = 0.05
        while True:
            client = self._keepalive_aetcd() if keepalive else self._aetcd()
            e: Exception
            try:
                async with asyncio.timeout(attempt_s):
                    return await call(client)
            except TimeoutError as timed_out:  # only asyncio.timeout's: gRPC's own are AioRpcErrors
                e = _Unanswered(f"no answer in {attempt_s:g} s")
                e.__cause__ = timed_out
                self._failover(client)
            except asyncio.CancelledError as cancelled:
                if _task_cancelling():
                    raise
                # gRPC cancels the calls of a channel that another task closed (reset_keepalive after
                # a refresh got no answer, _drop): this call failed, its task was not cancelled. As a
                # CancelledError it ended another lease's keep-alive task without a word, and a broker
                # whose registration lease that was stayed out of the cluster (a soak, 2 of 3 brokers).
                e = _ChannelClosed("its etcd channel was closed during the call")
                e.__cause__ = cancelled
            except Exception as exc:
                e = exc
                if (reason := _rejected(e)) is not None:
                    raise EtcdAuthError(f"{reason} (etcd at {self.endpoint})") from e
                if isinstance(e, aetcd.exceptions.UnauthenticatedError) and loop.time() < deadline:
                    await self._drop(client)
                    continue
                if not _unavailable(e):
                    if isinstance(e, aetcd.ClientError):
                        if "requested lease not found" in str(e):
                            raise LeaseNotFoundError(f"etcd: {e}") from e
                        raise MetadataError(f"etcd: {e}") from e
                    raise
                self._failover(client)
            now = loop.time()  # etcd is unavailable to this call: retried while allowed
            if not retry or now >= deadline:
                raise EtcdUnavailableError(f"etcd at {self.endpoint} is unavailable: {e}") from e
            await asyncio.sleep(min(delay, deadline - now))
            delay = min(delay * 2, 0.5)

    async def _kv_call(self, client: Any, method: str, request: Any) -> Any:
        await client.connect()
        try:
            return await getattr(client.kvstub, method)(
                request, timeout=self._timeout, metadata=client.metadata
            )
        except rpc.AioRpcError as e:
            _reraise_rpc(e)

    # ---- key-value ----

    async def get(self, key: bytes) -> KeyValue | None:
        r = await self._range(key, None)
        return r.kvs[0] if r.kvs else None

    async def get_prefix(self, prefix: bytes) -> RangeResult:
        return await self._range(prefix, prefix_end(prefix))

    async def get_range(self, key: bytes, range_end: bytes | None) -> RangeResult:
        """The keys in [key, range_end) (just `key` when range_end is None)."""
        return await self._range(key, range_end)

    async def revision(self, key: bytes = b"\0") -> int:
        """The store's current revision (read through a count of `key`, which the user must be
        allowed to read when etcd's authentication is on)."""
        return (await self._range(key, None, count_only=True)).revision

    async def _range(self, key: bytes, range_end: bytes | None, count_only: bool = False) -> RangeResult:
        req = rpc.RangeRequest(key=key, count_only=count_only)
        if range_end is not None:
            req.range_end = range_end

        async def call(c: Any) -> RangeResult:
            resp = await self._kv_call(c, "Range", req)
            return RangeResult([_kv(kv) for kv in resp.kvs], resp.header.revision)

        return await self._run(call, retry=True)

    async def put(self, key: bytes, value: bytes, *, lease: int = 0) -> int:
        """Write unconditionally; returns the revision of the write."""

        async def call(c: Any) -> int:
            resp = await self._kv_call(c, "Put", rpc.PutRequest(key=key, value=value, lease=lease))
            return int(resp.header.revision)

        return await self._run(call, retry=False)

    async def delete(self, key: bytes, *, prefix: bool = False) -> int:
        """Delete a key (or every key under a prefix); returns how many were deleted."""
        req = rpc.DeleteRangeRequest(key=key)
        if prefix:
            req.range_end = prefix_end(key)

        async def call(c: Any) -> int:
            return int((await self._kv_call(c, "DeleteRange", req)).deleted)

        return await self._run(call, retry=False)

    async def txn(
        self, compares: Sequence[Compare], success: Sequence[Op], failure: Sequence[Op] = ()
    ) -> TxnResult:
        """If every compare holds run `success`, else `failure`, atomically. etcd allows at most
        128 operations per transaction by default (--max-txn-ops) and no two writes of one key."""
        req = rpc.TxnRequest(
            compare=[_compare_message(c) for c in compares],
            success=[_op_message(o) for o in success],
            failure=[_op_message(o) for o in failure],
        )

        async def call(c: Any) -> TxnResult:
            resp = await self._kv_call(c, "Txn", req)
            gets = [
                [_kv(kv) for kv in r.response_range.kvs]
                for r in resp.responses
                if r.WhichOneof("response") == "response_range"
            ]
            return TxnResult(bool(resp.succeeded), int(resp.header.revision), gets)

        return await self._run(call, retry=False)

    async def create_if_absent(
        self, key: bytes, value: bytes, *, lease: int = 0
    ) -> tuple[bool, KeyValue | None]:
        """(True, None) when the key was created; (False, the existing key) when it already existed
        (the existing one can be None if it vanished in between)."""
        r = await self.txn([Compare.absent(key)], [Put(key, value, lease)], [Get(key)])
        if r.succeeded:
            return True, None
        return False, (r.gets[0][0] if r.gets and r.gets[0] else None)

    async def compare_and_put(
        self,
        key: bytes,
        value: bytes,
        *,
        expected_mod_revision: int,
        lease: int = 0,
        also: Sequence[Compare] = (),
    ) -> TxnResult:
        """Write only if the key is still at `expected_mod_revision` (0: it must not exist) and every
        extra compare holds. On failure the result's first get is the key as it is now."""
        return await self.txn(
            [Compare.mod_revision(key, expected_mod_revision), *also],
            [Put(key, value, lease)],
            [Get(key)],
        )

    async def compact(self, revision: int) -> None:
        """Drop the history before `revision` (tests and operations)."""

        async def call(c: Any) -> None:
            await c.compact(revision, physical=True)

        await self._run(call, retry=False)

    # ---- leases ----

    async def grant_lease(self, ttl: int, *, retry: bool = True) -> Lease:
        """A new lease. Each attempt waits half the TTL at most: one sent into a cut network and
        answered when it heals would count its TTL from long before etcd granted it (the lease it
        may have granted expires unused)."""
        loop = asyncio.get_running_loop()

        async def call(c: Any) -> Lease:
            asked = loop.time()
            lease = await c.lease(int(ttl))
            return Lease(int(lease.id), int(lease.ttl), asked)

        return await self._run(call, retry=retry, attempt_s=ttl / 2)

    async def refresh_lease(self, lease_id: int, *, retry: bool = False) -> int:
        """Keep a lease alive; returns its TTL again, 0 when etcd no longer has it (expired)."""

        async def call(c: Any) -> int:
            reply = await c.refresh_lease(lease_id)
            if reply is None:
                raise aetcd.ConnectionFailedError("lease keep-alive stream ended without an answer")
            return int(reply.TTL)

        return await self._run(call, retry=retry, keepalive=True)

    async def revoke_lease(self, lease_id: int) -> bool:
        """Revoke now: its keys are deleted at once. False when etcd did not have it anymore."""

        async def call(c: Any) -> bool:
            try:
                await c.revoke_lease(lease_id)
            except aetcd.ClientError as e:
                if "not found" in str(e):
                    return False
                raise
            return True

        return await self._run(call, retry=True)

    async def lease_ttl(self, lease_id: int) -> int:
        """Seconds left on a lease; -1 when etcd does not have it."""

        async def call(c: Any) -> int:
            return int((await c.get_lease_info(lease_id, keys=False)).TTL)

        return await self._run(call, retry=True)

    # ---- watches ----

    async def open_watch(self, key: bytes, range_end: bytes | None, start_revision: int) -> RawWatch:
        """One etcd watch stream (no resumption: see PrefixWatch). Raises EtcdUnavailableError or
        CompactedError."""
        client = self._aetcd()
        _stream_dead(client)
        try:
            w = await client.watch(key, range_end=range_end, start_revision=start_revision, prev_kv=True)
        except aetcd.RevisionCompactedError as e:
            raise CompactedError(int(e.compacted_revision)) from e
        except Exception as e:
            why = f"etcd watch: {str(e) or type(e).__name__}"  # aetcd's WatchTimeoutError has no text
            if isinstance(e, aetcd.exceptions.UnauthenticatedError):
                await self._drop(client)
                raise EtcdUnavailableError(why) from e
            if _unavailable(e):
                self._failover(client)
                raise EtcdUnavailableError(why) from e
            if isinstance(e, aetcd.ClientError):
                raise MetadataError(why) from e
            raise
        return RawWatch(client, w)


async def _close_quietly(client: Any) -> None:
    """Close an aetcd client; its channel may be broken already, and closing must not fail."""
    try:
        await client.close()
    except Exception as e:
        log.debug("etcd: close: %r", e)


def _stream_dead(client: Any) -> bool:
    """Whether aetcd's shared watch stream has ended without telling its watches (a stream that
    closes cleanly, e.g. on a GOAWAY, ends aetcd's reader task without an error). If so, forget the
    finished reader so the next watch opens a new stream."""
    watcher = getattr(client, "_watcher", None)
    handler = getattr(watcher, "_request_handler", None)
    if watcher is None or handler is None or not handler.done():
        return False
    watcher._request_handler = None
    return True


class RawWatch:
    """One aetcd watch stream, translated. `next()` raises EtcdUnavailableError when the stream
    breaks (e.g. etcd restarted), CompactedError, or StopAsyncIteration once cancelled."""

    HEALTH_CHECK_S = 1.0

    def __init__(self, client: Any, watch: Any) -> None:
        self._client = client
        self._watch = watch
        self._it = watch.__aiter__()
        self._next: asyncio.Future[Any] | None = None

    async def next(self) -> WatchEvent:
        try:
            while True:
                if self._next is None:
                    self._next = asyncio.ensure_future(self._it.__anext__())
                done, _ = await asyncio.wait([self._next], timeout=self.HEALTH_CHECK_S)
                if done:
                    fut, self._next = self._next, None
                    if fut.cancelled():  # by gRPC, not by us (cancel() clears _next): channel closed
                        raise _ChannelClosed("its etcd channel was closed")
                    ev = fut.result()
                    break
                if _stream_dead(self._client):
                    raise aetcd.ConnectionFailedError("the watch stream ended silently")
                raise_if_cancelling()
        except StopAsyncIteration:
            raise
        except aetcd.RevisionCompactedError as e:
            raise CompactedError(int(e.compacted_revision)) from e
        except Exception as e:
            if _unavailable(e) or isinstance(e, aetcd.ClientError | _ChannelClosed):
                raise EtcdUnavailableError(f"etcd watch stream ended: {e}") from e
            raise
        kv = ev.kv
        if ev.kind == "DELETE":
            prev = ev.prev_kv
            return WatchEvent(
                EventType.DELETE, bytes(kv.key), bytes(prev.value) if prev else b"", kv.mod_revision
            )
        return WatchEvent(
            EventType.PUT, bytes(kv.key), bytes(kv.value), kv.mod_revision, kv.create_revision, kv.version
        )

    async def cancel(self) -> None:
        try:
            await self._watch.cancel()
        except Exception as e:  # the stream may already be gone
            log.debug("etcd: watch cancel: %r", e)
        pending, self._next = self._next, None
        if pending is not None:
            pending.cancel()
            await asyncio.wait([pending])
        else:
            try:
                await self._it.aclose()
            except Exception as e:
                log.debug("etcd: watch close: %r", e)
