"""DescribeUserScramCredentials and AlterUserScramCredentials (KIP-554): SCRAM credentials kept in the
cluster's metadata, for SASL/SCRAM authentication.

A client sends the salted password (Hi(password, salt, iterations), RFC 5802); the broker keeps only
what a SCRAM server needs, StoredKey = H(HMAC(salted, "Client Key")) and ServerKey = HMAC(salted,
"Server Key"), with the salt and iterations. Validation and error codes follow Kafka's controller.
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from typing import Any

from brook.broker.broker import Broker
from brook.metadata import ScramCredential
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import CLUSTER_DENIED, Operation, allowed_cluster
from .context import Body

# Mechanism code -> (name, hash); Kafka's ScramMechanism, with its iteration bounds.
MECHANISMS = {1: ("SCRAM-SHA-256", "sha256"), 2: ("SCRAM-SHA-512", "sha512")}
_CODES = {name: code for code, (name, _) in MECHANISMS.items()}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384


def scram_credential(mechanism: int, salt: bytes, salted_password: bytes, iterations: int) -> ScramCredential:
    digest = MECHANISMS[mechanism][1]
    client_key = hmac.digest(salted_password, b"Client Key", digest)
    server_key = hmac.digest(salted_password, b"Server Key", digest)
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(), server_key, iterations)


async def handle_describe_user_scram_credentials(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, hdr.api_version, hdr.body)
    if not allowed_cluster(broker, Operation.DESCRIBE):
        return messages.encode_response(
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, hdr.api_version, CLUSTER_DENIED
        )
    known = broker.scram_credentials()
    wanted = [u.name for u in req.users] if req.users else sorted(known)
    counts = Counter(wanted)
    results: list[dict[str, Any]] = []
    for user in dict.fromkeys(wanted):
        entry: dict[str, Any] = {"user": user, "error_code": 0, "error_message": None, "credential_infos": []}
        if counts[user] > 1:
            entry.update(
                error_code=ErrorCode.DUPLICATE_RESOURCE,
                error_message="cannot describe the SCRAM credentials of the same user twice in one request",
            )
        elif user not in known:
            entry.update(
                error_code=ErrorCode.RESOURCE_NOT_FOUND,
                error_message=f"user '{user}' has no SCRAM credentials",
            )
        else:
            entry["credential_infos"] = [
                {"mechanism": _CODES[m], "iterations": c.iterations}
                for m, c in sorted(known[user].items())
                if m in _CODES
            ]
        results.append(entry)
    return messages.encode_response(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        hdr.api_version,
        {"throttle_time_ms": 0, "error_code": 0, "error_message": None, "results": results},
    )


def _check(user: str, mechanism: int, iterations: int | None) -> tuple[ErrorCode, str] | None:
    if not user:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "the user name must not be empty"
    if mechanism not in MECHANISMS:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism {mechanism}"
    if iterations is not None and iterations < MIN_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"too few iterations: {iterations} < {MIN_ITERATIONS}"
    if iterations is not None and iterations > MAX_ITERATIONS:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, f"too many iterations: {iterations} > {MAX_ITERATIONS}"
    return None


async def handle_alter_user_scram_credentials(broker: Broker, hdr: RequestHeader) -> Body | None:
    req = decode_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, hdr.api_version, hdr.body)
    # Kafka refuses a (user, mechanism) pair named twice; one user may alter several mechanisms.
    pairs = Counter(
        [(d.name, d.mechanism) for d in req.deletions] + [(u.name, u.mechanism) for u in req.upsertions]
    )
    twice = ErrorCode.DUPLICATE_RESOURCE, "a user credential cannot be altered twice in the same request"
    denied = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster denied"
    may = allowed_cluster(broker, Operation.ALTER)
    known = broker.scram_credentials()
    errors: dict[str, tuple[ErrorCode, str | None]] = {}  # a user's first error: none of its changes apply
    users = list(dict.fromkeys([d.name for d in req.deletions] + [u.name for u in req.upsertions]))
    if not may:
        errors = {u: denied for u in users}
    for d in req.deletions:
        err = _check(d.name, d.mechanism, None)
        if err is None and pairs[(d.name, d.mechanism)] > 1:
            err = twice
        mechanism = MECHANISMS.get(d.mechanism, ("", ""))[0]
        if err is None and mechanism not in known.get(d.name, {}):
            err = ErrorCode.RESOURCE_NOT_FOUND, f"user '{d.name}' has no {mechanism} credential to delete"
        if err is not None:
            errors.setdefault(d.name, err)
    for u in req.upsertions:
        err = _check(u.name, u.mechanism, u.iterations)
        if err is None and pairs[(u.name, u.mechanism)] > 1:
            err = twice
        if err is None and (not u.salt or not u.salted_password):
            err = ErrorCode.UNACCEPTABLE_CREDENTIAL, "the salt and the salted password must not be empty"
        if err is not None:
            errors.setdefault(u.name, err)
    changed: dict[str, dict[str, ScramCredential]] = {}
    for d in req.deletions:
        if d.name not in errors:
            del changed.setdefault(d.name, dict(known.get(d.name, {})))[MECHANISMS[d.mechanism][0]]
    for u in req.upsertions:
        if u.name not in errors:
            creds = changed.setdefault(u.name, dict(known.get(u.name, {})))
            creds[MECHANISMS[u.mechanism][0]] = scram_credential(
                u.mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations
            )
    outcome: dict[str, tuple[ErrorCode, str | None]] = {
        user: errors.get(user, (ErrorCode.NONE, None)) for user in users
    }
    for user, creds in changed.items():
        try:
            await broker.set_scram_credentials(user, creds)
        except KafkaError as e:
            outcome[user] = e.code, e.message
    return messages.encode_response(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        hdr.api_version,
        {
            "throttle_time_ms": 0,
            "results": [
                {"user": user, "error_code": code, "error_message": message}
                for user, (code, message) in outcome.items()
            ],
        },
    )
