"""The one wrapper around kafka-python's generated message classes (control-plane APIs).

kafka-python (pinned 3.0.*) generates request/response classes from Apache Kafka's JSON specs. It is
untyped, so `Any` stays inside this module: handlers get a decoded request object and hand back a
plain dict.

Decoded requests (`decode_request`): attribute access with the JSON field names in snake_case;
arrays of structs are lists of objects, arrays of primitives are lists, uuids are uuid.UUID (None for
the all-zero uuid), fields outside the request's version read as the schema default:

    req = decode_request(ApiKey.METADATA, 12, body)
    req.topics            # None (all topics) or [obj, ...]
    req.topics[0].name    # str | None; req.topics[0].topic_id: uuid.UUID | None
    req.allow_auto_topic_creation

Responses (`encode_response`): plain nested dicts and lists keyed by the same snake_case names:

    encode_response(ApiKey.METADATA, 12, {
        "brokers": [{"node_id": 0, "host": "127.0.0.1", "port": 9092, "rack": None}],
        "cluster_id": "brook", "controller_id": 0,
        "topics": [{"error_code": 0, "name": "t", "topic_id": b"\\x01" * 16, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": 0, "leader_id": 0,
                                    "leader_epoch": 0, "replica_nodes": [0], "isr_nodes": [0]}]}],
    })

- A missing field takes the schema default; a field outside the version is silently dropped, so a
  handler can fill one dict for every version. An unknown name raises ValueError (typos).
- uuid fields take bytes(16), uuid.UUID or None (zero uuid). Bitfields (authorized_operations) take a
  set of bit numbers, an int, or None / -2147483648 ("not requested").
- Tagged fields equal to their default are never written (kafka-python compares with the default).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

import kafka.protocol.admin as _admin
import kafka.protocol.consumer as _consumer
import kafka.protocol.metadata as _metadata
import kafka.protocol.producer as _producer
import kafka.protocol.sasl as _sasl
from kafka.protocol.api_message import ApiMessage
from kafka.protocol.schemas.fields.codecs import BitField

from brook.protocol import primitives as _specs_package
from brook.protocol.primitives import CodecError

__all__ = ["decode_request", "encode_response", "request_class", "response_class"]


# Messages kafka-python 3.0 lacks, generated from Apache Kafka's own JSON specs shipped next to this
# module (taken from kafka-clients 4.4.0; Apache-2.0, their license header kept): KIP-848's APIs.
class ConsumerGroupHeartbeatRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ConsumerGroupHeartbeatResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ConsumerGroupDescribeRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ConsumerGroupDescribeResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


# KIP-932's share group APIs (76-79).
class ShareGroupHeartbeatRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareGroupHeartbeatResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareGroupDescribeRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareGroupDescribeResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareFetchRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareFetchResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareAcknowledgeRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ShareAcknowledgeResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


# KIP-932's admin APIs (90-92).
class DescribeShareGroupOffsetsRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class DescribeShareGroupOffsetsResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class AlterShareGroupOffsetsRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class AlterShareGroupOffsetsResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class DeleteShareGroupOffsetsRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class DeleteShareGroupOffsetsResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


# KIP-932's share-state RPCs, between brokers: a group coordinator asks a partition's leader, which
# holds its share-partition's state (handlers/share_state.py).
class InitializeShareGroupStateRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class InitializeShareGroupStateResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class DeleteShareGroupStateRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class DeleteShareGroupStateResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ReadShareGroupStateSummaryRequest(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


class ReadShareGroupStateSummaryResponse(ApiMessage, load_json=_specs_package): ...  # type: ignore[misc,call-arg]


_SHIPPED = (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
)


def _collect() -> tuple[dict[int, Any], dict[int, Any]]:
    requests: dict[int, Any] = {}
    responses: dict[int, Any] = {}
    found: list[Any] = [
        getattr(m, n) for m in (_admin, _consumer, _metadata, _producer, _sasl) for n in m.__all__
    ]
    for obj in [*found, *_SHIPPED]:
        if isinstance(obj, type) and issubclass(obj, ApiMessage) and obj is not ApiMessage:
            cls: Any = obj
            (requests if cls.is_request() else responses)[cls.API_KEY] = cls
    return requests, responses


_REQUESTS, _RESPONSES = _collect()


def request_class(api_key: int) -> Any:
    """kafka-python's request class for `api_key` (for tests and tools); KeyError if unknown."""
    return _REQUESTS[api_key]


def response_class(api_key: int) -> Any:
    return _RESPONSES[api_key]


def decode_request(api_key: int, version: int, body: memoryview) -> Any:
    """Decode a request body; CodecError on any failure, including fields that run past the end and
    null where the schema does not allow it (kafka-python's decoder reads length -1 as None anyway;
    Kafka refuses such a request as malformed and closes the connection).

    Versions below kafka-python's `validVersions` but present in its field ranges (e.g.
    OffsetForLeaderEpoch 0-1) decode too: the generated codec only looks at field versions.
    """
    req = _decode(_REQUESTS, api_key, version, body)
    null = _null_field(req, _null_plan(_REQUESTS[api_key]._struct, version))
    if null is not None:
        raise CodecError(f"malformed {type(req).__name__} v{version}: null {null}, not nullable")
    return req


# Per struct and version: (attribute, nullable, the plan of its elements or members if a struct).
_Plan = tuple[tuple[str, bool, "_Plan | None"], ...]
_PLANS: dict[tuple[int, int], _Plan] = {}


def _null_plan(struct: Any, version: int) -> _Plan:
    key = (id(struct), version)
    plan = _PLANS.get(key)
    if plan is None:
        plan = tuple(
            (
                name,
                bool(f.nullable_for_version_q(version)),
                _null_plan(f, version) if f.is_struct() or f.is_struct_array() else None,
            )
            for name, f in struct.fields.items()
            if f.for_version_q(version) and not f.tagged_field_q(version) and _may_be_null(f)
        )
        # Nothing to check inside: only the field's own null (if it may not be null) is checked.
        plan = tuple((n, nullable, inner or None) for n, nullable, inner in plan)
        plan = tuple(entry for entry in plan if not (entry[1] and entry[2] is None))
        _PLANS[key] = plan
    return plan


def _may_be_null(f: Any) -> bool:
    """Strings, bytes, records, arrays and structs decode null as None (numbers and bools cannot be
    null; the all-zero uuid decodes as None: a value, not a null)."""
    return bool(f.is_array() or f.is_struct() or f._type_str in ("string", "bytes", "records"))


def _null_field(obj: Any, plan: _Plan) -> str | None:
    """The first field (dotted path) that is null but may not be, or None."""
    for name, nullable, inner in plan:
        value = getattr(obj, name)
        if value is None:
            if not nullable:
                return name
            continue
        if inner is not None:
            for item in value if isinstance(value, list) else (value,):
                null = _null_field(item, inner)
                if null is not None:
                    return f"{name}.{null}"
    return None


def decode_response(api_key: int, version: int, body: memoryview) -> Any:
    """Decode a response body (a broker acting as a client of another broker); CodecError on failure."""
    return _decode(_RESPONSES, api_key, version, body)


def encode_request(api_key: int, version: int, fields: Mapping[str, Any]) -> bytes:
    """Encode a request BODY (no size, no header) from plain dicts, like encode_response."""
    return _encode(_REQUESTS, api_key, version, fields)


def _decode(table: dict[int, Any], api_key: int, version: int, body: memoryview) -> Any:
    cls = table.get(api_key)
    if cls is None:
        raise CodecError(f"no decoder for API key {api_key}")
    if not 0 <= version <= cls.max_version:
        raise CodecError(f"{cls.__name__} v{version} is not supported")
    flexible = cls.flexible_version_q(version)
    try:
        # The compiled decoder (what ApiMessage.decode uses) also returns the end position, which
        # lets us reject trailing garbage and strings whose length ran past the end.
        decode = cls._struct.compiled_decode_from(version, compact=flexible, tagged=flexible, data_class=cls)
        obj, pos = decode(body, 0)
    except CodecError:
        raise
    except Exception as e:  # the generated code raises IndexError, struct.error, ValueError, ...
        raise CodecError(f"malformed {cls.__name__} v{version}: {type(e).__name__}: {e}") from None
    if pos > len(body):
        raise CodecError(
            f"malformed {cls.__name__} v{version}: fields run {pos - len(body)} bytes past the end"
        )
    # Trailing bytes are ignored, as Kafka does: librdkafka 2.16 sends three after an all-topics
    # Metadata v12 body (00000000 010000), and real brokers answer it.
    # Decoded objects lack these slots; set them so the object can be printed or re-encoded.
    obj._header = None
    obj._min_version = None
    obj._max_version = None
    return obj


def encode_response(api_key: int, version: int, fields: Mapping[str, Any]) -> bytes:
    """Encode a response BODY (no size, no header) from plain dicts (see the module docstring)."""
    return _encode(_RESPONSES, api_key, version, fields)


def error_response(api_key: int, version: int, error_code: int) -> bytes:
    """A response BODY with every field at its default and `error_code` at the top level where the
    schema has one (the answer Kafka builds with a request's getErrorResponse)."""
    fields = {"error_code": error_code} if "error_code" in _RESPONSES[api_key]._struct.fields else {}
    return encode_response(api_key, version, fields)


def _encode(table: dict[int, Any], api_key: int, version: int, fields: Mapping[str, Any]) -> bytes:
    cls = table.get(api_key)
    if cls is None:
        raise ValueError(f"no encoder for API key {api_key}")
    if not 0 <= version <= cls.max_version:
        raise ValueError(f"{cls.__name__} v{version} is not supported")
    obj = cls(version=version, **_kwargs(cls._struct, version, fields))
    return bytes(obj.encode(version=version))


def _kwargs(struct_field: Any, version: int, values: Mapping[str, Any]) -> dict[str, Any]:
    known = struct_field.fields  # snake_case name -> field
    out: dict[str, Any] = {}
    for name, value in values.items():
        f = known.get(name)
        if f is None:
            raise ValueError(f"{struct_field.name} has no field {name!r}; fields: {sorted(known)}")
        if f.for_version_q(version):
            out[name] = _convert(f, version, value)
    # A nested (non-array, non-null-default) struct left out would have no usable default.
    for name, f in known.items():
        if (
            name not in out
            and f.is_struct()
            and not f.tagged_field_q(version)
            and f.for_version_q(version)
            and f._json.get("default") != "null"
        ):
            out[name] = _build(f, version, {})
    return out


def _build(struct_field: Any, version: int, values: Mapping[str, Any]) -> Any:
    return struct_field.data_class(version=version, **_kwargs(struct_field, version, values))


def _convert(f: Any, version: int, value: Any) -> Any:
    if value is None:
        return None
    if f.is_struct_array():
        inner = f.array_of
        return [_build(inner, version, v) if isinstance(v, Mapping) else v for v in value]
    if f.is_struct():
        return _build(f, version, value) if isinstance(value, Mapping) else value
    type_str = f.type_str
    if type_str == "uuid":
        return _uuid(value)
    if type_str == "[]uuid":
        return [_uuid(v) for v in value]
    if type_str == "bitfield" and isinstance(value, int):
        return None if value == -(2**31) else BitField.from_32_bit_field(value)
    return value


def _uuid(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return uuid.UUID(bytes=bytes(value))
    return value
