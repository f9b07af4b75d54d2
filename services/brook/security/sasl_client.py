"""The client side of SASL for this broker's own connections to other brokers (inter-broker listener):
PLAIN and SCRAM-SHA-256/512 (scramp), sans-I/O: the caller carries the tokens in SaslAuthenticate."""

from __future__ import annotations

import ssl
from dataclasses import dataclass

import scramp  # type: ignore[import-untyped]

from .tls import TlsSettings, bound_versions


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    mechanism: str  # sasl.mechanism.inter.broker.protocol
    username: str
    password: str  # kept in memory only; never logged

    def __repr__(self) -> str:  # dataclass' repr would show the password
        return f"ClientCredentials({self.mechanism}, {self.username!r})"


class ClientExchange:
    """first() is the first token; respond(server token) the next one, None once the exchange is over.
    ValueError when the server's answer is wrong (a SCRAM server that does not know the password)."""

    def __init__(self, creds: ClientCredentials) -> None:
        self._creds = creds
        self._scram = (
            None
            if creds.mechanism == "PLAIN"
            else scramp.ScramClient([creds.mechanism], creds.username, creds.password)
        )
        self._step = 0

    def first(self) -> bytes:
        if self._scram is None:
            return f"\0{self._creds.username}\0{self._creds.password}".encode()
        return str(self._scram.get_client_first()).encode()

    def respond(self, token: bytes) -> bytes | None:
        if self._scram is None:
            return None
        self._step += 1
        try:
            if self._step == 1:
                self._scram.set_server_first(token.decode())
                return str(self._scram.get_client_final()).encode()
            self._scram.set_server_final(token.decode())
        except (scramp.ScramException, UnicodeDecodeError) as e:
            raise ValueError(f"the broker's SCRAM answer is not valid: {e}") from None
        return None


def client_context(s: TlsSettings) -> ssl.SSLContext:
    """TLS to another broker: its certificate verified against the truststore (and its address), this
    broker's own certificate presented (for listeners with ssl.client.auth=required)."""
    ctx = ssl.create_default_context(cafile=s.truststore_location)
    bound_versions(ctx, s.protocols)
    if s.keystore_location:
        ctx.load_cert_chain(s.keystore_location, s.key_location, s.key_password)
    return ctx
