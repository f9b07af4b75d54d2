"""AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit (clients to the transaction or group
coordinator), WriteTxnMarkers (coordinator to partition leaders), DescribeTransactions,
ListTransactions and DescribeProducers. InitProducerId is in producer_ids.py."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from brook.broker.broker import Broker
from brook.broker.txn_markers import write_local
from brook.groups.coordinator import OFFSETS_TOPIC
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import AddPartitionsToTxnRequest, decode_request
from brook.protocol.versions import ApiKey
from brook.transactions.state import TxnState

from .authorized import Operation, ResourceType, allowed, allowed_cluster, filter_allowed
from .context import Body
from .offsets import commit_denials, offset_commits, partition_exists


def fenced_for(code: ErrorCode, version: int, first_version: int) -> ErrorCode:
    """PRODUCER_FENCED (KIP-588) is INVALID_PRODUCER_EPOCH to clients older than `first_version`."""
    if code == ErrorCode.PRODUCER_FENCED and version < first_version:
        return ErrorCode.INVALID_PRODUCER_EPOCH
    return code


async def handle_add_partitions_to_txn(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.ADD_PARTITIONS_TO_TXN, v, hdr.body)
    if v >= 4:
        return _verify_partitions_in_txn(broker, req, v)
    wanted = [(t.name, p) for t in req.v3_and_below_topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    # WRITE on the transactional id, then on each topic (Kafka's order); nothing is added if any fails.
    tid = req.v3_and_below_transactional_id
    writable = filter_allowed(broker, Operation.WRITE, ResourceType.TOPIC, {t for t, _ in wanted})
    unknown = [(t, p) for t, p in wanted if t in writable and not partition_exists(broker)(t, p)]
    if not allowed(broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, tid):
        results = dict.fromkeys(wanted, ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    elif len(writable) < len({t for t, _ in wanted}):
        for key in wanted:
            results[key] = (
                ErrorCode.TOPIC_AUTHORIZATION_FAILED
                if key[0] not in writable
                else ErrorCode.OPERATION_NOT_ATTEMPTED
            )
    elif unknown:  # as Kafka: nothing is added, the others are OPERATION_NOT_ATTEMPTED
        for key in wanted:
            results[key] = (
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if key in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            )
    else:
        code = ErrorCode.NONE
        try:
            await broker.transactions.add_partitions(
                req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                req.v3_and_below_producer_epoch, wanted,
            )  # fmt: skip
        except KafkaError as e:
            code = fenced_for(e.code, v, 2)
        results = dict.fromkeys(wanted, code)
    return messages.encode_response(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        v,
        {
            "throttle_time_ms": 0,
            "results_by_topic_v3_and_below": _topic_results(results),
        },
    )


def _topic_results(codes: dict[tuple[str, int], ErrorCode]) -> list[dict[str, Any]]:
    """AddPartitionsToTxn's per-topic results (v3 and below, and each transaction's in v4)."""
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (t, p), code in codes.items():
        by_topic[t].append({"partition_index": p, "partition_error_code": code})
    return [{"name": t, "results_by_partition": ps} for t, ps in by_topic.items()]


def _verify_partitions_in_txn(broker: Broker, req: AddPartitionsToTxnRequest, v: int) -> Body:
    """AddPartitionsToTxn v4, broker to broker (KIP-890, brook.broker.txn_verification): are the
    partitions in each transaction? Only verification: Brook offers no transaction version 2, whose
    leaders add partitions themselves."""
    results: list[dict[str, Any]] = []
    top = ErrorCode.NONE
    if not allowed_cluster(broker, Operation.CLUSTER_ACTION):
        top = ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    for txn in req.transactions if top == ErrorCode.NONE else ():
        parts = [(t.name, p) for t in txn.topics for p in t.partitions]
        if not txn.verify_only:
            codes = dict.fromkeys(parts, ErrorCode.INVALID_REQUEST)
        else:
            try:
                codes = broker.transactions.verify(
                    txn.transactional_id, txn.producer_id, txn.producer_epoch, parts
                )
            except KafkaError as e:
                codes = dict.fromkeys(parts, e.code)
        results.append({"transactional_id": txn.transactional_id, "topic_results": _topic_results(codes)})
    return messages.encode_response(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        v,
        {"throttle_time_ms": 0, "error_code": top, "results_by_transaction": results},
    )


async def handle_add_offsets_to_txn(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.ADD_OFFSETS_TO_TXN, v, hdr.body)
    code = ErrorCode.NONE
    try:
        if not allowed(broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        if not allowed(broker, Operation.READ, ResourceType.GROUP, req.group_id):
            raise KafkaError(ErrorCode.GROUP_AUTHORIZATION_FAILED)
        await broker.groups.ensure_offsets_topic()
        partition = (OFFSETS_TOPIC, broker.groups.partition_for(req.group_id))
        await broker.transactions.add_partitions(
            req.transactional_id, req.producer_id, req.producer_epoch, [partition]
        )
    except KafkaError as e:
        code = fenced_for(e.code, v, 2)
    return messages.encode_response(ApiKey.ADD_OFFSETS_TO_TXN, v, {"throttle_time_ms": 0, "error_code": code})


async def handle_end_txn(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.END_TXN, v, hdr.body)
    code = ErrorCode.NONE
    try:
        if not allowed(broker, Operation.WRITE, ResourceType.TRANSACTIONAL_ID, req.transactional_id):
            raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        await broker.transactions.end_txn(
            req.transactional_id, req.producer_id, req.producer_epoch, req.committed
        )
    except KafkaError as e:
        code = fenced_for(e.code, v, 2)
    return messages.encode_response(ApiKey.END_TXN, v, {"throttle_time_ms": 0, "error_code": code})


async def handle_txn_offset_commit(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.TXN_OFFSET_COMMIT, v, hdr.body)
    commits = offset_commits(req)
    results, allowed_commits = commit_denials(broker, req.group_id, commits)
    if allowed_commits is not None:
        results.update(
            await broker.groups.commit_txn_offsets(
                req.group_id,
                req.producer_id,
                req.producer_epoch,
                req.generation_id if v >= 3 else -1,
                req.member_id if v >= 3 else "",
                req.group_instance_id,
                allowed_commits,
                partition_exists(broker),
            )
        )
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in commits:
        code = results[(c.topic, c.partition)]
        if code == ErrorCode.INVALID_PRODUCER_EPOCH and v >= 3:
            code = ErrorCode.PRODUCER_FENCED
        by_topic[c.topic].append({"partition_index": c.partition, "error_code": code})
    return messages.encode_response(
        ApiKey.TXN_OFFSET_COMMIT,
        v,
        {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
    )


async def handle_write_txn_markers(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.WRITE_TXN_MARKERS, v, hdr.body)
    out: list[dict[str, Any]] = []
    may = allowed_cluster(broker, Operation.CLUSTER_ACTION)  # only brokers write markers
    for m in req.markers:
        parts = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes = (
            await write_local(
                broker, m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch, parts
            )
            if may
            else dict.fromkeys(parts, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        )
        by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
        for (t, p), code in codes.items():
            by_topic[t].append({"partition_index": p, "error_code": code})
        out.append(
            {
                "producer_id": m.producer_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
            }
        )
    return messages.encode_response(ApiKey.WRITE_TXN_MARKERS, v, {"markers": out})


async def handle_describe_transactions(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_TRANSACTIONS, v, hdr.body)
    states: list[dict[str, Any]] = []
    for tid in req.transactional_ids:
        # An error answers the schema's zeros, as Kafka's coordinator does.
        entry: dict[str, Any] = {"transactional_id": tid, "error_code": 0, "transaction_state": "",
                                 "transaction_timeout_ms": 0, "transaction_start_time_ms": 0,
                                 "producer_id": 0, "producer_epoch": 0, "topics": []}  # fmt: skip
        try:
            if not allowed(broker, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, tid):
                raise KafkaError(ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            meta = broker.transactions.describe(tid)
        except KafkaError as e:
            entry["error_code"] = e.code
        else:
            by_topic: dict[str, list[int]] = defaultdict(list)
            for t, p in sorted(meta.partitions):
                by_topic[t].append(p)
            entry.update(
                transaction_state=meta.state.kafka_name,
                transaction_timeout_ms=meta.timeout_ms,
                transaction_start_time_ms=meta.start_ms,
                producer_id=meta.producer_id,
                producer_epoch=meta.producer_epoch,
                topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()],
            )
        states.append(entry)
    return messages.encode_response(
        ApiKey.DESCRIBE_TRANSACTIONS, v, {"throttle_time_ms": 0, "transaction_states": states}
    )


async def handle_list_transactions(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.LIST_TRANSACTIONS, v, hdr.body)
    wanted_states = set(req.state_filters or [])
    wanted_pids = set(req.producer_id_filters or [])
    min_duration = req.duration_filter
    now = broker.transactions.now_ms()
    listed: list[dict[str, Any]] = []
    for meta in broker.transactions.list():
        name = meta.state.kafka_name
        if wanted_states and name not in wanted_states:
            continue
        if wanted_pids and meta.producer_id not in wanted_pids:
            continue
        if min_duration >= 0 and (meta.state is not TxnState.ONGOING or now - meta.start_ms < min_duration):
            continue
        if not allowed(broker, Operation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, meta.transactional_id):
            continue
        listed.append({"transactional_id": meta.transactional_id, "producer_id": meta.producer_id,
                       "transaction_state": name})  # fmt: skip
    return messages.encode_response(
        ApiKey.LIST_TRANSACTIONS,
        v,
        {"throttle_time_ms": 0, "error_code": 0, "unknown_state_filters": [], "transaction_states": listed},
    )


async def handle_describe_producers(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.DESCRIBE_PRODUCERS, v, hdr.body)
    topics: list[dict[str, Any]] = []
    for t in req.topics:
        parts: list[dict[str, Any]] = []
        for index in t.partition_indexes:
            entry: dict[str, Any] = {"partition_index": index, "error_code": 0, "error_message": None,
                                     "active_producers": []}  # fmt: skip
            try:
                if not allowed(broker, Operation.READ, ResourceType.TOPIC, t.name):
                    raise KafkaError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "READ on the topic denied")
                # Any local replica answers, a follower too (it keeps producer state from what it
                # fetches), as Kafka does: kafka-transactions.sh find-hanging asks one broker for all
                # of its partitions.
                p = broker.replicas.partition(t.name, index)
                ongoing = p.producers.ongoing()
                entry["active_producers"] = [
                    {
                        "producer_id": pid,
                        "producer_epoch": e.epoch,
                        "last_sequence": e.last_seq,
                        "last_timestamp": e.last_timestamp,
                        "coordinator_epoch": e.coordinator_epoch,
                        "current_txn_start_offset": ongoing.get(pid, -1),
                    }
                    for pid, e in sorted(p.producers.entries().items())
                ]
            except KafkaError as e:
                entry.update(error_code=e.code, error_message=e.message)
            parts.append(entry)
        topics.append({"name": t.name, "partitions": parts})
    return messages.encode_response(ApiKey.DESCRIBE_PRODUCERS, v, {"throttle_time_ms": 0, "topics": topics})
