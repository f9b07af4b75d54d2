"""CreateAcls, DescribeAcls and DeleteAcls with bad values, filters and principals."""

from __future__ import annotations

from typing import Any

import pytest

from brook.protocol.versions import ApiKey
from tests.support.differential import CLOSED, Wire, agree

pytestmark = pytest.mark.slow


def acl(
    rtype: int = 2,
    name: str = "acl-topic",
    pattern: int = 3,
    principal: str = "User:alice",
    host: str = "*",
    op: int = 3,
    perm: int = 3,
) -> dict[str, Any]:
    return {
        "resource_type": rtype,
        "resource_name": name,
        "resource_pattern_type": pattern,
        "principal": principal,
        "host": host,
        "operation": op,
        "permission_type": perm,
    }


def acl_filter(**kw: Any) -> dict[str, Any]:
    f = acl(**kw)
    return {
        "resource_type_filter": f["resource_type"],
        "resource_name_filter": f["resource_name"],
        "pattern_type_filter": f["resource_pattern_type"],
        "principal_filter": f["principal"],
        "host_filter": f["host"],
        "operation": f["operation"],
        "permission_type": f["permission_type"],
    }


@pytest.mark.parametrize(
    "entry",
    [
        acl(),
        acl(rtype=1),
        acl(rtype=0),
        acl(rtype=99),
        acl(pattern=1),
        acl(pattern=2),
        acl(pattern=0),
        acl(principal="alice"),
        acl(principal="User:"),
        acl(principal=""),
        acl(op=1),
        acl(op=0),
        acl(perm=1),
        acl(perm=0),
        acl(rtype=4, name="not-kafka-cluster"),
        acl(rtype=2, name=""),
    ],
    ids=[
        "valid",
        "type-any",
        "type-unknown",
        "type-99",
        "pattern-any",
        "pattern-match",
        "pattern-unknown",
        "principal-no-type",
        "principal-empty-name",
        "principal-empty",
        "op-any",
        "op-unknown",
        "perm-any",
        "perm-unknown",
        "cluster-wrong-name",
        "empty-name",
    ],
)
def test_create_acls(wires: tuple[Wire, Wire], entry: dict[str, Any]) -> None:
    k, b = wires
    values = (
        entry["resource_type"],
        entry["resource_pattern_type"],
        entry["operation"],
        entry["permission_type"],
    )
    if 0 in values or 1 in values or entry["resource_pattern_type"] == 2:
        # Deliberate: UNKNOWN (0) values make Kafka 4.4 close the connection (its request's constructor
        # refuses them) and ANY/MATCH values fail with UNKNOWN_SERVER_ERROR; Brook answers
        # INVALID_REQUEST, the error Kafka's documentation gives for an invalid ACL.
        kafka, brook = (w.send(ApiKey.CREATE_ACLS, 3, {"creations": [entry]}) for w in (k, b))
        assert kafka == CLOSED or kafka["results"][0]["error_code"] == "UNKNOWN_SERVER_ERROR(-1)"  # type: ignore[index]
        assert brook["results"][0]["error_code"] == "INVALID_REQUEST(42)"  # type: ignore[index]
        return
    agree(k, b, ApiKey.CREATE_ACLS, 3, {"creations": [entry]})
    agree(k, b, ApiKey.DELETE_ACLS, 3, {"filters": [acl_filter(name="acl-topic")]})


@pytest.mark.parametrize(
    "flt",
    [
        acl_filter(rtype=1, name=None, pattern=1, principal=None, host=None, op=1, perm=1),
        acl_filter(rtype=0, name=None, pattern=1, principal=None, host=None, op=1, perm=1),
        acl_filter(rtype=1, name=None, pattern=0, principal=None, host=None, op=1, perm=1),
        acl_filter(rtype=1, name=None, pattern=1, principal=None, host=None, op=0, perm=1),
        acl_filter(rtype=1, name=None, pattern=1, principal=None, host=None, op=1, perm=0),
        acl_filter(rtype=2, name="acl-", pattern=2, principal=None, host=None, op=1, perm=1),
        acl_filter(rtype=2, name=None, pattern=4, principal="alice", host=None, op=1, perm=1),
    ],
    ids=[
        "match-all",
        "type-unknown",
        "pattern-unknown",
        "op-unknown",
        "perm-unknown",
        "match",
        "bad-principal",
    ],
)
def test_acl_filters(peers: tuple[str, str], wires: tuple[Wire, Wire], flt: dict[str, Any]) -> None:
    k, b = wires
    agree(k, b, ApiKey.CREATE_ACLS, 3, {"creations": [acl(name="acl-listed", pattern=4)]})
    if 0 in (
        flt["resource_type_filter"],
        flt["pattern_type_filter"],
        flt["operation"],
        flt["permission_type"],
    ):
        # Deliberate, as for CreateAcls: Kafka closes the connection on an UNKNOWN value, Brook answers
        # INVALID_REQUEST.
        for api, req in ((ApiKey.DESCRIBE_ACLS, flt), (ApiKey.DELETE_ACLS, {"filters": [flt]})):
            with Wire(peers[0]) as once:
                assert once.send(api, 3, req) == CLOSED
            answer = b.send(api, 3, req)
            assert isinstance(answer, dict)
            results = [answer] if api == ApiKey.DESCRIBE_ACLS else answer["filter_results"]
            codes = [r["error_code"] for r in results]
            assert codes == ["INVALID_REQUEST(42)"]
        return
    agree(k, b, ApiKey.DESCRIBE_ACLS, 3, flt)
    agree(k, b, ApiKey.DELETE_ACLS, 3, {"filters": [flt]})
    agree(k, b, ApiKey.DELETE_ACLS, 3, {"filters": [acl_filter(name="acl-listed", pattern=4)]})
