"""Transactions (KIP-98) through their illegal transitions."""

from __future__ import annotations

from typing import Any

import pytest

from brook.protocol.versions import ApiKey
from tests.support.cluster import eventually
from tests.support.differential import Wire, agree, differences

from .test_records import RECORDS, led, produce
from .test_topics import create, topic

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def txn_topic(peers: tuple[str, str]) -> str:
    with Wire(peers[0]) as k, Wire(peers[1]) as b:
        agree(k, b, ApiKey.CREATE_TOPICS, 7, create(topic("t-topic", 2)), ignore=["configs"])
        for w in (k, b):
            led(w, "t-topic", 2)
    return "t-topic"


def init(txn: str | None, timeout_ms: int = 60000, pid: int = -1, epoch: int = -1) -> dict[str, Any]:
    return {
        "transactional_id": txn,
        "transaction_timeout_ms": timeout_ms,
        "producer_id": pid,
        "producer_epoch": epoch,
    }


def initialized(w: Wire, txn: str) -> tuple[int, int]:
    """A producer id and epoch for `txn`, once the transaction coordinator has loaded (as clients do:
    FindCoordinator first, which makes Kafka create __transaction_state)."""

    def found() -> bool:
        a = w.send(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": [txn]})
        return isinstance(a, dict) and a["coordinators"][0]["error_code"] == "NONE(0)"

    eventually(found, 60, f"a coordinator for {txn}")

    def ready() -> Any:
        a = w.send(ApiKey.INIT_PRODUCER_ID, 4, init(txn), normalize=False)
        assert isinstance(a, dict)
        return (a["producer_id"], a["producer_epoch"]) if a["error_code"] == 0 else None

    return eventually(ready, 60, f"InitProducerId for {txn}")  # type: ignore[no-any-return]


class Pair:
    """The same transactional id on both brokers; each request made with each broker's own producer id."""

    def __init__(self, k: Wire, b: Wire, txn: str) -> None:
        self.k, self.b, self.txn = k, b, txn
        self.ids = {k: initialized(k, txn), b: initialized(b, txn)}

    def both(self, api: int, version: int, make: Any, ignore: tuple[str, ...] = ()) -> dict[str, Any]:
        answers = [self.settled(w, api, version, make(*self.ids[w])) for w in (self.k, self.b)]
        diff = differences(*answers, ignore=ignore)
        assert not diff, f"{ApiKey(api).name} v{version}: {diff}"
        assert isinstance(answers[0], dict)
        return answers[0]

    @staticmethod
    def settled(w: Wire, api: int, version: int, req: dict[str, Any]) -> Any:
        """The answer once the last transition is complete: Kafka answers CONCURRENT_TRANSACTIONS
        while its markers are being written (clients retry); Brook writes them before answering."""

        def answer() -> Any:
            a = w.send(api, version, req)
            return None if isinstance(a, dict) and a.get("error_code") == "CONCURRENT_TRANSACTIONS(51)" else a

        return eventually(answer, 30, f"{ApiKey(api).name} without CONCURRENT_TRANSACTIONS")

    def add_partitions(
        self, pid: int, epoch: int, partitions: list[int], name: str = "t-topic"
    ) -> dict[str, Any]:
        return {
            "v3_and_below_transactional_id": self.txn,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": name, "partitions": partitions}],
        }

    def end(self, pid: int, epoch: int, commit: bool) -> dict[str, Any]:
        return {
            "transactional_id": self.txn,
            "producer_id": pid,
            "producer_epoch": epoch,
            "committed": commit,
        }


def test_init_producer_id_edges(wires: tuple[Wire, Wire], txn_topic: str) -> None:
    k, b = wires
    Pair(k, b, "t-init")
    agree(k, b, ApiKey.INIT_PRODUCER_ID, 4, init("t-init", timeout_ms=1_000_000_000))  # past the max timeout
    agree(k, b, ApiKey.INIT_PRODUCER_ID, 4, init("t-init", timeout_ms=0))
    agree(k, b, ApiKey.INIT_PRODUCER_ID, 4, init("t-init", pid=12345, epoch=0))  # not this id's producer
    agree(k, b, ApiKey.INIT_PRODUCER_ID, 4, init("", timeout_ms=60000))


def test_illegal_transitions(wires: tuple[Wire, Wire], txn_topic: str) -> None:
    k, b = wires
    t = Pair(k, b, "t-flow")
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e, True))  # nothing begun: INVALID_TXN_STATE
    t.both(
        ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e + 1, [0])
    )  # a future epoch
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid + 1000, e, [0]))  # unknown id
    t.both(
        ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e, [0, 7])
    )  # partition 7 unknown
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e, [0], name="t-nope"))
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e, [0, 1]))
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e, [0]))  # again: fine
    t.both(
        ApiKey.ADD_OFFSETS_TO_TXN,
        3,
        lambda pid, e: {
            "transactional_id": t.txn,
            "producer_id": pid,
            "producer_epoch": e,
            "group_id": "t-group",
        },
    )
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e, True))
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e, True))  # a retried commit
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e, False))  # abort after commit: INVALID_TXN_STATE
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e - 1, False))  # an old epoch
    agree(
        k,
        b,
        ApiKey.DESCRIBE_TRANSACTIONS,
        0,
        {"transactional_ids": ["t-flow", "t-nobody"]},
        ignore=["transaction_states[0].producer_id"],  # each broker's own id (0 is Brook's first)
    )


def test_fenced_producer(wires: tuple[Wire, Wire], txn_topic: str) -> None:
    """A second InitProducerId bumps the epoch: the first producer's requests are fenced."""
    k, b = wires
    t = Pair(k, b, "t-fence")
    old = dict(t.ids)
    t.ids = {k: initialized(k, "t-fence"), b: initialized(b, "t-fence")}
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e - 1, [0]))
    t.both(ApiKey.END_TXN, 3, lambda pid, e: t.end(pid, e - 1, False))
    assert all(old[w][1] + 1 == t.ids[w][1] for w in (k, b))


def test_transactional_produce_outside_a_transaction(wires: tuple[Wire, Wire], txn_topic: str) -> None:
    """Transactional records to a partition the transaction has not added (KIP-890's verification),
    then once it has."""
    from tests.support.records import batch

    k, b = wires
    t = Pair(k, b, "t-stray")

    def stray(pid: int, epoch: int) -> dict[str, Any]:
        records = batch([b"x"], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True)
        return produce("t-topic", records, txn="t-stray")

    t.both(ApiKey.PRODUCE, 9, stray)
    t.both(ApiKey.PRODUCE, 11, stray)  # Produce v11+ clients know TRANSACTION_ABORTABLE
    agree(k, b, ApiKey.PRODUCE, 9, produce("t-topic", RECORDS, txn="t-stray"))  # non-transactional batch
    t.both(ApiKey.ADD_PARTITIONS_TO_TXN, 3, lambda pid, e: t.add_partitions(pid, e, [0]))
    t.both(ApiKey.PRODUCE, 9, stray)  # added now: it goes in
