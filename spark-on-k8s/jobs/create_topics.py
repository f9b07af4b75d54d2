"""Create the example pipeline's topics if they do not exist (idempotent).

    python create_topics.py --bootstrap HOST:PORT [--partitions 6] [--replication 3]

page-views (delete, 7 days) and page-view-counts (compacted: the latest count per page and window).
"""

from __future__ import annotations

import argparse
import sys

TOPICS = {
    "page-views": {"retention.ms": str(7 * 24 * 3600 * 1000)},
    "page-view-counts": {"cleanup.policy": "compact"},
}


def main(argv: list[str] | None = None) -> int:
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import AdminClient, NewTopic

    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--replication", type=int, default=3)
    a = ap.parse_args(argv)
    admin = AdminClient({"bootstrap.servers": a.bootstrap})
    futures = admin.create_topics(
        [NewTopic(name, a.partitions, a.replication, config=cfg) for name, cfg in TOPICS.items()]
    )
    for name, fut in futures.items():
        try:
            fut.result(30)
            print(f"created {name}")
        except KafkaException as e:
            if e.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
            print(f"exists {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
