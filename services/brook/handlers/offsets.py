"""OffsetCommit, OffsetFetch and OffsetDelete: committed positions of consumer groups."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from brook.broker.broker import Broker
from brook.groups.ports import OffsetCommit
from brook.protocol import messages
from brook.protocol.errors import ErrorCode
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import OffsetCommitRequest, TxnOffsetCommitRequest, decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, ResourceType, allowed, filter_allowed
from .context import Body


def partition_exists(broker: Broker) -> Any:
    def check(topic: str, partition: int) -> bool:
        meta = broker.replicas.topic(topic)
        return meta is not None and 0 <= partition < meta.partitions

    return check


def offset_commits(req: OffsetCommitRequest | TxnOffsetCommitRequest) -> list[OffsetCommit]:
    """The offsets of an OffsetCommit or TxnOffsetCommit request."""
    return [
        OffsetCommit(
            t.name,
            p.partition_index,
            p.committed_offset,
            p.committed_leader_epoch,
            p.committed_metadata,
        )
        for t in req.topics
        for p in t.partitions
    ]


def commit_denials(
    broker: Broker, group_id: str, commits: list[OffsetCommit]
) -> tuple[dict[tuple[str, int], ErrorCode], list[OffsetCommit] | None]:
    """READ on the group, then READ on each topic (Kafka's order, for OffsetCommit and TxnOffsetCommit):
    the refused commits' errors, and the commits to make (None: the group itself is refused)."""
    if not allowed(broker, Operation.READ, ResourceType.GROUP, group_id):
        return {(c.topic, c.partition): ErrorCode.GROUP_AUTHORIZATION_FAILED for c in commits}, None
    readable = filter_allowed(broker, Operation.READ, ResourceType.TOPIC, {c.topic for c in commits})
    denied = {
        (c.topic, c.partition): ErrorCode.TOPIC_AUTHORIZATION_FAILED
        for c in commits
        if c.topic not in readable
    }
    return denied, [c for c in commits if c.topic in readable]


async def handle_offset_commit(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.OFFSET_COMMIT, v, hdr.body)
    commits = offset_commits(req)
    results, allowed_commits = commit_denials(broker, req.group_id, commits)
    if allowed_commits is not None:
        results.update(
            await broker.groups.commit_offsets(
                req.group_id,
                req.generation_id_or_member_epoch,
                req.member_id,
                req.group_instance_id,
                allowed_commits,
                partition_exists(broker),
                api_version=v,
            )
        )
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in commits:
        by_topic[c.topic].append(
            {"partition_index": c.partition, "error_code": results[(c.topic, c.partition)]}
        )
    return messages.encode_response(
        ApiKey.OFFSET_COMMIT,
        v,
        {"throttle_time_ms": 0, "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
    )


def _fetch_group(
    broker: Broker,
    group_id: str,
    topics: Any,
    require_stable: bool = False,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, list[dict[str, Any]]]:
    wanted = None if topics is None else [(t.name, list(t.partition_indexes)) for t in topics]
    rows: list[Any] = []
    if not allowed(broker, Operation.DESCRIBE, ResourceType.GROUP, group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        code, rows = broker.groups.fetch_offsets(group_id, wanted, *member)
    if code != ErrorCode.NONE and wanted is not None:
        rows = [(t, p, None) for t, ps in wanted for p in ps]
    # Topics the principal may not describe: refused when named, left out when all are asked for.
    visible = filter_allowed(broker, Operation.DESCRIBE, ResourceType.TOPIC, {t for t, _, _ in rows})
    # KIP-447: offsets a transaction committed whose marker has not arrived yet are unstable for
    # clients that ask for stable offsets (they retry).
    unstable = broker.groups.pending_txn_partitions(group_id) if require_stable else set()
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t, p, value in rows:
        if t not in visible:
            if wanted is not None:
                by_topic[t].append(
                    {
                        "partition_index": p,
                        "committed_offset": -1,
                        "error_code": ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    }
                )
            continue
        if (t, p) in unstable:
            value = None
        by_topic[t].append(
            {
                "partition_index": p,
                "committed_offset": value.offset if value else -1,
                "committed_leader_epoch": value.leader_epoch if value else -1,
                "metadata": value.metadata if value else "",
                "error_code": ErrorCode.UNSTABLE_OFFSET_COMMIT if (t, p) in unstable else code,
            }
        )
    return code, [{"name": t, "partitions": ps} for t, ps in by_topic.items()]


async def handle_offset_fetch(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.OFFSET_FETCH, v, hdr.body)
    if v >= 8:
        groups = []
        for g in req.groups:
            # v9 (KIP-848) names the member: a consumer group checks its epoch.
            member = (getattr(g, "member_id", None), getattr(g, "member_epoch", -1))
            code, topics = _fetch_group(broker, g.group_id, g.topics, bool(req.require_stable), member)
            groups.append({"group_id": g.group_id, "topics": topics, "error_code": code})
        return messages.encode_response(ApiKey.OFFSET_FETCH, v, {"throttle_time_ms": 0, "groups": groups})
    code, topics = _fetch_group(broker, req.group_id, req.topics, v >= 7 and bool(req.require_stable))
    return messages.encode_response(
        ApiKey.OFFSET_FETCH, v, {"throttle_time_ms": 0, "topics": topics, "error_code": code}
    )


async def handle_offset_delete(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.OFFSET_DELETE, v, hdr.body)
    wanted = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
    results: dict[tuple[str, int], ErrorCode] = {}
    if not allowed(broker, Operation.DELETE, ResourceType.GROUP, req.group_id):
        code = ErrorCode.GROUP_AUTHORIZATION_FAILED
    else:
        readable = filter_allowed(broker, Operation.READ, ResourceType.TOPIC, {t for t, _ in wanted})
        code, results = await broker.groups.delete_offsets(
            req.group_id, [w for w in wanted if w[0] in readable]
        )
        results.update({w: ErrorCode.TOPIC_AUTHORIZATION_FAILED for w in wanted if w[0] not in readable})
    by_topic: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for (t, p), c in results.items():
        by_topic[t].append({"partition_index": p, "error_code": c})
    return messages.encode_response(
        ApiKey.OFFSET_DELETE,
        v,
        {
            "error_code": code,
            "throttle_time_ms": 0,
            "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
        },
    )
