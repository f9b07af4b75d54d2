"""From a parsed request header to response bytes: pick the handler, check the version, frame it."""

from __future__ import annotations

import logging
import time

from brook.broker.broker import Broker
from brook.handlers import ADVERTISED, HANDLERS, Body
from brook.handlers.sasl import SASL_SESSION
from brook.handlers.throttle import REQUEST_QUOTA, charge
from brook.observability import REQUEST_ROLE
from brook.protocol import messages
from brook.protocol.errors import ErrorCode
from brook.protocol.fetch import RecordsRef, chunks_size
from brook.protocol.frames import RequestHeader, response_prefix
from brook.protocol.versions import ApiKey, response_is_flexible
from brook.security.sasl import SaslSession

from .busy_time import BusyTime

log = logging.getLogger(__name__)


class CloseConnection(Exception):
    """The request cannot be answered on this connection (Kafka closes it too)."""


_BEFORE_SASL = (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)


def check_authenticated(api_key: int) -> None:
    """On a SASL listener only ApiVersions and the SASL exchange come before authentication, and an
    expired session (connections.max.reauth.ms) only re-authenticates: else Kafka closes the connection.
    Before the first handshake that includes SaslAuthenticate (Kafka's "during SASL handshake")."""
    session = SASL_SESSION.get()
    if session is None or (api_key in _BEFORE_SASL and not _before_handshake(session, api_key)):
        return
    if not session.authenticated:
        raise CloseConnection(f"{ApiKey(api_key).name} request before SASL authentication")
    if session.expired():
        raise CloseConnection("SASL session expired (connections.max.reauth.ms) without re-authentication")


def _before_handshake(session: SaslSession, api_key: int) -> bool:
    return api_key == ApiKey.SASL_AUTHENTICATE and not session.authenticated and session.exchange is None


def out_of_exchange(hdr: RequestHeader) -> bytes | None:
    """Kafka's answer to any request but SaslAuthenticate once a SaslHandshake v1 has begun the first
    exchange: an error answer of the request's own type (ILLEGAL_SASL_STATE), then the connection closes."""
    session = SASL_SESSION.get()
    if (
        session is None
        or session.authenticated
        or session.exchange is None
        or session.raw_tokens
        or hdr.api_key == ApiKey.SASL_AUTHENTICATE
    ):
        return None
    session.failed = True
    return messages.error_response(hdr.api_key, hdr.api_version, ErrorCode.ILLEGAL_SASL_STATE)


async def dispatch(broker: Broker, hdr: RequestHeader) -> list[bytes | RecordsRef] | None:
    """Framed response pieces for one request, or None when no response is due."""
    handler = HANDLERS.get(hdr.api_key)
    if handler is None:
        raise CloseConnection(f"unknown API key {hdr.api_key}")
    lo, hi = ADVERTISED[hdr.api_key]
    if not lo <= hdr.api_version <= hi and hdr.api_key != ApiKey.API_VERSIONS:
        # Clients negotiate through ApiVersions first; a version outside it cannot be encoded.
        raise CloseConnection(f"unsupported version {hdr.api_version} of API {ApiKey(hdr.api_key).name}")
    refused = out_of_exchange(hdr)
    if refused is not None:
        flexible = response_is_flexible(hdr.api_key, hdr.api_version)
        return [response_prefix(hdr.correlation_id, flexible, len(refused)), refused]
    check_authenticated(hdr.api_key)
    start = time.perf_counter()
    token = REQUEST_ROLE.set(None)
    # request_percentage quotas charge the handler's own running time, not its waits.
    timed: BusyTime[Body | None] | None = None
    if broker.quotas.has(REQUEST_QUOTA):
        timed = BusyTime(handler(broker, hdr))
    try:
        body: Body | None = await (timed if timed is not None else handler(broker, hdr))
    except Exception:
        broker.metrics.on_request(
            hdr.api_key, REQUEST_ROLE.get(), time.perf_counter() - start, ErrorCode.UNKNOWN_SERVER_ERROR
        )
        raise
    else:
        broker.metrics.on_request(hdr.api_key, REQUEST_ROLE.get(), time.perf_counter() - start)
    finally:
        REQUEST_ROLE.reset(token)
        if timed is not None:
            charge(broker, hdr, REQUEST_QUOTA, timed.seconds * 1000)
    if body is None:
        return None
    flexible = response_is_flexible(hdr.api_key, hdr.api_version)
    if isinstance(body, bytes):
        return [response_prefix(hdr.correlation_id, flexible, len(body)), body]
    prefix = response_prefix(hdr.correlation_id, flexible, chunks_size(body))
    return [prefix, *body]
