"""InitProducerId: idempotent producers get an id here; transactional ones from the transaction
coordinator (an id per transactional id, its epoch bumped on every init)."""

from __future__ import annotations

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed
from .context import CLIENT_HOST, PRINCIPAL, Body
from .transactions import fenced_for

_EPOCH_MAX = 32767


async def handle_init_producer_id(broker: Broker, hdr: RequestHeader) -> Body | None:
    version = hdr.api_version
    req = decode_request(ApiKey.INIT_PRODUCER_ID, version, hdr.body)
    fields: dict[str, object] = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    pid, epoch = req.producer_id, req.producer_epoch
    if req.transactional_id is not None:
        if not allowed(broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            fields["error_code"] = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            return messages.encode_response(ApiKey.INIT_PRODUCER_ID, version, fields)
        try:
            fields["producer_id"], fields["producer_epoch"] = await broker.transactions.init_producer_id(
                req.transactional_id, req.transaction_timeout_ms, pid, epoch
            )
        except KafkaError as e:
            fields["error_code"] = fenced_for(e.code, version, 4)
    elif not _may_be_idempotent(broker):
        fields["error_code"] = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    else:
        if pid >= 0 and 0 <= epoch < _EPOCH_MAX:
            # KIP-360: an idempotent producer bumps its epoch to reset sequences after an error.
            fields.update(producer_id=pid, producer_epoch=epoch + 1)
        else:
            try:
                fields.update(producer_id=await broker.allocate_producer_id(), producer_epoch=0)
            except KafkaError as e:  # e.g. the ids could not be reserved on disk: retriable
                fields["error_code"] = e.code
    return messages.encode_response(ApiKey.INIT_PRODUCER_ID, version, fields)


def _may_be_idempotent(broker: Broker) -> bool:
    """IDEMPOTENT_WRITE on the cluster, or WRITE on some topic (Kafka 3's rule)."""
    if allowed(broker, Operation.IDEMPOTENT_WRITE, ResourceType.CLUSTER):
        return True
    return broker.authorizer.authorize_any(
        PRINCIPAL.get(), CLIENT_HOST.get(), Operation.WRITE, ResourceType.TOPIC
    )
