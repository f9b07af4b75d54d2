"""The partition budget's arithmetic, and its place in a broker's registration."""

from __future__ import annotations

import pytest

from brook.broker.partition_budget import check_budget, partition_budget, replicas_per_broker
from brook.metadata.models import BrokerInfo
from brook.protocol.errors import ErrorCode, KafkaError


def test_the_default_is_a_quarter_of_the_open_files() -> None:
    assert partition_budget(-1, 20_000) == 5_000
    assert partition_budget(-1, 3) == 1
    assert partition_budget(0, 20_000) == 0
    assert partition_budget(42, 20_000) == 42


def test_replicas_are_counted_per_broker() -> None:
    assert replicas_per_broker([[[0, 1, 2], [1, 2, 0]], [[2]]]) == {0: 2, 1: 2, 2: 3}


def test_a_placement_past_a_budget_is_refused_and_one_up_to_it_is_not() -> None:
    check_budget("t", {0: 8, 1: 3}, [[0, 1], [0, 1]], {0: 10, 1: 5})  # exactly full: fine
    with pytest.raises(KafkaError) as e:
        check_budget("t", {0: 8, 1: 3}, [[0, 1], [1, 0], [1, 0]], {0: 10, 1: 10})
    assert e.value.code == ErrorCode.POLICY_VIOLATION
    assert "broker 0 hosts 8 partition replicas and would get 3 more" in str(e.value)
    check_budget("t", {0: 100}, [[0]], {0: None})  # a broker that announced no budget
    check_budget("__consumer_offsets", {0: 10}, [[0]] * 50, {0: 10})  # internal topics: never refused


def test_a_registration_carries_the_budget_and_older_ones_have_none() -> None:
    info = BrokerInfo(1, "h", 9092, max_partitions=5_000)
    assert BrokerInfo.from_json(info.to_json()).max_partitions == 5_000
    assert BrokerInfo.from_json(BrokerInfo(1, "h", 9092).to_json()).max_partitions is None
