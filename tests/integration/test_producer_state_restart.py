"""Producer state across a broker restart, now loaded from producer-state snapshots (written at segment
roll and at clean shutdown) plus the log's tail: an idempotent retry after the restart is still answered
with its original offset, a sequence gap is still refused, and a transaction left open keeps holding the
last stable offset until its producer commits it."""

from __future__ import annotations

from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka.protocol.consumer import ListOffsetsRequest

from brook.protocol.errors import ErrorCode
from tests.integration.test_bad_input import produce
from tests.integration.test_clients import create_topic
from tests.integration.test_transactions import TXN_ARGS, read_all
from tests.support.broker import BrokerProcess
from tests.support.raw import RawClient
from tests.support.records import batch

pytestmark = pytest.mark.slow

PID = 4242  # an idempotent producer id of our own: the partition accepts an unknown one at any sequence


def idem(seq: int) -> bytes:
    return batch(
        [b"idem-%d-%d" % (seq, i) for i in range(5)], producer_id=PID, producer_epoch=0, base_sequence=seq
    )


def last_stable_offset(bootstrap: str, topic: str) -> int:
    L = ListOffsetsRequest
    req = L(
        replica_id=-1,
        isolation_level=1,  # read_committed: the latest offset is the last stable offset
        topics=[
            L.ListOffsetsTopic(
                name=topic,
                partitions=[L.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=-1)],
            )
        ],
    )
    with RawClient(bootstrap) as c:
        p = c.request(req, 2).topics[0].partitions[0]
    assert p.error_code == 0
    return int(p.offset)


@pytest.mark.parametrize("how", ["clean", "kill"])
def test_restart_keeps_deduplication_and_open_transactions(tmp_path: Path, how: str) -> None:
    b = BrokerProcess(tmp_path / "data", args=TXN_ARGS).start()
    try:
        topic = "snap"
        create_topic(b.bootstrap, topic, partitions=1, config={"segment.bytes": "2000"})  # many rolls
        with RawClient(b.bootstrap) as c:
            offsets = [produce(c, topic, idem(5 * i)) for i in range(20)]
        assert all(code == 0 for code, _ in offsets)
        txp = Producer({"bootstrap.servers": b.bootstrap, "transactional.id": "snap-txn", "linger.ms": 0})
        txp.init_transactions(30)
        txp.begin_transaction()
        for i in range(3):
            txp.produce(topic, b"txn-%d" % i, partition=0)
        txp.flush(30)  # written, not committed
        txn_first = offsets[-1][1] + 5
        with RawClient(b.bootstrap) as c:
            assert produce(c, topic, idem(100)) == (0, txn_first + 3)  # after the open transaction
        assert last_stable_offset(b.bootstrap, topic) == txn_first

        partition_dir = b.data_dir / f"{topic}-0"
        if how == "clean":
            b.stop()
        else:
            b.kill()
        snapshots = sorted(int(f.name.split(".")[0]) for f in partition_dir.glob("*.snapshot"))
        # Roll snapshots, all before the transaction (it and what follows are read from the log's tail)...
        assert snapshots and snapshots[0] < txn_first
        if how == "clean":  # ...and, after a clean stop, one at the log end (no tail at all)
            assert snapshots[-1] == txn_first + 8
        b.start()

        with RawClient(b.bootstrap) as c:
            # Retries of batches sent before the restart: their original offsets, nothing appended.
            assert produce(c, topic, idem(100)) == (0, txn_first + 3)
            assert produce(c, topic, idem(95)) == (0, offsets[-1][1])
            assert produce(c, topic, idem(110))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
            assert produce(c, topic, idem(105)) == (0, txn_first + 8)
        # The transaction is still open: read_committed stops at its first record...
        assert last_stable_offset(b.bootstrap, topic) == txn_first
        # ...until its producer (reconnecting to the restarted broker) commits it.
        txp.commit_transaction(60)
        assert last_stable_offset(b.bootstrap, topic) == txn_first + 14  # 3 records, marker, 2 batches
        got = read_all(b.bootstrap, topic, 1, "read_committed")
        assert len(got) == 100 + 3 + 10
        assert [v for v in got if v.startswith(b"txn-")] == [b"txn-0", b"txn-1", b"txn-2"]
    finally:
        b.stop()
