"""SASL/OAUTHBEARER on the server: RFC 7628 messages, JWT validation against a JWKS (signature, time,
audience, issuer, subject), unsigned tokens only when asked for, and the exchange's error flow."""

from __future__ import annotations

import base64
import json
import time

import pytest

from brook.security.oauthbearer import InvalidToken, OAuthSettings, TokenValidator, initial_response
from brook.security.sasl import AuthenticationFailed, SaslSession, SaslSettings
from tests.support.oidc import IdentityProvider

IDP = IdentityProvider(audience="brook", issuer="https://idp.test")  # keys only: never started


def validator(**kw: object) -> TokenValidator:
    settings = OAuthSettings(
        jwks_endpoint_url="http://unused.invalid/jwks",
        expected_audience=("brook",),
        expected_issuer="https://idp.test",
    )
    v = TokenValidator(OAuthSettings(**{**{f: getattr(settings, f) for f in settings.__slots__}, **kw}))  # type: ignore[arg-type]
    v.set_keys(IDP.jwks())
    return v


def client_first(token: str, authzid: str = "") -> bytes:
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01\x01".encode()


def unsigned(claims: dict[str, object]) -> str:
    def part(d: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(d).encode()).decode().rstrip("=")

    return f"{part({'alg': 'none'})}.{part(claims)}."


def test_initial_response() -> None:
    assert initial_response(client_first("abc.def.ghi")) == "abc.def.ghi"
    assert initial_response(b"n,a=alice,\x01host=h\x01auth=Bearer t\x01\x01") == "t"
    for bad in (
        b"",
        b"n,,auth=Bearer t",
        b"n,,\x01auth=Basic t\x01\x01",
        b"x,,\x01auth=Bearer t\x01\x01",
        b"\xff",
    ):
        with pytest.raises(InvalidToken):
            initial_response(bad)


def test_a_signed_token_gives_its_subject_and_expiry() -> None:
    bearer = validator().validate(IDP.token("alice"))
    assert bearer.principal == "alice" and bearer.expires_ms > time.time() * 1000
    assert validator(sub_claim_name="client").validate(IDP.token("x", client="svc-1")).principal == "svc-1"


@pytest.mark.parametrize(
    ("token", "why"),
    [
        (lambda: IDP.token("alice", expires_in=-120), "expired"),
        (lambda: IDP.token("alice", aud="other"), "(?i)audience"),
        (lambda: IDP.token("alice", iss="https://evil.test"), "(?i)issuer"),
        (lambda: IdentityProvider().token("alice"), "Signature verification failed"),
        (lambda: "not-a-jwt", "malformed"),
        (lambda: unsigned({"sub": "alice", "exp": time.time() + 60}), "unsigned"),
    ],
)
def test_refused_tokens(token: object, why: str) -> None:
    with pytest.raises(InvalidToken, match=why):
        validator().validate(token())  # type: ignore[operator]


def test_clock_skew_allows_a_just_expired_token() -> None:
    assert validator(clock_skew_s=30).validate(IDP.token("alice", expires_in=-10)).principal == "alice"


def test_unknown_key_id_is_refused() -> None:
    v = validator()
    v.set_keys({"keys": []})
    with pytest.raises(InvalidToken, match="no key with id"):
        v.validate(IDP.token("alice"))


def test_unsigned_tokens_only_when_asked_for() -> None:
    v = TokenValidator(OAuthSettings(unsecured=True))
    assert v.validate(unsigned({"sub": "bob", "exp": int(time.time()) + 60})).principal == "bob"
    for claims in ({"exp": int(time.time()) + 60}, {"sub": "bob", "exp": int(time.time()) - 3600}):
        with pytest.raises(InvalidToken):
            v.validate(unsigned(claims))  # type: ignore[arg-type]
    with pytest.raises(InvalidToken, match="unsigned tokens only"):
        v.validate(IDP.token("alice"))


def session(v: TokenValidator, reauth_ms: int = 0) -> SaslSession:
    s = SaslSession(SaslSettings(("OAUTHBEARER",), connections_max_reauth_ms=reauth_ms), lambda _u: {}, v)
    assert s.handshake("OAUTHBEARER")
    return s


def test_the_exchange_authenticates_and_bounds_the_session_by_the_token() -> None:
    s = session(validator(), reauth_ms=3_600_000)
    assert s.authenticate(client_first(IDP.token("alice", expires_in=60))) == b""
    assert s.user == "alice" and 50_000 < s.session_lifetime_ms() <= 60_000
    s = session(validator(), reauth_ms=10_000)
    s.authenticate(client_first(IDP.token("alice", expires_in=60)))
    assert s.session_lifetime_ms() == 10_000


def test_a_refused_token_gets_rfc7628s_error_then_fails() -> None:
    s = session(validator())
    challenge = s.authenticate(client_first(IDP.token("alice", aud="other")))
    assert json.loads(challenge) == {"status": "invalid_token"} and s.user is None and not s.failed
    with pytest.raises(AuthenticationFailed, match=r"(?i)audience"):
        s.authenticate(b"\x01")
    assert s.failed
