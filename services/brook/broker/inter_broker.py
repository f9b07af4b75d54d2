"""How this broker connects to the others: through the inter-broker listener's security protocol, with
TLS (its truststore, its own certificate) and SASL (sasl.mechanism.inter.broker.protocol and the
broker's credentials)."""

from __future__ import annotations

from brook.protocol import messages
from brook.protocol.errors import ErrorCode
from brook.protocol.versions import ApiKey
from brook.replication.peer import PeerConnection, PeerSecurity
from brook.security.sasl_client import ClientCredentials, ClientExchange, client_context
from brook.settings.broker import BrokerSettings

_HANDSHAKE_VERSION, _AUTHENTICATE_VERSION = 1, 2


def peer_security(settings: BrokerSettings) -> PeerSecurity:
    listener = settings.inter_broker_listener()
    ctx = client_context(settings.tls) if listener.tls else None
    creds = settings.inter_broker_credentials
    if not listener.sasl:
        return PeerSecurity(ctx)
    if creds is None:
        raise ValueError(
            f"the inter-broker listener {listener.name} uses SASL: give the broker's credentials"
        )

    async def authenticate(conn: PeerConnection) -> None:
        await sasl_login(conn, creds)

    return PeerSecurity(ctx, authenticate)


async def sasl_login(conn: PeerConnection, creds: ClientCredentials) -> None:
    """SaslHandshake then SaslAuthenticate rounds; ConnectionError when the other broker refuses."""
    body = messages.encode_request(ApiKey.SASL_HANDSHAKE, _HANDSHAKE_VERSION, {"mechanism": creds.mechanism})
    resp = messages.decode_response(
        ApiKey.SASL_HANDSHAKE, _HANDSHAKE_VERSION, await conn.request(ApiKey.SASL_HANDSHAKE, 1, body)
    )
    if resp.error_code != ErrorCode.NONE:
        raise ConnectionError(f"broker {conn.host}:{conn.port} does not accept SASL {creds.mechanism}")
    exchange = ClientExchange(creds)
    token: bytes | None = exchange.first()
    while token is not None:
        body = messages.encode_request(ApiKey.SASL_AUTHENTICATE, _AUTHENTICATE_VERSION, {"auth_bytes": token})
        raw = await conn.request(ApiKey.SASL_AUTHENTICATE, _AUTHENTICATE_VERSION, body)
        resp = messages.decode_response(ApiKey.SASL_AUTHENTICATE, _AUTHENTICATE_VERSION, raw)
        if resp.error_code != ErrorCode.NONE:
            raise ConnectionError(f"broker {conn.host}:{conn.port} refused SASL: {resp.error_message}")
        try:
            token = exchange.respond(bytes(resp.auth_bytes))
        except ValueError as e:
            raise ConnectionError(str(e)) from None
