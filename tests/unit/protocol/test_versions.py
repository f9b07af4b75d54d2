from __future__ import annotations

import re

import pytest
from kafka.protocol.api_key import ApiKey as KafkaPythonApiKey

from brook.protocol import (
    ALL_VERSIONS,
    FLEXIBLE_FROM,
    ApiKey,
    advertised,
    request_is_flexible,
    response_is_flexible,
    supports,
)
from brook.protocol.messages import _REQUESTS, _RESPONSES, request_class, response_class


def test_api_key_names_match_kafka() -> None:
    expected = {re.sub(r"(?<!^)(?=[A-Z])", "_", k.name).upper(): k.value for k in KafkaPythonApiKey}
    assert {k.name: k.value for k in ApiKey} == expected


def test_flexible_from_matches_kafka_python_specs() -> None:
    derived = {}
    for key, cls in {**_REQUESTS, **_RESPONSES}.items():
        flex = cls._flexible_versions
        if flex is not None and flex != (-1, -1):
            derived[key] = flex[0]
    assert derived == dict(FLEXIBLE_FROM)
    for key in _REQUESTS:  # requests and responses agree
        assert _REQUESTS[key]._flexible_versions == _RESPONSES[key]._flexible_versions


@pytest.mark.parametrize("api_key", sorted(ALL_VERSIONS))
def test_all_versions_are_defined_by_kafka_python(api_key: int) -> None:
    lo, hi = ALL_VERSIONS[api_key]
    for cls in (request_class(api_key), response_class(api_key)):
        assert hi <= cls.max_version
        valid_lo = cls._valid_versions[0]
        # Only these go below kafka-python's validVersions (field ranges still cover them; see
        # test_messages for the round trips, and Produce 0-2 are answered UNSUPPORTED_VERSION).
        if lo < valid_lo:
            assert api_key in (ApiKey.PRODUCE, ApiKey.OFFSET_FOR_LEADER_EPOCH)


def test_note_version_set_and_admin_additions() -> None:
    assert ALL_VERSIONS[ApiKey.API_VERSIONS] == (0, 4)
    assert ALL_VERSIONS[ApiKey.FETCH] == (4, 17)
    assert ALL_VERSIONS[ApiKey.PRODUCE] == (0, 12)
    assert ALL_VERSIONS[ApiKey.CREATE_PARTITIONS] == (0, 3)
    assert ALL_VERSIONS[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (0, 4)
    assert ALL_VERSIONS[ApiKey.LIST_GROUPS] == (0, 5)
    assert ALL_VERSIONS[ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert ALL_VERSIONS[ApiKey.ALTER_USER_SCRAM_CREDENTIALS] == (0, 0)
    assert ALL_VERSIONS[ApiKey.ELECT_LEADERS] == (0, 2)
    for acl_api in (ApiKey.CREATE_ACLS, ApiKey.DESCRIBE_ACLS, ApiKey.DELETE_ACLS):
        assert ALL_VERSIONS[acl_api] == (1, 3)
    assert ALL_VERSIONS[ApiKey.ADD_PARTITIONS_TO_TXN] == (0, 4)  # 4: KIP-890's verification; 5: TV2
    assert ALL_VERSIONS[ApiKey.END_TXN] == (0, 3)
    assert ALL_VERSIONS[ApiKey.WRITE_TXN_MARKERS] == (1, 1)
    assert ALL_VERSIONS[ApiKey.ALTER_CLIENT_QUOTAS] == (0, 1)
    assert ALL_VERSIONS[ApiKey.DESCRIBE_LOG_DIRS] == (1, 4)  # v0 left Kafka 4
    assert ALL_VERSIONS[ApiKey.CONSUMER_GROUP_HEARTBEAT] == (0, 1)  # KIP-848, v1: KIP-1082
    assert ALL_VERSIONS[ApiKey.CONSUMER_GROUP_DESCRIBE] == (0, 1)
    # KIP-932: v0 was Kafka 4.0's early access; v2 of ShareFetch/ShareAcknowledge: RENEW (KIP-1222)
    assert ALL_VERSIONS[ApiKey.SHARE_GROUP_HEARTBEAT] == (1, 1)
    assert ALL_VERSIONS[ApiKey.SHARE_FETCH] == (1, 2)
    # KIP-932's share-state RPCs, between brokers (v1 of the summary: DeliveryCompleteCount)
    assert ALL_VERSIONS[ApiKey.READ_SHARE_GROUP_STATE_SUMMARY] == (0, 1)
    assert len(ALL_VERSIONS) == 59


def test_flexibility() -> None:
    assert not request_is_flexible(ApiKey.METADATA, 8)
    assert request_is_flexible(ApiKey.METADATA, 9)
    assert response_is_flexible(ApiKey.METADATA, 9)
    assert request_is_flexible(ApiKey.API_VERSIONS, 3)
    for v in range(5):
        assert not response_is_flexible(ApiKey.API_VERSIONS, v)
    assert not request_is_flexible(ApiKey.SASL_HANDSHAKE, 1)
    assert not request_is_flexible(ApiKey.OFFSET_DELETE, 0)
    assert request_is_flexible(ApiKey.DESCRIBE_CLUSTER, 0)
    assert not request_is_flexible(999, 50)


def test_supports_and_advertised() -> None:
    assert supports(ApiKey.FETCH, 4) and supports(ApiKey.FETCH, 17)
    assert not supports(ApiKey.FETCH, 3) and not supports(ApiKey.FETCH, 18)
    assert not supports(ApiKey.LEADER_AND_ISR, 0)
    adv = advertised([ApiKey.FETCH, ApiKey.API_VERSIONS, ApiKey.LEADER_AND_ISR, 3])
    assert adv == {1: (4, 17), 3: (0, 12), 18: (0, 4)}
    assert list(adv) == [1, 3, 18]
    assert all(type(k) is int for k in adv)
