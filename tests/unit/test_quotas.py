"""Client quota resolution and Kafka's sampled-rate throttle (brook.security.quotas)."""

from __future__ import annotations

from brook.security.quotas import (
    FETCH,
    INACTIVE_S,
    PRODUCE,
    ClientQuotas,
    QuotaSettings,
    check_entity,
    entity_key,
    parse_entity_key,
)


def quotas(configs: dict[str, dict[str, str]], num: int = 3) -> ClientQuotas:
    q = ClientQuotas(QuotaSettings(num, 1.0))
    q.set_configs(configs)
    return q


def test_the_most_specific_entity_wins() -> None:
    q = quotas(
        {
            "user=alice,client-id=app": {PRODUCE: "100"},
            "user=alice": {PRODUCE: "200"},
            "user=<default>": {PRODUCE: "300"},
            "client-id=<default>": {PRODUCE: "400", FETCH: "500"},
        }
    )
    bound = q._bound  # what record() charges against
    assert bound(PRODUCE, "alice", "app") == ((("user", "alice"), ("client-id", "app")), 100.0)
    assert bound(PRODUCE, "alice", "other") == ((("user", "alice"),), 200.0)
    assert bound(PRODUCE, "bob", "x") == ((("user", None),), 300.0)
    assert bound(FETCH, "bob", "x") == ((("client-id", None),), 500.0)


def test_throttle_is_kafkas_formula_over_the_padded_window() -> None:
    q = quotas({"client-id=c": {PRODUCE: "1000"}})
    # 3 windows of 1 s: the elapsed time is padded with num-1 = 2 whole windows, so 2000 bytes at
    # once are at the bound.
    assert q.record(PRODUCE, "u", "c", 2000, now=0.0) == 0
    # 4000 bytes over 0.5 + 2 s: 1600/s, (1600 - 1000) / 1000 x 2.5 s = 1500 ms.
    assert q.record(PRODUCE, "u", "c", 2000, now=0.5) == 1500
    # Other clients are not charged.
    assert q.record(PRODUCE, "u", "other", 10**9, now=0.6) == 0


def test_old_samples_are_forgotten() -> None:
    q = quotas({"client-id=c": {PRODUCE: "1000"}})
    q.record(PRODUCE, "u", "c", 5000, now=0.0)
    assert q.record(PRODUCE, "u", "c", 10, now=10.0) == 0


def test_entity_keys_and_checks() -> None:
    e = (("user", "a,b=c"), ("client-id", None))
    assert parse_entity_key(entity_key(e)) == e
    assert check_entity(e, {PRODUCE}) is None
    assert check_entity((("ip", "1.2.3.4"),), {PRODUCE}) is not None
    assert check_entity((("ip", None),), {"connection_creation_rate"}) is None
    assert check_entity((("user", "a"), ("user", "b")), {PRODUCE}) is not None


def test_a_default_quota_is_each_clients_own() -> None:
    q = quotas({"client-id=<default>": {PRODUCE: "1000"}, "user=<default>": {FETCH: "1000"}})
    assert q.record(PRODUCE, "u", "noisy", 10_000, now=0.0) > 0
    assert q.record(PRODUCE, "u", "quiet", 100, now=0.1) == 0  # not charged for the noisy one
    assert q.record(FETCH, "alice", "a", 10_000, now=0.0) > 0
    assert q.record(FETCH, "bob", "a", 100, now=0.1) == 0
    assert q.record(FETCH, "alice", "b", 100, now=0.2) > 0  # a user's quota spans its client ids


def test_rates_of_clients_gone_for_an_hour_are_dropped() -> None:
    q = quotas({"client-id=<default>": {PRODUCE: "1000"}})
    for i in range(100):
        q.record(PRODUCE, "u", f"c{i}", 10, now=float(i))
    assert q.tracked() == 100
    q.record(PRODUCE, "u", "c99", 10, now=INACTIVE_S + 50.0)  # c0..c50 idle for an hour or more
    assert q.tracked() == 49
