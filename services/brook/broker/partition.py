"""One partition on this broker: its log, its producer state, and the fetchers waiting for new data."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from brook.log import PartitionLog
from brook.protocol.batch import iter_headers
from brook.protocol.errors import ErrorCode, KafkaError

from .producer_state import ProducerStateTable


@dataclass(frozen=True, slots=True)
class ProduceOutcome:
    base_offset: int
    log_append_time: int
    log_start_offset: int


class Partition:
    def __init__(self, topic: str, index: int, log: PartitionLog) -> None:
        self.topic = topic
        self.index = index
        self.log = log
        self.leader_epoch = 0
        self.producers = ProducerStateTable()
        self._waiters: set[asyncio.Future[None]] = set()
        for h in log.iter_batch_headers():
            self.producers.record(h, h.base_offset)

    @property
    def high_watermark(self) -> int:
        # Single replica: everything appended is committed. Replication lowers this to the ISR minimum.
        return self.log.log_end_offset

    def append(self, records: memoryview) -> ProduceOutcome:
        """Append a Produce request's records for this partition, deduplicating idempotent retries."""
        if len(records) == 0:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "empty record set")
        headers = [h for _, h in iter_headers(records)]
        duplicates = [self.producers.check(h) for h in headers]
        if duplicates[0] is not None:
            if not all(duplicates):
                raise KafkaError(
                    ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "request mixes retried and new batches"
                )
            return ProduceOutcome(duplicates[0].base_offset, -1, self.log.log_start_offset)
        result = self.log.append(records, leader_epoch=self.leader_epoch)
        offset = result.base_offset
        for h in headers:
            self.producers.record(h, offset)
            offset += h.last_offset_delta + 1
        self.wake_fetchers()
        return ProduceOutcome(result.base_offset, result.log_append_time, self.log.log_start_offset)

    def wake_fetchers(self) -> None:
        for fut in self._waiters:
            if not fut.done():
                fut.set_result(None)
        self._waiters.clear()

    def add_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.add(fut)

    def remove_waiter(self, fut: asyncio.Future[None]) -> None:
        self._waiters.discard(fut)
