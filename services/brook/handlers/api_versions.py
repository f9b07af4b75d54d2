"""ApiVersions: the versions this broker advertises (always answered with a v0 response header)."""

from __future__ import annotations

import re

from brook.broker.broker import Broker
from brook.protocol.api_versions import encode_api_versions_response, unsupported_api_versions_response
from brook.protocol.errors import ErrorCode
from brook.protocol.frames import RequestHeader
from brook.protocol.primitives import CodecError
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .context import Body

# Kafka's ApiVersionsRequest.isValid (v3+, KIP-511): what client_software_name and _version may be.
_SOFTWARE = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")


def make_api_versions_handler(advertised: dict[int, tuple[int, int]]):  # type: ignore[no-untyped-def]
    async def handle_api_versions(broker: Broker, hdr: RequestHeader) -> Body | None:
        lo, hi = advertised[ApiKey.API_VERSIONS]
        if not lo <= hdr.api_version <= hi:
            # Kafka's answer to a too-new client: a v0 body naming ApiVersions' own versions only,
            # so the client retries with one of them.
            return unsupported_api_versions_response({ApiKey.API_VERSIONS: (lo, hi)})
        if hdr.api_version >= 3 and not _valid_software(hdr):
            return encode_api_versions_response(hdr.api_version, ErrorCode.INVALID_REQUEST, {})
        return encode_api_versions_response(hdr.api_version, 0, advertised)

    return handle_api_versions


def _valid_software(hdr: RequestHeader) -> bool:
    try:
        req = decode_request(ApiKey.API_VERSIONS, hdr.api_version, hdr.body)
    except CodecError:
        return False
    name, version = req.client_software_name or "", req.client_software_version or ""
    return bool(_SOFTWARE.fullmatch(name) and _SOFTWARE.fullmatch(version))
