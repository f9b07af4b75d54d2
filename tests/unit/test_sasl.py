"""The SASL server (security/sasl.py) against the client side (security/sasl_client.py) and by hand."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os

import pytest

from brook.handlers.scram import scram_credential
from brook.metadata import ScramCredential
from brook.security.sasl import AuthenticationFailed, SaslSession, SaslSettings
from brook.security.sasl_client import ClientCredentials, ClientExchange

MECHS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")


def _store(password: bytes) -> dict[str, ScramCredential]:
    creds = {}
    for code, name, digest in ((1, "SCRAM-SHA-256", "sha256"), (2, "SCRAM-SHA-512", "sha512")):
        salt = os.urandom(16)
        creds[name] = scram_credential(code, salt, hashlib.pbkdf2_hmac(digest, password, salt, 4096), 4096)
    return creds


STORE = {"bob": _store(b"pw")}


def _session() -> SaslSession:
    return SaslSession(SaslSettings(enabled_mechanisms=MECHS), lambda u: STORE.get(u, {}))


def _login(session: SaslSession, mech: str, user: str, password: str) -> None:
    assert session.handshake(mech)
    exchange = ClientExchange(ClientCredentials(mech, user, password))
    token: bytes | None = exchange.first()
    while token is not None:
        token = exchange.respond(session.authenticate(token))


@pytest.mark.parametrize("mech", MECHS)
def test_login(mech: str) -> None:
    s = _session()
    _login(s, mech, "bob", "pw")
    assert s.authenticated and s.user == "bob" and not s.failed


@pytest.mark.parametrize("mech", MECHS)
@pytest.mark.parametrize(("user", "password"), [("bob", "wrong"), ("nobody", "pw")])
def test_refused(mech: str, user: str, password: str) -> None:
    s = _session()
    with pytest.raises(AuthenticationFailed, match="invalid credentials"):
        _login(s, mech, user, password)
    assert s.failed and not s.authenticated


def test_disabled_mechanism() -> None:
    s = SaslSession(SaslSettings(enabled_mechanisms=("PLAIN",)), lambda u: STORE.get(u, {}))
    assert not s.handshake("SCRAM-SHA-256") and not s.handshake("GSSAPI")


def test_scram_client_nonce_repeated_as_librdkafka_2_0_does() -> None:
    """Kafka accepts a final nonce that ENDS with the server's (librdkafka 2.0 sends c-nonce twice)."""
    s = _session()
    assert s.handshake("SCRAM-SHA-256")
    c_nonce = "fyko+d2lbbFgONRv9qkxdawL"
    first_bare = f"n=bob,r={c_nonce}"
    server_first = s.authenticate(f"n,,{first_bare}".encode()).decode()
    fields = dict(kv.split("=", 1) for kv in server_first.split(","))
    cred = STORE["bob"]["SCRAM-SHA-256"]
    salted = hashlib.pbkdf2_hmac("sha256", b"pw", base64.b64decode(fields["s"]), int(fields["i"]))

    without_proof = f"c=biws,r={c_nonce}{fields['r']}"
    auth = f"{first_bare},{server_first},{without_proof}".encode()
    client_key = hmac.digest(salted, b"Client Key", "sha256")
    signature = hmac.digest(cred.stored_key, auth, "sha256")
    proof = base64.b64encode(bytes(a ^ b for a, b in zip(client_key, signature, strict=True))).decode()
    reply = s.authenticate(f"{without_proof},p={proof}".encode())
    assert reply.startswith(b"v=") and s.user == "bob"
