"""The `brook` command: `brook broker` (one broker, as a pod runs it) and `brook dev up`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from brook.broker.settings import BrokerSettings
from brook.dev.up import dev_up
from brook.groups import GroupSettings
from brook.server.runner import run


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"BROOK_{name}", default)


def _broker_settings(a: argparse.Namespace) -> BrokerSettings:
    topic_defaults = {}
    for item in a.topic_default or []:
        key, sep, value = item.partition("=")
        if not sep:
            sys.exit(f"--topic-default expects name=value, got '{item}'")
        topic_defaults[key] = value
    return BrokerSettings(
        node_id=a.node_id,
        host=a.host,
        port=a.port,
        advertised_host=a.advertised_host,
        advertised_port=a.advertised_port,
        rack=a.rack,
        data_dir=Path(a.data_dir),
        auto_create_topics=a.auto_create_topics == "true",
        num_partitions=a.num_partitions,
        max_request_bytes=a.max_request_bytes,
        retention_check_interval_ms=a.retention_check_interval_ms,
        cleaner_backoff_ms=a.log_cleaner_backoff_ms,
        event_loop=a.event_loop,
        topic_defaults=topic_defaults,
        groups=GroupSettings(
            offsets_topic_partitions=a.offsets_topic_partitions,
            offsets_retention_minutes=a.offsets_retention_minutes,
            offsets_retention_check_interval_ms=a.offsets_retention_check_interval_ms,
            min_session_timeout_ms=a.group_min_session_timeout_ms,
            initial_rebalance_delay_ms=a.group_initial_rebalance_delay_ms,
        ),
    )


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="brook", description="Brook: a Kafka-compatible broker")
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    sub = p.add_subparsers(dest="command", required=True)

    b = sub.add_parser("broker", help="run one broker (flags, or BROOK_* environment variables)")
    b.add_argument("--node-id", type=int, default=int(_env("NODE_ID", "0") or 0))
    b.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    b.add_argument("--port", type=int, default=int(_env("PORT", "9092") or 9092))
    b.add_argument("--advertised-host", default=_env("ADVERTISED_HOST"))
    b.add_argument("--advertised-port", type=int, default=None)
    b.add_argument("--rack", default=_env("RACK"))
    b.add_argument("--data-dir", default=_env("DATA_DIR", "data"))
    b.add_argument(
        "--auto-create-topics", choices=("true", "false"), default=_env("AUTO_CREATE_TOPICS", "true")
    )
    b.add_argument("--num-partitions", type=int, default=int(_env("NUM_PARTITIONS", "1") or 1))
    b.add_argument("--max-request-bytes", type=int, default=100 * 1024 * 1024)
    b.add_argument("--retention-check-interval-ms", type=int, default=300_000)
    b.add_argument(
        "--log-cleaner-backoff-ms", type=int, default=15_000, help="pause between compaction passes"
    )
    b.add_argument("--event-loop", choices=("asyncio", "uvloop"), default=_env("EVENT_LOOP", "asyncio"))
    b.add_argument(
        "--topic-default",
        action="append",
        metavar="NAME=VALUE",
        help="broker-wide default for a topic config, e.g. retention.ms=60000",
    )

    g = GroupSettings()
    b.add_argument(
        "--offsets-topic-partitions",
        type=int,
        default=g.offsets_topic_partitions,
        help="offsets.topic.num.partitions",
    )
    b.add_argument("--offsets-retention-minutes", type=int, default=g.offsets_retention_minutes)
    b.add_argument(
        "--offsets-retention-check-interval-ms", type=int, default=g.offsets_retention_check_interval_ms
    )
    b.add_argument("--group-min-session-timeout-ms", type=int, default=g.min_session_timeout_ms)
    b.add_argument("--group-initial-rebalance-delay-ms", type=int, default=g.initial_rebalance_delay_ms)

    d = sub.add_parser("dev", help="local development cluster")
    dsub = d.add_subparsers(dest="dev_command", required=True)
    up = dsub.add_parser("up", help="start a local broker and print its bootstrap address")
    up.add_argument("--data-dir", type=Path, default=None, help="default: a new temporary directory")
    up.add_argument("--port", type=int, default=9092)
    up.add_argument("--event-loop", choices=("asyncio", "uvloop"), default="asyncio")
    return p


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command == "broker":
        settings = _broker_settings(args)
        run(settings, lambda s: print(f"bootstrap: {settings.advertised[0]}:{s.port}", flush=True))
    elif args.command == "dev":
        dev_up(args.data_dir, args.port, args.event_loop)


if __name__ == "__main__":
    main()
