"""SASL/OAUTHBEARER on the server (KIP-255, RFC 7628; OIDC validation as KIP-768): the client presents a
JWT, the broker checks its signature against the identity provider's JWKS, its time window, audience and
issuer, and takes the principal from its `sub` claim (sasl.oauthbearer.sub.claim.name).

Kafka's broker validates unsigned tokens (alg "none") when no JWKS endpoint is configured; Brook does so
only when asked (`--sasl-oauthbearer-unsecured`, for development), never by omission.

The keys come from `sasl.oauthbearer.jwks.endpoint.url`, fetched at start and every
`sasl.oauthbearer.jwks.endpoint.refresh.ms`, and again (at most every few seconds) when a token names a
key id not yet known, as Kafka's RefreshingHttpsJwks does. Validation itself is synchronous (PyJWT).
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
import jwt

log = logging.getLogger(__name__)

# RFC 7518 signature algorithms an identity provider signs with (never "none", never HMAC: a JWKS of
# public keys cannot verify a shared-secret signature safely).
ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512")
_MIN_REFETCH_S = 5.0  # an unknown key id refetches the JWKS at most this often


class InvalidToken(Exception):
    """The token is refused; the message goes to the client (after RFC 7628's error exchange) and the log."""


@dataclass(frozen=True, slots=True)
class OAuthSettings:
    jwks_endpoint_url: str = ""  # sasl.oauthbearer.jwks.endpoint.url
    jwks_refresh_ms: int = 3_600_000  # sasl.oauthbearer.jwks.endpoint.refresh.ms
    expected_audience: tuple[str, ...] = ()  # sasl.oauthbearer.expected.audience
    expected_issuer: str = ""  # sasl.oauthbearer.expected.issuer
    sub_claim_name: str = "sub"  # sasl.oauthbearer.sub.claim.name
    clock_skew_s: int = 30  # sasl.oauthbearer.clock.skew.seconds
    unsecured: bool = False  # accept unsigned tokens (Kafka's unsecured validator), development only


@dataclass(frozen=True, slots=True)
class Bearer:
    principal: str
    expires_ms: int  # the token's exp, epoch milliseconds


def initial_response(message: bytes) -> str:
    """The bearer token of an RFC 7628 client initial response: `n,[a=authzid],^Aauth=Bearer T^A...^A^A`."""
    try:
        text = message.decode()
    except UnicodeDecodeError:
        raise InvalidToken("Invalid OAUTHBEARER client first message: not UTF-8") from None
    gs2, sep, rest = text.partition("\x01")
    if not sep or not gs2.startswith(("n,", "y,")) or not rest.endswith("\x01\x01"):
        raise InvalidToken("Invalid OAUTHBEARER client first message")
    pairs = dict(kv.partition("=")[::2] for kv in rest[:-2].split("\x01") if kv)
    scheme, _, token = pairs.get("auth", "").partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise InvalidToken("Invalid OAUTHBEARER client first message: no 'auth=Bearer <token>'")
    return token.strip()


def error_challenge(status: str = "invalid_token") -> bytes:
    """RFC 7628 section 3.2.2: the server's error, which the client acknowledges with a single ^A."""
    return json.dumps({"status": status}).encode()


class TokenValidator:
    """Validates bearer tokens against the configured identity provider's keys (or, unsecured, none)."""

    def __init__(self, settings: OAuthSettings) -> None:
        self.settings = settings
        self._keys: dict[str, Any] = {}  # kid -> public key
        self._fetched_at = 0.0
        self._refetch: asyncio.Task[None] | None = None
        self._timer: asyncio.Task[None] | None = None

    # ---- keys

    async def start(self) -> None:
        """Fetch the keys once (a failure is logged: tokens are refused until a refresh succeeds)."""
        if self.settings.jwks_endpoint_url:
            await self.refresh()
            self._timer = asyncio.get_running_loop().create_task(self._refresh_every())

    async def stop(self) -> None:
        for task in (self._timer, self._refetch):
            if task is not None:
                task.cancel()

    async def _refresh_every(self) -> None:
        while True:
            await asyncio.sleep(self.settings.jwks_refresh_ms / 1000)
            await self.refresh()

    async def refresh(self) -> None:
        url = self.settings.jwks_endpoint_url
        self._fetched_at = time.monotonic()
        try:
            timeout = aiohttp.ClientTimeout(total=10)
            async with aiohttp.ClientSession(timeout=timeout) as http, http.get(url) as resp:
                resp.raise_for_status()
                doc = await resp.json(content_type=None)
            self.set_keys(doc)
        except (aiohttp.ClientError, TimeoutError, ValueError, jwt.PyJWTError) as e:
            log.warning("OAUTHBEARER: cannot fetch the JWKS from %s: %s", url, e)

    def set_keys(self, jwks: Mapping[str, Any]) -> None:
        keys = {}
        for k in jwt.PyJWKSet.from_dict(dict(jwks)).keys if jwks.get("keys") else []:
            if k.key_id and getattr(k, "public_key_use", None) in (None, "sig"):
                keys[k.key_id] = k.key
        self._keys = keys
        log.info("OAUTHBEARER: %d signing key(s) from the JWKS", len(keys))

    def _unknown_key(self, kid: str) -> InvalidToken:
        idle = self._refetch is None or self._refetch.done()
        if idle and self.settings.jwks_endpoint_url and time.monotonic() - self._fetched_at >= _MIN_REFETCH_S:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:  # validated outside the broker's loop: the periodic refresh will do
                loop = None
            if loop is not None:
                self._refetch = loop.create_task(self.refresh())
        return InvalidToken(f"no key with id '{kid}' in the JWKS (a refresh has been asked for)")

    # ---- tokens

    def validate(self, token: str, now_s: float | None = None) -> Bearer:
        s = self.settings
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError as e:
            raise InvalidToken(f"malformed token: {e}") from None
        options: Any = {
            "require": ["exp", s.sub_claim_name],
            "verify_aud": bool(s.expected_audience),
        }
        if header.get("alg") == "none":
            if not s.unsecured:
                raise InvalidToken("unsigned token (alg none) refused")
            claims = _unsigned_claims(token)
        elif s.unsecured and not s.jwks_endpoint_url:
            raise InvalidToken("this listener validates unsigned tokens only (no JWKS endpoint)")
        else:
            kid = header.get("kid")
            if not isinstance(kid, str) or kid not in self._keys:
                raise self._unknown_key(str(kid))
            try:
                claims = jwt.decode(
                    token,
                    self._keys[kid],
                    algorithms=list(ALGORITHMS),
                    audience=list(s.expected_audience) or None,
                    issuer=s.expected_issuer or None,
                    leeway=s.clock_skew_s,
                    options=options,
                )
            except jwt.PyJWTError as e:
                raise InvalidToken(f"token refused: {e}") from None
        now = time.time() if now_s is None else now_s
        exp = claims.get("exp")
        if not isinstance(exp, int | float) or exp + s.clock_skew_s < now:
            raise InvalidToken("token refused: Signature has expired")
        principal = claims.get(s.sub_claim_name)
        if not isinstance(principal, str) or not principal:
            raise InvalidToken(f"token refused: no '{s.sub_claim_name}' claim")
        return Bearer(principal, int(exp * 1000))


def _unsigned_claims(token: str) -> dict[str, Any]:
    """The claims of an unsecured JWS (RFC 7515 with alg none: `header.payload.`), unverified by design."""
    parts = token.split(".")
    if len(parts) != 3 or parts[2]:
        raise InvalidToken("malformed unsigned token")
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        raise InvalidToken("malformed unsigned token: its claims are not JSON") from None
    if not isinstance(payload, dict):
        raise InvalidToken("malformed unsigned token: its claims are not an object")
    return payload
