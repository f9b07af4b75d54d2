"""Brook's sans-I/O Kafka wire codec: bytes in, Python objects out, and back.

Hot paths (Produce, Fetch, ApiVersions, headers) are hand-written with struct; the control plane
goes through kafka-python's generated classes behind `messages` (imported by who uses it: importing
kafka-python's classes takes 0.2 s, which a `brook topic` command does not need).
"""

from brook.protocol.api_versions import encode_api_versions_response, unsupported_api_versions_response
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.fetch import (
    FetchPartition,
    FetchPartitionResult,
    FetchRequest,
    FetchTopic,
    FetchTopicResult,
    ForgottenTopic,
    RecordsRef,
    chunks_size,
    decode_fetch_request,
    encode_fetch_response,
)
from brook.protocol.frames import RequestHeader, parse_request, response_prefix
from brook.protocol.primitives import CodecError, Reader, Writer
from brook.protocol.produce import (
    PartitionProduceResult,
    ProducePartition,
    ProduceRequest,
    ProduceTopic,
    decode_produce_request,
    encode_produce_response,
)
from brook.protocol.versions import (
    ALL_VERSIONS,
    FLEXIBLE_FROM,
    ApiKey,
    advertised,
    request_is_flexible,
    response_is_flexible,
    supports,
)

__all__ = [
    "ALL_VERSIONS",
    "FLEXIBLE_FROM",
    "ApiKey",
    "CodecError",
    "ErrorCode",
    "FetchPartition",
    "FetchPartitionResult",
    "FetchRequest",
    "FetchTopic",
    "FetchTopicResult",
    "ForgottenTopic",
    "KafkaError",
    "PartitionProduceResult",
    "ProducePartition",
    "ProduceRequest",
    "ProduceTopic",
    "Reader",
    "RecordsRef",
    "RequestHeader",
    "Writer",
    "advertised",
    "chunks_size",
    "decode_fetch_request",
    "decode_produce_request",
    "encode_api_versions_response",
    "encode_fetch_response",
    "encode_produce_response",
    "parse_request",
    "request_is_flexible",
    "response_is_flexible",
    "response_prefix",
    "supports",
    "unsupported_api_versions_response",
]
