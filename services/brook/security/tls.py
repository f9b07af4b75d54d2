"""TLS for SSL and SASL_SSL listeners: the server's context from PEM files, Kafka's principal of a client
certificate, and reloading the files when they change (a renewed certificate needs no restart)."""

from __future__ import annotations

import dataclasses
import logging
import os
import ssl
import time
from dataclasses import dataclass

from cryptography import x509

log = logging.getLogger(__name__)

CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
# ssl.enabled.protocols' names. Kafka also takes TLSv1 and TLSv1.1, which Java 17's security policy
# (jdk.tls.disabledAlgorithms) turns off: a list naming them is served with the versions left.
PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_RETIRED_PROTOCOLS = ("TLSv1", "TLSv1.1")


def bound_versions(ctx: ssl.SSLContext, protocols: tuple[str, ...]) -> None:
    """Serve (or, to another broker, speak) only the enabled versions: both ends of the range."""
    ctx.minimum_version = PROTOCOLS[protocols[0]]
    ctx.maximum_version = PROTOCOLS[protocols[-1]]


class TlsProtocolsError(ValueError):
    pass


def enabled_protocols(value: str) -> tuple[str, ...]:
    """ssl.enabled.protocols ("TLSv1.2,TLSv1.3") -> the versions served, in order; TLSv1 and TLSv1.1
    dropped. Raises TlsProtocolsError for another name or when no version is left."""
    names = [n.strip() for n in value.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROTOCOLS and n not in _RETIRED_PROTOCOLS]
    if unknown:
        raise TlsProtocolsError(f"{', '.join(unknown)}: the protocols are TLSv1.2 and TLSv1.3")
    kept = tuple(sorted({n for n in names if n in PROTOCOLS}, key=lambda n: PROTOCOLS[n]))
    if not kept:
        raise TlsProtocolsError(f"{value!r} leaves no protocol to serve: name TLSv1.2 or TLSv1.3")
    return kept


@dataclass(slots=True)
class TlsSettings:
    # ssl.keystore.location (ssl.keystore.type=PEM): the certificate chain and its private key in one
    # file; a separate key file may be given with key_location.
    keystore_location: str | None = None
    key_location: str | None = None
    key_password: str | None = None  # ssl.key.password
    truststore_location: str | None = None  # ssl.truststore.location: PEM CA certificates
    client_auth: str = "none"  # ssl.client.auth: none, requested, required
    # Listeners whose clients must present a certificate whatever client_auth says (Kafka's
    # listener.name.<name>.ssl.client.auth=required), e.g. a mutual-TLS replication listener.
    client_auth_required_listeners: tuple[str, ...] = ()
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")  # ssl.enabled.protocols (enabled_protocols())
    ktls: bool = True  # kernel TLS where Python and OpenSSL offer it (ssl.OP_ENABLE_KTLS)


def for_listener(s: TlsSettings, listener_name: str) -> TlsSettings:
    if listener_name in s.client_auth_required_listeners:
        return dataclasses.replace(s, client_auth="required")
    return s


def ktls_available() -> bool:
    return hasattr(ssl, "OP_ENABLE_KTLS")


# Handshake failures that end a TLS client's handshake on the server's verdict about its certificate:
# the client reads the alert and closes. Other failures (a plaintext client, garbage) close at once.
_CERTIFICATE_REFUSALS = frozenset({"CERTIFICATE_VERIFY_FAILED", "PEER_DID_NOT_RETURN_A_CERTIFICATE"})


class AlertingSSLObject(ssl.SSLObject):
    """An SSLObject that, when it refuses a client's certificate, first reports "want read", then fails.

    asyncio (and uvloop) close the transport on a handshake error without sending what OpenSSL wrote
    for the peer: the TLS alert saying why (unknown_ca, certificate_required). A client then sees a bare
    disconnect and retries until its own timeout (Kafka's Java client: "Timed out waiting for a node
    assignment"), where Kafka's refusal reaches it as SslAuthenticationException at once. Reporting the
    failure as SSLWantReadError makes asyncio flush the alert; the error is raised on the next step,
    which the client's close brings (or the handshake timeout, for a client that never closes)."""

    _failed: ssl.SSLError | None = None

    def do_handshake(self) -> None:
        if self._failed is not None:
            raise self._failed
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except ssl.SSLError as e:
            if e.reason not in _CERTIFICATE_REFUSALS:
                raise
            self._failed = e
            raise ssl.SSLWantReadError(e.args[0] if e.args else 2, "certificate refused; alert sent") from e


def server_context(s: TlsSettings) -> ssl.SSLContext:
    if not s.keystore_location:
        raise ValueError("an SSL or SASL_SSL listener needs --ssl-keystore-location")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    bound_versions(ctx, s.protocols)
    ctx.load_cert_chain(s.keystore_location, s.key_location, s.key_password)
    if s.truststore_location:
        ctx.load_verify_locations(s.truststore_location)
    elif s.client_auth != "none":
        ctx.load_default_certs(ssl.Purpose.CLIENT_AUTH)
    ctx.verify_mode = CLIENT_AUTH[s.client_auth]
    if s.ktls and ktls_available():
        ctx.options |= ssl.OP_ENABLE_KTLS  # type: ignore[attr-defined,unused-ignore]
    ctx.sslobject_class = AlertingSSLObject  # documented as settable per context (ssl docs)
    return ctx


def principal_of(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """Kafka's default principal of a verified client certificate: "User:" + its subject as an RFC 2253
    distinguished name (most specific first, e.g. "User:CN=alice,O=Example"); None without one."""
    if ssl_object is None:
        return None
    der = ssl_object.getpeercert(binary_form=True)
    if not der:
        return None
    return "User:" + x509.load_der_x509_certificate(der).subject.rfc4514_string()


class ReloadingContext:
    """The listener's context, rebuilt when a certificate, key or CA file changes: checked at most once a
    second, in each handshake's ClientHello callback, which hands the handshake the current context. A
    broken new file keeps the old context serving and is logged."""

    def __init__(self, settings: TlsSettings) -> None:
        self.settings = settings
        self._stamp = self._stamps()
        self._checked = time.monotonic()
        self._current = server_context(settings)
        self.context = server_context(settings)  # the one the listener is created with
        self.context.sni_callback = self._on_hello

    def _on_hello(self, obj: ssl.SSLObject, server_name: str | None, ctx: ssl.SSLContext) -> None:
        obj.context = self.current()

    def _stamps(self) -> tuple[float, ...]:
        s = self.settings
        stamps = []
        for path in (s.keystore_location, s.key_location, s.truststore_location):
            try:
                stamps.append(os.stat(path).st_mtime_ns if path else 0)
            except OSError:
                stamps.append(-1)
        return tuple(stamps)

    def current(self) -> ssl.SSLContext:
        now = time.monotonic()
        if now - self._checked < 1.0:
            return self._current
        self._checked = now
        stamp = self._stamps()
        if stamp != self._stamp:
            self._stamp = stamp
            try:
                self._current = server_context(self.settings)
                log.info("TLS certificate files changed: reloaded")
            except (OSError, ssl.SSLError, ValueError) as e:
                log.error("TLS certificate files changed but cannot be loaded (%s); keeping the old ones", e)
        return self._current
