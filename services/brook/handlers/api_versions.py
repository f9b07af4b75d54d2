"""ApiVersions: the versions this broker advertises (always answered with a v0 response header)."""

from __future__ import annotations

from brook.broker.broker import Broker
from brook.protocol.api_versions import encode_api_versions_response
from brook.protocol.errors import ErrorCode
from brook.protocol.frames import RequestHeader

from .context import Body


def make_api_versions_handler(advertised: dict[int, tuple[int, int]]):  # type: ignore[no-untyped-def]
    async def handle_api_versions(broker: Broker, hdr: RequestHeader) -> Body | None:
        lo, hi = advertised[18]
        if not lo <= hdr.api_version <= hi:
            # Kafka's answer to a too-new client: a v0 body saying which versions exist.
            return encode_api_versions_response(0, ErrorCode.UNSUPPORTED_VERSION, advertised)
        return encode_api_versions_response(hdr.api_version, 0, advertised)

    return handle_api_versions
