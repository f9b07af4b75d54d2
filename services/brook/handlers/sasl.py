"""SaslHandshake and SaslAuthenticate (KIP-152, KIP-368): authentication on SASL listeners.

The connection owns a SaslSession (set in SASL_SESSION by the connection's task; None on listeners
without SASL). These handlers drive it; dispatch refuses other requests until it has authenticated.
"""

from __future__ import annotations

import contextvars
import logging
import struct

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey
from brook.security.sasl import MECHANISMS, AuthenticationFailed, SaslSession

from .context import CLIENT_HOST, PRINCIPAL, Body

log = logging.getLogger(__name__)

SASL_SESSION: contextvars.ContextVar[SaslSession | None] = contextvars.ContextVar(
    "sasl_session", default=None
)


async def handle_sasl_handshake(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.SASL_HANDSHAKE, hdr.api_version, hdr.body)
    session = SASL_SESSION.get()
    if session is None:
        code, enabled = ErrorCode.ILLEGAL_SASL_STATE, []
    else:
        enabled = [m for m in session.settings.enabled_mechanisms if m in MECHANISMS]
        code = ErrorCode.NONE
        if not session.handshake(str(req.mechanism)):
            code = ErrorCode.UNSUPPORTED_SASL_MECHANISM
            session.failed = True  # Kafka closes the connection after answering
            log.info("%s: SASL mechanism %r is not enabled", CLIENT_HOST.get(), str(req.mechanism)[:64])
        else:
            session.raw_tokens = hdr.api_version == 0
    return messages.encode_response(
        ApiKey.SASL_HANDSHAKE, hdr.api_version, {"error_code": code, "mechanisms": enabled}
    )


async def handle_sasl_authenticate(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.SASL_AUTHENTICATE, hdr.api_version, hdr.body)
    session = SASL_SESSION.get()
    fields: dict[str, object] = {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }
    if session is None:
        fields.update(
            error_code=ErrorCode.ILLEGAL_SASL_STATE, error_message="this listener does not use SASL"
        )
    else:
        mechanism = session.mechanism
        try:
            fields["auth_bytes"] = session.authenticate(bytes(req.auth_bytes))
        except AuthenticationFailed as e:
            fields.update(error_code=ErrorCode.SASL_AUTHENTICATION_FAILED, error_message=str(e))
            broker.metrics.on_error(ApiKey.SASL_AUTHENTICATE, None, ErrorCode.SASL_AUTHENTICATION_FAILED)
            log.warning("%s: SASL authentication failed (%s): %s", CLIENT_HOST.get(), mechanism, e)
        else:
            if session.user is not None and session.exchange is None:
                PRINCIPAL.set(f"User:{session.user}")
                fields["session_lifetime_ms"] = session.session_lifetime_ms()
    return messages.encode_response(ApiKey.SASL_AUTHENTICATE, hdr.api_version, fields)


def legacy_token(broker: Broker, session: SaslSession, token: bytes) -> bytes | None:
    """One step of an exchange begun by SaslHandshake v0 (Kafka before 1.0: kafka-python 2.0, Sarama
    with Version < 1.0): the client sends its tokens as bare size-prefixed frames, with no request
    header, and gets the server's the same way. The framed reply, or None when authentication failed:
    there is no error code to send, so the connection closes, as Kafka's does."""
    mechanism = session.mechanism
    try:
        reply = session.authenticate(token)
    except AuthenticationFailed as e:
        broker.metrics.on_error(ApiKey.SASL_AUTHENTICATE, None, ErrorCode.SASL_AUTHENTICATION_FAILED)
        log.warning("%s: SASL authentication failed (%s, handshake v0): %s", CLIENT_HOST.get(), mechanism, e)
        return None
    if session.exchange is None:  # complete: later frames are Kafka requests again
        session.raw_tokens = False
        PRINCIPAL.set(f"User:{session.user}")
    return struct.pack(">i", len(reply)) + reply
