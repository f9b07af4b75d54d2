"""A small OIDC identity provider for tests, on a free loopback port: an OAuth 2 token endpoint (client
credentials grant) issuing RS256 JWTs, and the JWKS of its signing key. `/token` issues valid tokens,
`/expired` tokens that expired an hour ago, `/invalid` a token that is not a JWT.

It also answers as trivup's OauthbearerOIDCApp does, the provider librdkafka's 0126 is written against:
`/retrieve` (client credentials with HTTP Basic and a scope of VALID_SCOPES, the JWT bearer grant with an
assertion signed by `client_key`, or a GET in Azure IMDS's form), `/retrieve/badformat`,
`/retrieve/expire` and `/keys`, its tokens with sub and client_id "subject", audience "api://default".

    with IdentityProvider(audience="brook") as idp:
        idp.jwks_url, idp.token_url
"""

from __future__ import annotations

import asyncio
import base64
import threading
import time
from typing import Any

import jwt
from aiohttp import web
from cryptography.hazmat.primitives.asymmetric import rsa

from tests.support.ports import free_port

KID = "brook-test-key"
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
VALID_SCOPES = ("test", "test-scope", "api://1234-abcd/.default")  # trivup's


class IdentityProvider:
    def __init__(
        self, audience: str = "brook", issuer: str = "brook-test-idp", lifetime_s: int = 3600
    ) -> None:
        self.audience, self.issuer, self.lifetime_s = audience, issuer, lifetime_s
        self.port = free_port()
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.client_key: rsa.RSAPrivateKey | None = None  # verifies JWT bearer assertions (trivup's)
        self.issued: list[str] = []  # the subjects of the tokens issued
        self._loop: asyncio.AbstractEventLoop | None = None
        self._runner: web.AppRunner | None = None
        self._thread: threading.Thread | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def jwks_url(self) -> str:
        return self.base + "/jwks"

    @property
    def token_url(self) -> str:
        return self.base + "/token"

    def token(self, sub: str, expires_in: int | None = None, **claims: Any) -> str:
        now = int(time.time())
        body = {
            "sub": sub,
            "iss": self.issuer,
            "aud": self.audience,
            "iat": now,
            "exp": now + (self.lifetime_s if expires_in is None else expires_in),
            **claims,
        }
        return jwt.encode(body, self.key, algorithm="RS256", headers={"kid": KID})

    def jwks(self) -> dict[str, Any]:
        jwk: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        return {"keys": [{**jwk, "kid": KID, "use": "sig", "alg": "RS256"}]}

    async def _issue(self, request: web.Request, expires_in: int | None, valid: bool = True) -> web.Response:
        """The client credentials grant: the subject is the client id (HTTP Basic, as librdkafka sends it,
        or the form's client_id)."""
        form = await request.post()
        sub = str(form.get("client_id") or "client")
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            sub = base64.b64decode(auth[6:]).decode().partition(":")[0]
        self.issued.append(sub)
        token = self.token(sub, expires_in) if valid else "not-a-jwt"
        return web.json_response(
            {"access_token": token, "token_type": "bearer", "expires_in": expires_in or 3600}
        )

    def _app(self) -> web.Application:
        async def jwks(_request: web.Request) -> web.Response:
            return web.json_response(self.jwks())

        async def valid(request: web.Request) -> web.Response:
            return await self._issue(request, None)

        async def expired(request: web.Request) -> web.Response:
            return await self._issue(request, -3600)

        async def invalid(request: web.Request) -> web.Response:
            return await self._issue(request, None, valid=False)

        async def badformat(_request: web.Request) -> web.Response:
            return await self._trivup_token(60, valid=False)

        async def expire(_request: web.Request) -> web.Response:
            return await self._trivup_token(-1)

        app = web.Application()
        app.router.add_get("/jwks", jwks)
        app.router.add_post("/token", valid)
        app.router.add_post("/expired", expired)
        app.router.add_post("/invalid", invalid)
        app.router.add_get("/keys", jwks)
        app.router.add_post("/retrieve", self._retrieve)
        app.router.add_get("/retrieve", self._retrieve_imds)
        app.router.add_post("/retrieve/badformat", badformat)
        app.router.add_post("/retrieve/expire", expire)
        return app

    # ---- trivup's OauthbearerOIDCApp

    async def _trivup_token(self, lifetime: int, valid: bool = True) -> web.Response:
        now = int(time.time())
        claims = {
            "exp": now + lifetime,
            "iat": now,
            "iss": "issuer",
            "sub": "subject",
            "aud": "api://default",
        }
        token = jwt.encode(
            {**claims, "client_id": "subject"}, self.key, algorithm="RS256", headers={"kid": KID}
        )
        return web.json_response({"access_token": token + ("invalid" if not valid else "")})

    async def _retrieve(self, request: web.Request) -> web.Response:
        if request.headers.get("Accept") != "application/json":
            raise web.HTTPBadRequest(text='Accept field should be "application/json"')
        form = await request.post()
        if form.get("grant_type") == JWT_BEARER:
            scope = form.get("scope")
            if scope is not None and scope not in VALID_SCOPES:
                raise web.HTTPBadRequest(text=f"Invalid scope {scope}")
            if self.client_key is None:
                raise web.HTTPInternalServerError(text="no client public key")
            try:
                claims = jwt.decode(
                    str(form.get("assertion", "")), self.client_key.public_key(), algorithms=["RS256"],
                    options={"verify_aud": False},
                )  # fmt: skip
            except jwt.PyJWTError as e:
                raise web.HTTPBadRequest(text=f"Invalid assertion: {e}") from None
            if not claims.get("sub"):
                raise web.HTTPBadRequest(text="the assertion has no sub")
            return await self._trivup_token(60)
        if "Authorization" not in request.headers:
            raise web.HTTPBadRequest(text="Authorization field is required")
        if form.get("grant_type") != "client_credentials" or set(form) - {"grant_type", "scope"}:
            raise web.HTTPBadRequest(text="format of data should be grant_type=client_credentials&scope=...")
        if "scope" in form and form["scope"] not in VALID_SCOPES:
            raise web.HTTPBadRequest(text=f"Invalid scope, scope should be one of {VALID_SCOPES}")
        return await self._trivup_token(60)

    async def _retrieve_imds(self, request: web.Request) -> web.Response:
        q = request.query
        if request.headers.get("Accept") != "application/json":
            raise web.HTTPBadRequest(text='Accept field should be "application/json"')
        if q.get("__metadata_authentication_type") != "azure_imds":
            raise web.HTTPBadRequest(text="__metadata_authentication_type must be azure_imds")
        missing = [k for k in ("client_id", "resource", "api-version") if k not in q]
        if missing or request.headers.get("Metadata", "").lower() != "true":
            raise web.HTTPBadRequest(text=f"missing {missing or 'the Metadata: true header'}")
        return await self._trivup_token(60)

    def start(self) -> IdentityProvider:
        ready = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            self._runner = web.AppRunner(self._app())
            loop.run_until_complete(self._runner.setup())
            loop.run_until_complete(web.TCPSite(self._runner, "127.0.0.1", self.port).start())
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._runner.cleanup())
            loop.close()

        self._thread = threading.Thread(target=serve, name="test-idp", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("the test identity provider did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def __enter__(self) -> IdentityProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
