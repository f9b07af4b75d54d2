"""A partition's end offset asked the way an application would: retried while a leader moves."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

# Right after a leader change the new leader answers OFFSET_NOT_AVAILABLE until its high watermark
# reaches its epoch's start (as Kafka); a client with old metadata is told NOT_LEADER_FOR_PARTITION.
# librdkafka's get_watermark_offsets retries none of these.
RETRIABLE = {
    KafkaError.OFFSET_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError._TIMED_OUT,
}


def end_offset(cons: Consumer, topic: str, partition: int, timeout: float = 30) -> int:
    """The partition's high watermark."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return int(cons.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1])
        except KafkaException as e:
            if e.args[0].code() not in RETRIABLE or time.monotonic() > deadline:
                raise
            time.sleep(0.2)
