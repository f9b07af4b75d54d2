"""Expiration of idle producers, as Kafka does it.

producer.id.expiration.ms: a producer idle that long, with no open transaction, is forgotten by the
partitions (DescribeProducers no longer lists it); it can go on producing afterwards, and an open
transaction keeps its producer until it ends.

transactional.id.expiration.ms: a transactional id unused that long with no transaction in progress is
forgotten by its coordinator (a tombstone in __transaction_state, so a restart does not bring it back);
the same id can be used again afterwards."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka import KafkaAdminClient, TopicPartition
from kafka.errors import TransactionalIdNotFoundError

from tests.integration.test_clients import confluent_consume, create_topic
from tests.integration.test_transactions import TXN_ARGS
from tests.support.broker import BrokerProcess

pytestmark = pytest.mark.slow

EXPIRE_MS = 3000
ARGS = [
    *TXN_ARGS,
    *("--producer-id-expiration-ms", str(EXPIRE_MS)),
    *("--producer-id-expiration-check-interval-ms", "200"),
    *("--transactional-id-expiration-ms", str(EXPIRE_MS)),
    *("--transaction-remove-expired-transaction-cleanup-interval-ms", "200"),
]


def producers(admin: KafkaAdminClient, topic: str) -> dict[int, int]:
    """Producer id -> its open transaction's first offset (-1: none) on partition 0."""
    state = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
    return {p.producer_id: p.current_transaction_start_offset for p in state.active_producers}


def wait_for(check: object, timeout: float = 10.0) -> None:
    assert callable(check)
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.1)


def test_idle_producers_are_forgotten_but_not_in_a_transaction(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=ARGS).start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        topic = "expiring"
        create_topic(b.bootstrap, topic, partitions=1)
        # Everything slow first (producer ids, the transaction log, the admin's metadata): the checks
        # below must come well within EXPIRE_MS of the produce.
        txp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "exp-txn", "linger.ms": 0})
        txp.init_transactions(10)
        idem = Producer({"bootstrap.servers": b.bootstrap, "enable.idempotence": True, "linger.ms": 0})
        assert producers(admin, topic) == {}
        for i in range(10):
            idem.produce(topic, b"idem-%d" % i, partition=0)
        assert idem.flush(10) == 0
        txp.begin_transaction()
        txp.produce(topic, b"in-txn", partition=0)
        assert txp.flush(10) == 0
        first = producers(admin, topic)
        assert len(first) == 2
        state = admin.describe_producers([TopicPartition(topic, 0)])[TopicPartition(topic, 0)]
        assert all(abs(p.last_timestamp - time.time() * 1000) < 60_000 for p in state.active_producers)
        (open_pid,) = [pid for pid, start in first.items() if start >= 0]

        # The idle idempotent producer goes; the one in a transaction stays however long it is open.
        wait_for(lambda: set(producers(admin, topic)) == {open_pid})
        time.sleep(EXPIRE_MS / 1000 + 0.5)  # the open one's last batch is now older than EXPIRE_MS too
        assert set(producers(admin, topic)) == {open_pid}

        # Forgotten is not fenced: the idempotent producer goes on (any sequence of an unknown producer
        # is accepted), and is known again.
        for i in range(10, 20):
            idem.produce(topic, b"idem-%d" % i, partition=0)
        assert idem.flush(10) == 0
        assert len(producers(admin, topic)) == 2

        # Once its transaction ends, the transactional producer ages like any other.
        txp.commit_transaction(10)
        wait_for(lambda: open_pid not in producers(admin, topic))
        values = [v for *_, v, _ in confluent_consume(b.bootstrap, topic, 1, 21)]
        assert sorted(values) == sorted([b"idem-%d" % i for i in range(20)] + [b"in-txn"])
    finally:
        admin.close()
        b.stop()


def known(admin: KafkaAdminClient, tid: str) -> bool:
    try:
        admin.describe_transactions([tid])
    except TransactionalIdNotFoundError:
        return False
    return True


def test_unused_transactional_ids_are_forgotten_for_good_but_not_in_a_transaction(tmp_path: Path) -> None:
    b = BrokerProcess(tmp_path / "data", args=ARGS).start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        topic = "txn-expiring"
        create_topic(b.bootstrap, topic, partitions=1)
        done = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "done", "linger.ms": 0})
        done.init_transactions(10)
        open_ = Producer(
            {"bootstrap.servers": b.bootstrap, "transactional.id": "open", "transaction.timeout.ms": 60_000}
        )
        open_.init_transactions(10)
        assert known(admin, "open")  # the admin's coordinators found before the clock matters
        done.begin_transaction()
        done.produce(topic, b"committed", partition=0)
        done.commit_transaction(10)
        open_.begin_transaction()
        open_.produce(topic, b"pending", partition=0)
        assert open_.flush(10) == 0
        assert known(admin, "done") and known(admin, "open")
        wait_for(lambda: not known(admin, "done"))
        assert known(admin, "open")  # Ongoing: kept however long it is open
        open_.commit_transaction(10)
    finally:
        admin.close()
        b.stop()

    # The tombstone holds across a restart; the id starts afresh with a new producer id.
    b = BrokerProcess(tmp_path / "data", args=ARGS).start()
    admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
    try:
        assert not known(admin, "done")
        again = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "done", "linger.ms": 0})
        again.init_transactions(10)
        again.begin_transaction()
        again.produce(topic, b"again", partition=0)
        again.commit_transaction(10)
        # EndTxn answers once PREPARE_COMMIT is logged; the markers and COMPLETE_COMMIT follow (as Kafka).
        wait_for(lambda: admin.describe_transactions(["done"])["done"].state.name == "COMPLETE_COMMIT")
        values = {v for *_, v, _ in confluent_consume(b.bootstrap, topic, 1, 3)}
        assert values == {b"committed", b"pending", b"again"}
    finally:
        admin.close()
        b.stop()
