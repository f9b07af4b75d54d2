"""ElectLeaders (KIP-460): move leadership back to the preferred replica (the first of the
assignment), as `kafka-leader-election.sh --election-type preferred` does.

Brook's controller carries it out: the request hands the partition to the reassignment machinery
with its own replica list, whose last step makes the first replica leader once it is alive and in
sync, and waits (up to timeout_ms) to see it happen. Per partition: ELECTION_NOT_NEEDED when the
preferred replica already leads, PREFERRED_LEADER_NOT_AVAILABLE when it is down or out of sync,
UNKNOWN_TOPIC_OR_PARTITION (a single broker is every partition's preferred leader: never more than
ELECTION_NOT_NEEDED). Unclean elections are what `unclean.leader.election.enable` does
automatically; asked for explicitly they are answered ELECTION_NOT_NEEDED while a leader exists and
ELIGIBLE_LEADERS_NOT_AVAILABLE otherwise (not carried out on request yet).
"""

from __future__ import annotations

import asyncio
from typing import Any

from brook.broker.broker import Broker
from brook.protocol import messages
from brook.protocol.errors import ErrorCode, KafkaError
from brook.protocol.frames import RequestHeader
from brook.protocol.requests import decode_request
from brook.protocol.versions import ApiKey

from .authorized import Operation, allowed_cluster
from .context import Body

PREFERRED, UNCLEAN = 0, 1


async def handle_elect_leaders(broker: Broker, hdr: RequestHeader) -> Body | None:
    v = hdr.api_version
    req = decode_request(ApiKey.ELECT_LEADERS, v, hdr.body)
    kind = int(req.election_type)
    if req.topic_partitions is None:
        wanted = [(m.name, i) for m in broker.replicas.topics().values() for i in range(m.partitions)]
    else:
        wanted = [(t.topic, int(i)) for t in req.topic_partitions for i in t.partitions]
    live = {b.node_id for b in broker.brokers()}
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    if not allowed_cluster(broker, Operation.ALTER):  # v0 has no top-level error: each partition says it
        results = {w: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "ALTER on the cluster denied") for w in wanted}
        wanted = []
    started: list[tuple[str, int, int]] = []
    for topic, index in wanted:
        try:
            leader, _, replicas, isr = broker.partition_state(topic, index)
        except KafkaError as e:
            results[(topic, index)] = (e.code, e.message)
            continue
        preferred = replicas[0] if replicas else -1
        if kind == UNCLEAN:
            if leader >= 0:
                results[(topic, index)] = (ErrorCode.ELECTION_NOT_NEEDED, "the partition has a leader")
            else:
                results[(topic, index)] = (
                    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
                    "no in-sync replica is alive (unclean elections follow unclean.leader.election.enable)",
                )
        elif leader == preferred:
            results[(topic, index)] = (ErrorCode.ELECTION_NOT_NEEDED, None)
        elif preferred not in live or preferred not in isr:
            results[(topic, index)] = (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
                f"the preferred leader {preferred} is not alive and in sync",
            )
        else:
            try:
                await broker.metadata.reassign(topic, index, list(replicas))
                started.append((topic, index, preferred))
            except KafkaError as e:
                results[(topic, index)] = (e.code, e.message)
    deadline = asyncio.get_running_loop().time() + max(int(req.timeout_ms), 0) / 1000
    for topic, index, preferred in started:
        while broker.partition_state(topic, index).leader != preferred:
            if asyncio.get_running_loop().time() >= deadline:
                results[(topic, index)] = (ErrorCode.REQUEST_TIMED_OUT, "the election did not finish in time")
                break
            await asyncio.sleep(0.05)
        else:
            results[(topic, index)] = (ErrorCode.NONE, None)
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, index), (code, message) in results.items():
        by_topic.setdefault(topic, []).append(
            {"partition_id": index, "error_code": code, "error_message": message}
        )
    return messages.encode_response(
        ApiKey.ELECT_LEADERS,
        v,
        {
            "throttle_time_ms": 0,
            "error_code": 0,
            "replica_election_results": [
                {"topic": t, "partition_result": parts} for t, parts in sorted(by_topic.items())
            ],
        },
    )
