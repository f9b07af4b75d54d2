"""The transaction state machine's decisions and Kafka's error codes (brook.transactions.state)."""

from __future__ import annotations

import pytest

from brook.protocol.errors import ErrorCode, KafkaError
from brook.transactions import state as sm
from brook.transactions.state import TxnMetadata, TxnState


def meta(state: TxnState = TxnState.EMPTY, epoch: int = 3, **kw: object) -> TxnMetadata:
    m = TxnMetadata("tx", 42, epoch, 60_000, state=state, last_update_ms=0)
    for k, v in kw.items():
        setattr(m, k, v)
    return m


def code(fn: object, *args: object) -> ErrorCode:
    with pytest.raises(KafkaError) as e:
        fn(*args)  # type: ignore[operator]
    return e.value.code


def test_full_cycle_empty_ongoing_prepare_complete() -> None:
    m = meta()
    m = sm.add_partitions(m, {("t", 0)}, 100) or m
    assert m.state is TxnState.ONGOING and m.start_ms == 100 and m.partitions == {("t", 0)}
    m2 = sm.add_partitions(m, {("t", 1)}, 200)
    assert m2 is not None and m2.partitions == {("t", 0), ("t", 1)} and m2.start_ms == 100
    assert sm.add_partitions(m2, {("t", 1)}, 300) is None  # nothing new: no write
    prep = sm.end_decision(m2, True, 400)
    assert prep is not None and prep.state is TxnState.PREPARE_COMMIT
    done = sm.completed(prep, 500)
    assert done.state is TxnState.COMPLETE_COMMIT and not done.partitions
    assert sm.end_decision(done, True, 600) is None  # a retried commit succeeds
    assert code(sm.end_decision, done, False, 600) == ErrorCode.INVALID_TXN_STATE


def test_end_in_each_state() -> None:
    assert code(sm.end_decision, meta(TxnState.EMPTY), True, 0) == ErrorCode.INVALID_TXN_STATE
    assert code(sm.end_decision, meta(TxnState.PREPARE_COMMIT), True, 0) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert code(sm.end_decision, meta(TxnState.PREPARE_COMMIT), False, 0) == ErrorCode.INVALID_TXN_STATE
    assert code(sm.end_decision, meta(TxnState.PREPARE_ABORT), False, 0) == ErrorCode.CONCURRENT_TRANSACTIONS
    prep = sm.end_decision(meta(TxnState.ONGOING), False, 0)
    assert prep is not None and prep.state is TxnState.PREPARE_ABORT
    assert sm.completed(prep, 1).state is TxnState.COMPLETE_ABORT


def test_add_partitions_while_ending_is_concurrent() -> None:
    for s in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
        assert code(sm.add_partitions, meta(s), {("t", 0)}, 0) == ErrorCode.CONCURRENT_TRANSACTIONS
    after = sm.add_partitions(meta(TxnState.COMPLETE_ABORT), {("t", 0)}, 7)
    assert after is not None and after.state is TxnState.ONGOING and after.start_ms == 7


def test_check_producer_fences_and_maps() -> None:
    m = meta(TxnState.ONGOING)
    assert code(sm.check_producer, None, 42, 3) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert code(sm.check_producer, m, 41, 3) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert code(sm.check_producer, m, 42, 2) == ErrorCode.PRODUCER_FENCED
    assert sm.check_producer(m, 42, 3) is m
    m.pending = True
    assert code(sm.check_producer, m, 42, 3) == ErrorCode.CONCURRENT_TRANSACTIONS


def test_init_bumps_fences_open_transactions_and_accepts_retries() -> None:
    assert sm.init_decision(meta(TxnState.COMPLETE_COMMIT), -1, -1) is sm.InitDecision.BUMP
    assert sm.init_decision(meta(TxnState.ONGOING), -1, -1) is sm.InitDecision.FENCE_ABORT
    assert code(sm.init_decision, meta(TxnState.PREPARE_ABORT), -1, -1) == ErrorCode.CONCURRENT_TRANSACTIONS
    # KIP-360: the producer names its id and epoch; the current one bumps, the previous one is a retry.
    assert sm.init_decision(meta(TxnState.EMPTY), 42, 3) is sm.InitDecision.BUMP
    assert sm.init_decision(meta(TxnState.EMPTY, last_producer_epoch=2), 42, 2) is sm.InitDecision.RETURN
    assert code(sm.init_decision, meta(TxnState.EMPTY), 42, 1) == ErrorCode.PRODUCER_FENCED
    assert code(sm.init_decision, meta(TxnState.EMPTY), 7, 3) == ErrorCode.PRODUCER_FENCED
    b = sm.bumped(meta(TxnState.COMPLETE_ABORT, partitions={("t", 0)}), None, 5000, 9)
    assert (b.producer_epoch, b.last_producer_epoch, b.state, b.partitions, b.timeout_ms) == (
        4, 3, TxnState.EMPTY, set(), 5000,
    )  # fmt: skip
    exhausted = meta(epoch=sm.EPOCH_MAX)
    assert sm.needs_new_producer_id(exhausted)
    fresh = sm.bumped(exhausted, 77, 5000, 9)
    assert (fresh.producer_id, fresh.producer_epoch) == (77, 0)


def test_timeout_and_fencing_abort_bump_the_epoch() -> None:
    m = meta(TxnState.ONGOING, start_ms=1000, partitions={("t", 0)})
    assert not sm.expired(m, 1000 + 60_000)
    assert sm.expired(m, 1001 + 60_000)
    aborting = sm.fence_and_abort(m, 70_000)
    assert aborting.state is TxnState.PREPARE_ABORT and aborting.producer_epoch == 4
    assert aborting.partitions == {("t", 0)}  # the markers go where the transaction wrote
    assert code(sm.check_producer, aborting, 42, 3) == ErrorCode.PRODUCER_FENCED
    assert not sm.expired(meta(TxnState.COMPLETE_COMMIT, start_ms=0), 10**9)


def test_only_ids_with_nothing_in_progress_expire() -> None:
    for state in TxnState:
        expected = state in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
        assert sm.expirable(meta(state, last_update_ms=100), cutoff_ms=100) is expected, state
    assert not sm.expirable(meta(last_update_ms=101), cutoff_ms=100)  # used since
    assert not sm.expirable(meta(last_update_ms=0, pending=True), cutoff_ms=100)  # being written
