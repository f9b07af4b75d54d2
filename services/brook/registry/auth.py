"""HTTP basic auth against the cluster's SCRAM users: a user:password pair is accepted when it logs in
to the broker's SASL listener (a real SCRAM exchange through confluent-kafka), so the registry needs no
copy of the credentials and a password change or a deleted user takes effect within `cache_s`. Accepted
pairs are remembered by a hash of the password for `cache_s`; refused ones are not cached (a user
created a moment ago gets in at once)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import time
from typing import Any

from aiohttp import web
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient

from .http import Handler, reply

log = logging.getLogger(__name__)


class ScramBasicAuth:
    def __init__(
        self,
        bootstrap: str,
        security_protocol: str = "SASL_PLAINTEXT",
        mechanism: str = "SCRAM-SHA-512",
        client_config: dict[str, Any] | None = None,
        cache_s: float = 60.0,
        timeout_s: float = 10.0,
    ) -> None:
        self._config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "security.protocol": security_protocol,
            "sasl.mechanism": mechanism,
            "logger": log,
            **(client_config or {}),
        }
        self._cache_s = cache_s
        self._timeout_s = timeout_s
        self._pepper = os.urandom(16)  # the cache holds keyed hashes, never passwords
        self._accepted: dict[str, tuple[bytes, float]] = {}

    def _digest(self, password: str) -> bytes:
        return hmac.new(self._pepper, password.encode(), hashlib.sha256).digest()

    async def user(self, authorization: str | None) -> str | None:
        """The user an Authorization header authenticates, or None."""
        if not authorization or not authorization.startswith("Basic "):
            return None
        try:
            user, sep, password = base64.b64decode(authorization[6:], validate=True).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        if not sep or not user:
            return None
        digest = self._digest(password)
        cached = self._accepted.get(user)
        if cached is not None and cached[1] > time.monotonic() and hmac.compare_digest(cached[0], digest):
            return user
        if not await asyncio.to_thread(self._login, user, password):
            return None
        self._accepted[user] = (digest, time.monotonic() + self._cache_s)
        return user

    def _login(self, user: str, password: str) -> bool:
        failed: list[KafkaError] = []
        config: dict[str, Any] = {
            **self._config,
            "sasl.username": user,
            "sasl.password": password,
            "error_cb": failed.append,
        }
        admin = AdminClient(config)
        deadline = time.monotonic() + self._timeout_s
        while time.monotonic() < deadline:
            try:
                admin.list_topics(timeout=0.5)
                return True
            except Exception:
                admin.poll(0)  # error_cb is served by poll only: without it a refusal waits out timeout_s
                if any(e.code() == KafkaError._AUTHENTICATION for e in failed):
                    return False
        log.warning("registry login of %s: no answer from the SASL listener in %.0fs", user, self._timeout_s)
        return False


def basic_auth(auth: ScramBasicAuth) -> Any:
    """aiohttp middleware: requests without valid credentials get Confluent's 401."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = await auth.user(request.headers.get("Authorization"))
        if user is None:
            answer = reply({"error_code": 401, "message": "Unauthorized"}, 401)
            answer.headers["WWW-Authenticate"] = 'Basic realm="schema-registry"'
            return answer
        request["principal"] = f"User:{user}"  # the principal the ACLs name (access.py)
        return await handler(request)

    return check
