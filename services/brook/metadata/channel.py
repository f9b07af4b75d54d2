"""How Brook reaches etcd: plain gRPC, or TLS (a CA to trust, optionally a client certificate) and
etcd's user/password authentication. With client.py the only module that imports aetcd.

aetcd opens only insecure channels; `SecureAetcdClient` is aetcd's client with its `connect` doing
the same work over a TLS channel. The PEM files are read at every (re)connect, so a renewed
certificate is picked up by the next connection without a restart. etcd's default ("simple") auth
tokens live in the etcd process's memory only: after an etcd restart every token is invalid, so a
client answered UNAUTHENTICATED is dropped and the next call authenticates again (client.py).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# gRPC's C core logs every failed TLS handshake at INFO on stderr (several lines per retry); Brook
# reports the failure itself, in one line. Read when gRPC initialises, i.e. at the first channel.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import aetcd  # type: ignore[import-untyped,unused-ignore]
import grpc  # type: ignore[import-untyped,unused-ignore]
from aetcd import rpc, watcher  # type: ignore[import-untyped,unused-ignore]


@dataclass(frozen=True, slots=True)
class EtcdAuth:
    """etcdctl's --cacert/--cert/--key/--user/--password, for Brook's etcd connections."""

    cacert: Path | None = None  # PEM CA bundle that signed etcd's server certificate
    cert: Path | None = None  # PEM client certificate (etcd's --client-cert-auth)
    key: Path | None = None  # its PEM private key
    user: str | None = None
    password: str | None = None
    tls: bool = False  # TLS with the system's CAs when no --cacert is given (an https:// endpoint)

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("a client certificate needs both its certificate and its key")
        if (self.user is None) != (self.password is None):
            raise ValueError("etcd authentication needs both a user and a password")

    @property
    def uses_tls(self) -> bool:
        return self.tls or self.cacert is not None or self.cert is not None

    def credentials(self) -> Any:
        """gRPC channel credentials from the PEM files as they are now."""

        def read(p: Path | None) -> bytes | None:
            return p.read_bytes() if p is not None else None

        return grpc.ssl_channel_credentials(
            root_certificates=read(self.cacert), private_key=read(self.key), certificate_chain=read(self.cert)
        )

    def describe(self) -> str:
        """For logs: what is used, never the password."""
        parts = ["TLS" if self.uses_tls else "plaintext"]
        if self.cert is not None:
            parts.append("client certificate")
        if self.user is not None:
            parts.append(f"user {self.user}")
        return ", ".join(parts)


class SecureAetcdClient(aetcd.Client):  # type: ignore[misc,unused-ignore]
    """aetcd.Client over a TLS channel when `auth` asks for TLS (aetcd itself only has insecure ones)."""

    _is_connecting: bool

    def __init__(self, *, auth: EtcdAuth, **kwargs: Any) -> None:
        super().__init__(username=auth.user, password=auth.password, **kwargs)
        self._auth = auth

    async def connect(self) -> None:
        if not self._auth.uses_tls:
            await super().connect()
            return
        try:
            await self._connect_tls()
        except rpc.AioRpcError as e:
            aetcd.exceptions._handle_exception(e)

    async def _connect_tls(self) -> None:
        # aetcd.Client.connect with a secure channel (same attributes, same order).
        if self._connected.is_set():
            return
        if self._is_connecting:
            await asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
            return
        try:
            self._is_connecting = True
            target = f"{self._host}:{self._port}"
            self.channel = rpc.secure_channel(target, self._auth.credentials(), options=self._options.items())
            if self._username is not None and self._password is not None:
                self.auth_stub = rpc.AuthStub(self.channel)
                req = rpc.AuthenticateRequest(name=self._username, password=self._password)
                resp = await self.auth_stub.Authenticate(req, timeout=self._timeout)
                self.metadata = (("token", resp.token),)
            self.kvstub = rpc.KVStub(self.channel)
            self.clusterstub = rpc.ClusterStub(self.channel)
            self.leasestub = rpc.LeaseStub(self.channel)
            self.maintenancestub = rpc.MaintenanceStub(self.channel)
            self._watcher = watcher.Watcher(
                rpc.WatchStub(self.channel), timeout=self._timeout, metadata=self.metadata
            )
            self._connected.set()
        finally:
            self._is_connecting = False
