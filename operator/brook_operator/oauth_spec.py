"""A listener's `oauth` settings (authentication: oauth): clients log in with SASL/OAUTHBEARER and the
brokers check their tokens against an identity provider's keys (Strimzi's `type: oauth`, in Brook's
words). Pure: no I/O."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

_URL = re.compile(r"^https?://[^\s/]+(/\S*)?$")


@dataclass(frozen=True, slots=True)
class OAuth:
    jwks_endpoint_uri: str  # the identity provider's JWKS (its signing keys)
    valid_issuer_uri: str = ""  # the tokens' iss; empty: not checked
    audience: tuple[str, ...] = ()  # a token's aud must name one of them; empty: not checked
    user_name_claim: str = "sub"  # the claim that names the principal (User:<value>)

    def broker_env(self) -> dict[str, str]:
        """The brokers' settings (`brook broker` flags as BROOK_* variables)."""
        env = {"BROOK_SASL_OAUTHBEARER_JWKS_ENDPOINT_URL": self.jwks_endpoint_uri}
        if self.valid_issuer_uri:
            env["BROOK_SASL_OAUTHBEARER_EXPECTED_ISSUER"] = self.valid_issuer_uri
        if self.audience:
            env["BROOK_SASL_OAUTHBEARER_EXPECTED_AUDIENCE"] = ",".join(self.audience)
        if self.user_name_claim != "sub":
            env["BROOK_SASL_OAUTHBEARER_SUB_CLAIM_NAME"] = self.user_name_claim
        return env


def parse_oauth(raw: Any, path: str, errors: list[str]) -> OAuth | None:
    """`oauth` of a listener; problems go to `errors` as one line each."""
    if not isinstance(raw, Mapping):
        errors.append(
            f"{path}: authentication oauth needs oauth.jwksEndpointUri (the identity provider's keys)"
        )
        return None
    jwks = raw.get("jwksEndpointUri")
    if not isinstance(jwks, str) or not _URL.match(jwks):
        errors.append(f"{path}.jwksEndpointUri must be an http(s) URL, got {jwks!r}")
        return None
    issuer = raw.get("validIssuerUri", "")
    claim = raw.get("userNameClaim", "sub")
    audience = raw.get("audience", [])
    if isinstance(audience, str):
        audience = [audience]
    if not isinstance(issuer, str):
        errors.append(f"{path}.validIssuerUri must be a string")
    if not isinstance(claim, str) or not claim:
        errors.append(f"{path}.userNameClaim must be a non-empty string")
    if not isinstance(audience, list) or not all(isinstance(a, str) and a for a in audience):
        errors.append(f"{path}.audience must be a list of non-empty strings")
    unknown = set(raw) - {"jwksEndpointUri", "validIssuerUri", "audience", "userNameClaim"}
    if unknown:
        errors.append(f"{path}: unknown fields {', '.join(sorted(unknown))}")
    if (
        not isinstance(issuer, str)
        or not isinstance(claim, str)
        or not claim
        or not isinstance(audience, list)
    ):
        return None
    return OAuth(jwks, issuer, tuple(str(a) for a in audience), claim)


def shared_oauth(listeners: tuple[Any, ...], path: str, errors: list[str]) -> OAuth | None:
    """The one OAuth setting of the brokers: every oauth listener must give the same (a broker validates
    tokens one way)."""
    settings = {li.oauth for li in listeners if li.oauth is not None}
    if len(settings) > 1:
        errors.append(
            f"{path}.listeners: listeners with authentication oauth must have the same oauth settings"
        )
    return next(iter(settings)) if len(settings) == 1 else None
