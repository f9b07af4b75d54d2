"""acks=all per partition: one partition below min.insync.replicas fails alone, the others commit."""

from __future__ import annotations

import pytest
from kafka.protocol.producer import ProduceRequest

from brook.protocol.errors import ErrorCode
from tests.integration.test_bad_input import create, fetch
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow


def test_a_partition_below_min_insync_fails_alone_and_the_others_commit(broker: BrokerProcess) -> None:
    P = ProduceRequest
    with RawClient(broker.bootstrap) as c:
        # One broker: every ISR is [0], so min.insync.replicas=2 is out of reach for "strict" only.
        assert create(c, "acks-strict", configs={"min.insync.replicas": "2"}) == 0
        assert create(c, "acks-loose", partitions=2) == 0
        req = P(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                P.TopicProduceData(
                    name=name,
                    partition_data=[
                        P.TopicProduceData.PartitionProduceData(index=i, records=batch([b"v-%d" % i]))
                        for i in parts
                    ],
                )
                for name, parts in (("acks-loose", [0]), ("acks-strict", [0]), ("acks-loose", [1]))
            ],
        )
        answers = {
            (t.name, p.index): (p.error_code, p.base_offset)
            for t in c.request(req, 9).responses
            for p in t.partition_responses
        }
        assert answers == {
            ("acks-loose", 0): (0, 0),
            ("acks-strict", 0): (ErrorCode.NOT_ENOUGH_REPLICAS, -1),
            ("acks-loose", 1): (0, 0),
        }
        for i in (0, 1):  # committed and readable
            err, hw, records = fetch(c, "acks-loose", 0, partition=i)
            assert err == 0 and hw == 1 and records
        assert fetch(c, "acks-strict", 0)[1] == 0  # nothing stored for the refused partition
