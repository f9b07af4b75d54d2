"""The server side of SASL (Kafka's SaslServer): PLAIN and SCRAM-SHA-256/512 against the SCRAM store,
OAUTHBEARER against an identity provider's keys (oauthbearer.py).

Only salted credentials are stored (RFC 5802 StoredKey and ServerKey). SCRAM runs RFC 5802/7677 with
the `scramp` library; PLAIN derives the salted password from the one presented, with the stored salt and
iterations, and compares StoredKeys, so no password is ever kept. Failures raise AuthenticationFailed
with a message safe to send and log: it never contains the password or a proof.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import scramp  # type: ignore[import-untyped]

from brook.security.oauthbearer import (
    InvalidToken,
    OAuthSettings,
    TokenValidator,
    error_challenge,
    initial_response,
)

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
_DIGEST = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}


class Credential(Protocol):
    @property
    def salt(self) -> bytes: ...
    @property
    def stored_key(self) -> bytes: ...
    @property
    def server_key(self) -> bytes: ...
    @property
    def iterations(self) -> int: ...


# user -> mechanism name -> credential (the SCRAM store as the broker sees it right now)
CredentialLookup = Callable[[str], Mapping[str, Credential]]


class AuthenticationFailed(Exception):
    """SASL_AUTHENTICATION_FAILED; the message goes to the client and the log (no secrets in it)."""


@dataclass(slots=True)
class SaslSettings:
    enabled_mechanisms: tuple[str, ...] = ("GSSAPI",)  # sasl.enabled.mechanisms (Kafka's default)
    connections_max_reauth_ms: int = 0  # 0: sessions do not expire (KIP-368)
    failed_authentication_delay_ms: int = 100  # connection.failed.authentication.delay.ms
    oauth: OAuthSettings = field(default_factory=OAuthSettings)  # sasl.oauthbearer.*


def _invalid(mechanism: str) -> AuthenticationFailed:
    # Kafka's message: the same for an unknown user and a wrong password.
    return AuthenticationFailed(
        "Authentication failed during authentication due to invalid credentials with SASL mechanism "
        + mechanism
    )


def plain_matches(credential: Credential, digest: str, password: bytes) -> bool:
    salted = hashlib.pbkdf2_hmac(digest, password, credential.salt, credential.iterations)
    client_key = hmac.digest(salted, b"Client Key", digest)
    return hmac.compare_digest(hashlib.new(digest, client_key).digest(), credential.stored_key)


class Authenticator:
    """One SASL exchange: started by a handshake naming the mechanism, fed the client's tokens."""

    def __init__(
        self, mechanism: str, lookup: CredentialLookup, tokens: TokenValidator | None = None
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._tokens = tokens
        self.user: str | None = None  # set once authenticated
        self.credential_expires_ms: int | None = None  # an OAUTHBEARER token's exp
        self._scram: scramp.ScramServer | None = None
        self._scram_user: str | None = None
        self._gs2 = b""
        self._refused: str | None = None  # OAUTHBEARER: the error sent, awaiting the client's ^A

    @property
    def complete(self) -> bool:
        return self.user is not None

    def step(self, token: bytes) -> bytes:
        """The server's answer to one client token; AuthenticationFailed ends the exchange."""
        if self.complete:
            raise AuthenticationFailed("the SASL exchange is already complete")
        if self.mechanism == "PLAIN":
            return self._plain(token)
        if self.mechanism == "OAUTHBEARER":
            return self._oauthbearer(token)
        return self._scram_step(token)

    def _oauthbearer(self, token: bytes) -> bytes:
        """RFC 7628: a refused token gets an error challenge, the client answers ^A, then the exchange
        fails (Kafka's OAuthBearerSaslServer); a valid one authenticates its subject at once."""
        if self._refused is not None:
            raise AuthenticationFailed(self._refused)
        if self._tokens is None:
            raise AuthenticationFailed("OAUTHBEARER is not configured on this broker")
        try:
            bearer = self._tokens.validate(initial_response(token))
        except InvalidToken as e:
            self._refused = f"Authentication failed: {e}"
            return error_challenge()
        self.user = bearer.principal
        self.credential_expires_ms = bearer.expires_ms
        return b""

    def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user_b, password = parts
        try:
            user = user_b.decode()
        except UnicodeDecodeError:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: the user name is not UTF-8") from None
        if not user or not password:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: empty user name or password")
        if authzid and authzid != user_b:
            raise AuthenticationFailed(
                "Authentication failed: client requested an authorization id that is different from username"
            )
        creds = self._lookup(user)
        for mech in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            cred = creds.get(mech)
            if cred is not None:
                if plain_matches(cred, _DIGEST[mech], password):
                    self.user = user
                    return b""
                break
        raise _invalid("PLAIN")

    def _scram_step(self, token: bytes) -> bytes:
        # Every failure (malformed message, unknown user, wrong proof) gets Kafka's one answer.
        try:
            text = token.decode()
            if self._scram is None:
                self._scram = scramp.ScramMechanism(self.mechanism).make_server(self._auth_info)
                self._scram.set_client_first(text)
                self._gs2 = text[: text.index(",", text.index(",") + 1) + 1].encode()  # e.g. "n,,"
                return str(self._scram.get_server_first()).encode()
            final = self._client_final(text)
        except (scramp.ScramException, ValueError, KeyError, IndexError, TypeError, AttributeError):
            raise _invalid(self.mechanism) from None
        self.user = self._scram_user
        return final

    def _client_final(self, text: str) -> bytes:
        """RFC 5802's proof check on scramp's state of the exchange. Not scramp's own: as Kafka's
        ScramSaslServer, the client's nonce must END with the server's (librdkafka < 2.2 sends the client
        nonce twice, and Kafka accepts it)."""
        server: Any = self._scram
        digest = _DIGEST[self.mechanism]
        fields = dict(item.split("=", 1) for item in text.split(","))
        without_proof, _, proof_b64 = text.rpartition(",p=")
        if not without_proof or not fields["r"].endswith(str(server.nonce)):
            raise ValueError("bad nonce")
        if base64.b64decode(fields["c"]) != self._gs2:  # no channel binding: the GS2 header only
            raise ValueError("bad channel binding")
        auth = f"{server.client_first_bare!s},{server.server_first!s},{without_proof}".encode()
        proof = base64.b64decode(proof_b64, validate=True)
        signature = hmac.digest(server.stored_key, auth, digest)
        if len(proof) != len(signature):
            raise ValueError("bad proof")
        client_key = bytes(a ^ b for a, b in zip(proof, signature, strict=True))
        if not hmac.compare_digest(hashlib.new(digest, client_key).digest(), server.stored_key):
            raise ValueError("bad proof")
        server_signature = hmac.digest(server.server_key, auth, digest)
        return b"v=" + base64.b64encode(server_signature)

    def _auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        cred = self._lookup(user).get(self.mechanism)
        if cred is None:
            raise KeyError("unknown user")
        self._scram_user = user
        return cred.salt, cred.stored_key, cred.server_key, cred.iterations


class SaslSession:
    """A SASL connection's state: the exchange in progress, who it authenticated as, until when (KIP-368).

    Re-authentication runs a new handshake and exchange on the authenticated connection; the principal
    may not change (Kafka closes the connection if it does)."""

    def __init__(
        self, settings: SaslSettings, lookup: CredentialLookup, tokens: TokenValidator | None = None
    ) -> None:
        self.settings = settings
        self._lookup = lookup
        self._tokens = tokens
        self._lifetime_ms = 0
        self.exchange: Authenticator | None = None
        self.mechanism: str | None = None
        self.user: str | None = None
        self.expires_at: float | None = None  # time.monotonic() deadline; None: never
        self.failed = False  # the connection must close (after the failed-authentication delay)
        # After a SaslHandshake v0 the exchange runs on raw size-prefixed tokens, not SaslAuthenticate.
        self.raw_tokens = False

    @property
    def authenticated(self) -> bool:
        return self.user is not None

    def expired(self) -> bool:
        return self.expires_at is not None and time.monotonic() >= self.expires_at

    def handshake(self, mechanism: str) -> bool:
        if mechanism not in self.settings.enabled_mechanisms or mechanism not in MECHANISMS:
            return False
        self.mechanism = mechanism
        self.exchange = Authenticator(mechanism, self._lookup, self._tokens)
        return True

    def authenticate(self, token: bytes) -> bytes:
        """One SaslAuthenticate step; AuthenticationFailed marks the session failed."""
        if self.exchange is None:
            raise AuthenticationFailed("SaslAuthenticate before SaslHandshake")
        try:
            reply = self.exchange.step(token)
        except AuthenticationFailed:
            self.failed = True
            raise
        user = self.exchange.user
        if user is not None:
            if self.user is not None and user != self.user:
                self.failed = True
                raise AuthenticationFailed("re-authentication must keep the same principal")
            # KIP-368: the session ends at connections.max.reauth.ms, or when a token credential expires
            # if sooner (Kafka's SaslServerAuthenticator); the client re-authenticates before.
            lifetimes = (
                [self.settings.connections_max_reauth_ms]
                if self.settings.connections_max_reauth_ms > 0
                else []
            )
            if self.exchange.credential_expires_ms is not None:
                lifetimes.append(max(0, self.exchange.credential_expires_ms - int(time.time() * 1000)))
            self.user = user
            self.exchange = None
            self._lifetime_ms = min(lifetimes) if lifetimes else 0
            self.expires_at = time.monotonic() + self._lifetime_ms / 1000 if lifetimes else None
        return reply

    def session_lifetime_ms(self) -> int:
        return self._lifetime_ms if self.expires_at is not None else 0
