"""max.broker.partitions: a broker hosts no more partition replicas than its open files allow.

Each hosted replica keeps one file open (its active segment). Past the open-file limit a broker cannot
open a log (EMFILE), which takes its log directory offline. So CreateTopics and CreatePartitions that
would place more replicas on a broker than its budget (a quarter of the open-file limit unless set)
are refused with POLICY_VIOLATION, through a real admin client; what fits is served."""

from __future__ import annotations

import resource
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KTP

from tests.support.broker import BrokerProcess
from tests.support.cluster import Cluster

pytestmark = pytest.mark.slow


def refusal(future: object) -> KafkaException:
    with pytest.raises(KafkaException) as e:
        future.result(30)  # type: ignore[attr-defined]
    return e.value


def test_a_small_open_file_limit_bounds_the_partitions_and_what_fits_is_served(tmp_path: Path) -> None:
    def small_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (600, 600))

    b = BrokerProcess(tmp_path / "data", preexec_fn=small_limit).start()
    try:
        a = AdminClient({"bootstrap.servers": b.bootstrap})
        e = refusal(a.create_topics([NewTopic("too-many", 200, 1)])["too-many"])
        assert e.args[0].name() == "POLICY_VIOLATION"
        assert "max.broker.partitions of 150" in e.args[0].str()  # 600 open files / 4
        a.create_topics([NewTopic("fits", 140, 1)])["fits"].result(30)
        e = refusal(a.create_partitions([NewPartitions("fits", 160)])["fits"])
        assert e.args[0].name() == "POLICY_VIOLATION"
        a.create_partitions([NewPartitions("fits", 150)])["fits"].result(30)

        # Every partition takes writes and serves reads: none failed to open.
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 20})
        for i in range(150):
            p.produce("fits", f"r{i}".encode(), partition=i)
        assert p.flush(60) == 0
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "budget", "enable.auto.commit": False})
        try:
            highs = [c.get_watermark_offsets(TopicPartition("fits", i), timeout=10)[1] for i in range(150)]
        finally:
            c.close()
        assert highs == [1] * 150
        text = b.log_text()
        assert "offline" not in text and "EMFILE" not in text
    finally:
        b.stop()


def test_a_cluster_refuses_placements_past_a_brokers_budget(tmp_path: Path) -> None:
    c = Cluster(tmp_path, extra_args=["--max-broker-partitions", "10"]).start()
    try:
        a = AdminClient({"bootstrap.servers": c.bootstrap})
        a.create_topics([NewTopic("four", 4, 3)])["four"].result(30)  # 4 replicas on each broker
        e = refusal(a.create_topics([NewTopic("eight", 8, 3)])["eight"])
        assert e.args[0].name() == "POLICY_VIOLATION"
        assert "hosts 4 partition replicas and would get 8 more" in e.args[0].str()
        e = refusal(a.create_partitions([NewPartitions("four", 11)])["four"])
        assert e.args[0].name() == "POLICY_VIOLATION"
        a.create_partitions([NewPartitions("four", 9)])["four"].result(30)  # 9 on each broker
        a.create_topics([NewTopic("on-0", 1, replica_assignment=[[0]])])["on-0"].result(30)
        a.create_topics([NewTopic("on-1", 1, replica_assignment=[[1]])])["on-1"].result(30)
        e = refusal(a.create_topics([NewTopic("one-more", 1, replica_assignment=[[0]])], validate_only=True)[
            "one-more"
        ])
        assert e.args[0].name() == "POLICY_VIOLATION"  # validate_only answers as the real thing
        # A reassignment may not add a replica to a full broker either (broker 2 has room).
        admin = KafkaAdminClient(bootstrap_servers=c.bootstrap)
        try:
            answer = admin.alter_partition_reassignments({KTP("on-0", 0): [1]})
            assert answer[KTP("on-0", 0)].__name__ == "PolicyViolationError", answer
            assert admin.alter_partition_reassignments({KTP("on-0", 0): [2]}) == {KTP("on-0", 0): None}
        finally:
            admin.close()
    finally:
        c.stop()
