"""Transactions on a 3-broker cluster: the transaction coordinator's broker is killed (kill -9) while a
transaction is open, and between PrepareCommit and the markers of a commit it acknowledged; the new
coordinator (the new leader of the `__transaction_state` partition) loads the state and finishes both.
Nothing committed is lost, nothing aborted shows."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin.transactions import DescribeTransactionsRequest
from kafka.protocol.metadata import FindCoordinatorRequest

from brook.protocol.errors import ErrorCode
from brook.protocol.frames import request_frame
from brook.protocol.messages import decode_response, encode_request
from brook.protocol.primitives import java_string_hash
from brook.protocol.versions import ApiKey, response_is_flexible
from tests.integration.test_cluster import create
from tests.integration.test_transactions import read_all
from tests.support.cluster import Cluster, eventually, wait_for_leaders
from tests.support.differential import Wire
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow

TXN_CLUSTER_ARGS = [
    "--transaction-state-log-num-partitions",
    "3",
    "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
    "500",
    # Two replicas: the third broker can be held (SIGSTOP) without stalling the log's commits.
    "--transaction-state-log-replication-factor",
    "2",
]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    c = Cluster(tmp_path, extra_args=TXN_CLUSTER_ARGS).start()
    try:
        yield c
    finally:
        c.stop()


def coordinator(c: Cluster, txn_id: str) -> int:
    """The node id FindCoordinator (key type 1: transaction) names, asked of a live broker."""

    def ask() -> tuple[int] | None:  # a tuple: node 0 is an answer, not a falsy "not yet"
        with RawClient(c.bootstrap.split(",")[0]) as client:
            resp = client.request(FindCoordinatorRequest(key=txn_id, key_type=1), 2)
        return (resp.node_id,) if resp.error_code == 0 else None

    node: tuple[int] = eventually(ask, 60, f"a coordinator for {txn_id}")
    return node[0]


def txn_log_replicas(c: Cluster, txn_id: str) -> set[int]:
    """The replicas of the `__transaction_state` partition that holds `txn_id`, once all are in its ISR
    (a broker just restarted may not be yet: killing the only in-sync one would leave no leader)."""
    partition = abs(java_string_hash(txn_id)) % 3  # --transaction-state-log-num-partitions

    def in_sync() -> set[int] | None:
        md = AdminClient({"bootstrap.servers": c.bootstrap}).list_topics("__transaction_state", timeout=10)
        p = md.topics["__transaction_state"].partitions[partition]
        return set(p.replicas) if set(p.isrs) == set(p.replicas) else None

    replicas: set[int] = eventually(in_sync, 60, "the transaction log's replicas all in sync")
    return replicas


def create_on(c: Cluster, topic: str, node: int) -> None:
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[node]])])[topic].result(20)
    wait_for_leaders(c.bootstrap, topic)


def init_producer(c: Cluster, coord: int, txn: str) -> tuple[int, int]:
    """InitProducerId for `txn` at its coordinator: (producer id, epoch)."""

    def init() -> tuple[int, int] | None:
        with Wire(c.broker(coord).bootstrap) as w:
            r = w.send(
                ApiKey.INIT_PRODUCER_ID,
                4,
                {
                    "transactional_id": txn,
                    "transaction_timeout_ms": 60_000,
                    "producer_id": -1,
                    "producer_epoch": -1,
                },
                normalize=False,
            )
        assert isinstance(r, dict)
        return (r["producer_id"], r["producer_epoch"]) if r["error_code"] == 0 else None

    answer: tuple[int, int] = eventually(init, 60, "an initialized transactional producer")
    return answer


def add_partition(c: Cluster, coord: int, txn: str, pid: int, epoch: int, topic: str) -> None:
    """AddPartitionsToTxn v3 (as a client before KIP-890 part 2) for partition 0 of `topic`."""
    with Wire(c.broker(coord).bootstrap) as w:
        added = w.send(
            ApiKey.ADD_PARTITIONS_TO_TXN,
            3,
            {
                "v3_and_below_transactional_id": txn,
                "v3_and_below_producer_id": pid,
                "v3_and_below_producer_epoch": epoch,
                "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
            },
            normalize=False,
        )
    assert isinstance(added, dict)
    assert added["results_by_topic_v3_and_below"][0]["results_by_partition"][0]["partition_error_code"] == 0


def state(c: Cluster, node: int, txn_id: str) -> str:
    """The transaction's state as its coordinator `node` describes it (raw: no other broker asked)."""
    with RawClient(c.broker(node).bootstrap) as client:
        resp = client.request(DescribeTransactionsRequest(transactional_ids=[txn_id]), 0)
    (txn,) = resp.transaction_states
    assert txn.error_code == 0, txn
    return str(txn.transaction_state)


def test_coordinator_kill_9_during_and_after_commit(cluster: Cluster) -> None:
    create(cluster, "ha.data", 2)
    p = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "transactional.id": "t-ha",
            "transaction.timeout.ms": 120_000,
        }
    )
    p.init_transactions(60)
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.data", f"one-{i}".encode(), partition=i % 2)
    p.commit_transaction(60)

    # Killed while the transaction is open: the new coordinator has it as Ongoing, the commit goes on.
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.data", f"two-{i}".encode(), partition=i % 2)
    assert p.flush(60) == 0
    first = coordinator(cluster, "t-ha")
    cluster.broker(first).kill()
    p.commit_transaction(120)
    cluster.broker(first).start()
    eventually(cluster.all_registered, 60, "the killed broker to be back")

    # Killed between PrepareCommit and the markers, deterministically: the only replica of "ha.held" is
    # on the broker outside the transaction log's replicas, held by SIGSTOP, so no marker can be written
    # while the commit is acknowledged (PrepareCommit needs only the log's two replicas) and the
    # coordinator is killed. The new coordinator must write the markers from the loaded PrepareCommit.
    second = coordinator(cluster, "t-ha")
    held = next(n for n in range(3) if n not in txn_log_replicas(cluster, "t-ha"))
    assert held != second
    create_on(cluster, "ha.held", held)
    p.begin_transaction()
    for i in range(20):
        p.produce("ha.held", f"three-{i}".encode(), partition=0)
    assert p.flush(60) == 0
    held_pid = cluster.broker(held).proc.pid  # type: ignore[union-attr]
    os.kill(held_pid, signal.SIGSTOP)
    try:
        p.commit_transaction(60)
        assert state(cluster, second, "t-ha") == "PrepareCommit"
        cluster.broker(second).kill()
    finally:
        os.kill(held_pid, signal.SIGCONT)
    eventually(
        lambda: state(cluster, coordinator(cluster, "t-ha"), "t-ha") == "CompleteCommit",
        60,
        "the new coordinator to complete the commit",
    )

    # An aborted one after all that stays invisible.
    p.begin_transaction()
    for i in range(5):
        p.produce("ha.data", f"aborted-{i}".encode(), partition=i % 2)
    assert p.flush(60) == 0
    p.abort_transaction(120)

    want = sorted(f"{n}-{i}".encode() for n in ("one", "two") for i in range(20))
    eventually(
        lambda: read_all(cluster.bootstrap, "ha.data", 2, "read_committed") == want,
        120,
        "every committed record, and only those, for read_committed",
    )
    held_want = sorted(f"three-{i}".encode() for i in range(20))
    eventually(
        lambda: read_all(cluster.bootstrap, "ha.held", 1, "read_committed") == held_want,
        60,
        "the commit finished by the new coordinator, for read_committed",
    )


def test_a_leader_asks_the_coordinator_elsewhere_before_a_batch_opens_a_transaction(
    cluster: Cluster,
) -> None:
    """KIP-890 across brokers: before a producer's first transactional batch opens a transaction on a
    partition, its leader asks the producer's transaction coordinator, here on another broker
    (AddPartitionsToTxn v4, verify only). A batch for a partition the transaction has not added is
    refused (INVALID_TXN_STATE to Produce v9), so it cannot open a transaction no coordinator will end;
    once the producer adds the partition, the same batch goes in."""
    txn = "t-verify"
    coord = coordinator(cluster, txn)
    other = next(n for n in range(3) if n != coord)
    create_on(cluster, "verify.data", other)

    pid, epoch = init_producer(cluster, coord, txn)
    records = batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
    request = {
        "transactional_id": txn,
        "acks": -1,
        "timeout_ms": 5000,
        "topic_data": [{"name": "verify.data", "partition_data": [{"index": 0, "records": records}]}],
    }

    def produce() -> int:
        with Wire(cluster.broker(other).bootstrap) as w:
            r = w.send(ApiKey.PRODUCE, 9, request, normalize=False)
        assert isinstance(r, dict)
        code: int = r["responses"][0]["partition_responses"][0]["error_code"]
        return code

    assert produce() == ErrorCode.INVALID_TXN_STATE
    add_partition(cluster, coord, txn, pid, epoch, "verify.data")
    assert produce() == ErrorCode.NONE


def test_pipelined_transactional_produces_append_in_order_behind_verification(
    cluster: Cluster,
) -> None:
    """A transactional producer pipelines the first batches of a transaction on one connection. Each
    waits for the coordinator's confirmation (KIP-890, a round trip to another broker) until the first
    has opened the transaction; a batch that comes after that needs none, yet it must not append before
    those still waiting: every one is answered NONE at consecutive offsets, none
    OUT_OF_ORDER_SEQUENCE_NUMBER (librdkafka's 0103 failed so, 3 runs in 4)."""
    txn = "t-pipelined"
    COUNT = 16  # the connection's pipelining limit
    coord = coordinator(cluster, txn)
    other = next(n for n in range(3) if n != coord)
    create_on(cluster, "pipelined.txn", other)
    pid, epoch = init_producer(cluster, coord, txn)
    add_partition(cluster, coord, txn, pid, epoch, "pipelined.txn")
    frames = [
        request_frame(
            ApiKey.PRODUCE,
            9,
            seq + 1,
            "pipelined",
            encode_request(
                ApiKey.PRODUCE,
                9,
                {
                    "transactional_id": txn,
                    "acks": -1,
                    "timeout_ms": 30_000,
                    "topic_data": [
                        {
                            "name": "pipelined.txn",
                            "partition_data": [
                                {
                                    "index": 0,
                                    "records": batch(
                                        [b"%d" % seq],
                                        producer_id=pid,
                                        producer_epoch=epoch,
                                        base_sequence=seq,
                                        transactional=True,
                                    ),
                                }
                            ],
                        }
                    ],
                },
            ),
        )
        for seq in range(COUNT)
    ]

    def answer(client: RawClient) -> tuple[int, int]:
        frame = client.read_frame()
        skip = 5 if response_is_flexible(ApiKey.PRODUCE, 9) else 4  # correlation id (and tags)
        part = decode_response(ApiKey.PRODUCE, 9, memoryview(frame)[skip:]).to_dict()["responses"][0][
            "partition_responses"
        ][0]
        return part["error_code"], part["base_offset"]

    with RawClient(cluster.broker(other).bootstrap, timeout=60) as client:
        # All but the last in flight; the last goes as soon as the first is answered (as librdkafka's
        # window moves on), while the others still wait for the coordinator one after another.
        client.sock.sendall(b"".join(frames[:-1]))  # request_frame carries the size prefix
        answers = [answer(client)]
        client.sock.sendall(frames[-1])
        answers += [answer(client) for _ in frames[1:]]
    assert answers == [(0, seq) for seq in range(COUNT)], answers
