"""The `brook` command: `brook broker` (one broker, as a pod runs it) and `brook dev up`.

Every `brook broker` flag can also come from an environment variable BROOK_<FLAG> (upper case,
dashes as underscores), e.g. BROOK_NODE_ID, BROOK_ETCD_ENDPOINTS; flags win over the environment.
"""

from __future__ import annotations

import argparse
import errno
import logging
import os
import re
import socket
import sys
from pathlib import Path
from typing import NoReturn

from brook.broker.broker_configs import RACK_AWARE_SELECTOR
from brook.broker.settings import BrokerSettings
from brook.cli_security import add_security_flags, etcd_auth, fail, security
from brook.config import TOPIC_CONFIGS, validate_topic_config
from brook.dev.up import dev_up
from brook.groups import GroupSettings
from brook.metadata import EtcdAuthError
from brook.server.runner import run
from brook.transactions import TxnSettings

_fail = fail


class _Parser(argparse.ArgumentParser):
    """argparse with its errors as one line (no usage block): the flag and what is wrong."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see `{self.prog} --help`)")


def _check_data_dir(path: Path) -> None:
    """--data-dir must be a directory this process can write (made when missing)."""
    if path.exists() and not path.is_dir():
        _fail(f"--data-dir {path} is a file: give a directory (BROOK_DATA_DIR)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        _fail(f"--data-dir {path}: cannot create it ({e.strerror})")
    if not os.access(path, os.W_OK | os.X_OK):
        _fail(f"--data-dir {path} is not writable by this user: fix its permissions or choose another")


def _port(value: str) -> int:
    try:
        port = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{value}' is not a port number") from None
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{port} is out of range 0-65535")
    return port


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"BROOK_{name}", default)


def _env_defaults(parser: argparse.ArgumentParser) -> None:
    """Defaults from BROOK_* environment variables, typed like each flag."""
    for action in parser._actions:
        raw = _env(action.dest.upper()) if action.option_strings and action.dest != "help" else None
        if raw is None:
            continue
        if isinstance(action, argparse._StoreTrueAction):
            action.default = raw.lower() in ("1", "true", "yes")
        elif isinstance(action, argparse._AppendAction):  # BROOK_TOPIC_DEFAULT="a=1 b=2"
            action.default = raw.split()
        elif callable(action.type):
            try:
                action.default = action.type(raw)
            except (ValueError, argparse.ArgumentTypeError) as e:
                _fail(f"BROOK_{action.dest.upper()}={raw!r} is not valid for {action.option_strings[0]}: {e}")
        else:
            action.default = raw
        if action.choices is not None and action.default not in action.choices:
            _fail(
                f"BROOK_{action.dest.upper()}={raw!r}: {action.option_strings[0]} takes one of "
                + ", ".join(map(str, action.choices))
            )


def _node_id(a: argparse.Namespace) -> int:
    """--node-id, else the ordinal of a StatefulSet pod (<name>-<ordinal>) from BROOK_POD_NAME or the
    hostname when --node-id-from-hostname is given or BROOK_NODE_ID is set but empty."""
    if a.node_id is not None and str(a.node_id).strip() != "":
        return int(a.node_id)
    name = os.environ.get("BROOK_POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()
    if a.node_id_from_hostname or os.environ.get("BROOK_POD_NAME") or "BROOK_NODE_ID" in os.environ:
        m = re.search(r"-(\d+)$", name)
        if m is None:
            _fail(f"cannot take the broker id from '{name}': it does not end in -<ordinal>")
        return int(m.group(1))
    return 0


def _rack(a: argparse.Namespace) -> str | None:
    """--rack, else the content of --rack-file (written by the operator's rack init container)."""
    if a.rack:
        return str(a.rack)
    if a.rack_file:
        try:
            return Path(a.rack_file).read_text().strip() or None
        except FileNotFoundError:
            return None
    return None


def _replica_selector(a: argparse.Namespace) -> str | None:
    """--replica-selector-class: empty (leaders serve every fetch) or Kafka's RackAwareReplicaSelector."""
    name = (a.replica_selector_class or "").strip()
    if name and name != RACK_AWARE_SELECTOR:
        _fail(f"--replica-selector-class: only {RACK_AWARE_SELECTOR} is available, not '{name}'")
    return name or None


def _topic_defaults(items: list[str]) -> dict[str, str]:
    """--topic-default name=value..., checked as CreateTopics checks a topic's configs."""
    defaults = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            _fail(f"--topic-default expects name=value, got '{item}'")
        if key not in TOPIC_CONFIGS:
            _fail(f"--topic-default {item}: unknown topic config '{key}'; known: {', '.join(TOPIC_CONFIGS)}")
        if (err := validate_topic_config(key, value)) is not None:
            _fail(f"--topic-default {item}: {err}")
        defaults[key] = value
    return defaults


def _broker_settings(a: argparse.Namespace) -> BrokerSettings:
    for flag, value in (
        ("--producer-id-expiration-ms", a.producer_id_expiration_ms),
        ("--producer-id-expiration-check-interval-ms", a.producer_id_expiration_check_interval_ms),
        ("--transactional-id-expiration-ms", a.transactional_id_expiration_ms),
        (
            "--transaction-remove-expired-transaction-cleanup-interval-ms",
            a.transaction_remove_expired_transaction_cleanup_interval_ms,
        ),
    ):
        if value <= 0:
            _fail(f"{flag} must be positive, got {value}")
    topic_defaults = _topic_defaults(a.topic_default or [])
    endpoints = [e.strip() for e in (a.etcd_endpoints or "").split(",") if e.strip()]
    offsets_rf = a.offsets_topic_replication_factor or (3 if endpoints else 1)
    txn_rf = a.transaction_state_log_replication_factor or (3 if endpoints else 1)
    settings = BrokerSettings(
        node_id=_node_id(a),
        host=a.host,
        port=a.port,
        advertised_host=a.advertised_host,
        advertised_port=a.advertised_port,
        rack=_rack(a),
        replica_selector_class=_replica_selector(a),
        data_dir=Path(a.data_dir),
        auto_create_topics=a.auto_create_topics == "true",
        num_partitions=a.num_partitions,
        default_replication_factor=a.default_replication_factor,
        max_request_bytes=a.max_request_bytes,
        retention_check_interval_ms=a.retention_check_interval_ms,
        cleaner_backoff_ms=a.log_cleaner_backoff_ms,
        producer_id_expiration_ms=a.producer_id_expiration_ms,
        producer_id_expiration_check_interval_ms=a.producer_id_expiration_check_interval_ms,
        log_dir_probe_interval_ms=a.log_dir_probe_interval_ms,
        log_dir_min_free_bytes=a.log_dir_min_free_bytes,
        event_loop=a.event_loop,
        topic_defaults=topic_defaults,
        groups=GroupSettings(
            offsets_topic_partitions=a.offsets_topic_partitions,
            offsets_topic_replication_factor=offsets_rf,
            offsets_retention_minutes=a.offsets_retention_minutes,
            offsets_retention_check_interval_ms=a.offsets_retention_check_interval_ms,
            min_session_timeout_ms=a.group_min_session_timeout_ms,
            initial_rebalance_delay_ms=a.group_initial_rebalance_delay_ms,
        ),
        transactions=TxnSettings(
            state_log_partitions=a.transaction_state_log_num_partitions,
            state_log_replication_factor=txn_rf,
            max_timeout_ms=a.transaction_max_timeout_ms,
            abort_check_interval_ms=a.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            id_expiration_ms=a.transactional_id_expiration_ms,
            remove_expired_interval_ms=a.transaction_remove_expired_transaction_cleanup_interval_ms,
        ),
        etcd_endpoints=endpoints,
        etcd_auth=etcd_auth(a),
        cluster_name=a.cluster_name,
        lease_ttl_s=a.lease_ttl,
        replica_lag_time_max_ms=a.replica_lag_time_max_ms,
        replication_throttled_rate=a.replication_throttled_rate,
        controlled_shutdown_timeout_s=a.controlled_shutdown_timeout,
        auto_leader_rebalance_enable=a.auto_leader_rebalance_enable == "true",
        leader_imbalance_check_interval_s=a.leader_imbalance_check_interval_seconds,
        leader_imbalance_per_broker_percentage=a.leader_imbalance_per_broker_percentage,
        flush_check_interval_ms=a.flush_check_interval_ms,
        metrics_host=a.metrics_host,
        metrics_port=a.metrics_port,
    )
    return security(a, settings)


def _add_broker_flags(b: argparse.ArgumentParser) -> None:
    g = GroupSettings()
    b.add_argument("--node-id", default=None, help="broker.id (default: a pod's ordinal, else 0)")
    b.add_argument(
        "--node-id-from-hostname",
        action="store_true",
        help="take the broker id from the hostname's -<ordinal> suffix (StatefulSet pods)",
    )
    b.add_argument("--host", default="127.0.0.1", help="address to listen on")
    b.add_argument("--port", type=_port, default=9092)
    b.add_argument("--advertised-host", default=None, help="host clients are told to use (default: --host)")
    b.add_argument("--advertised-port", type=_port, default=None)
    b.add_argument("--rack", default=None, help="broker.rack")
    b.add_argument("--rack-file", default=None, help="a file holding the rack (empty or missing: none)")
    b.add_argument(
        "--replica-selector-class",
        default=None,
        help=f"replica.selector.class: {RACK_AWARE_SELECTOR} lets consumers with client.rack fetch "
        "from an in-sync follower in their rack (KIP-392); empty: from leaders",
    )
    b.add_argument("--metrics-host", default="0.0.0.0")
    b.add_argument(
        "--metrics-port", type=int, default=0, help="/metrics, /healthz, /readyz; 0: any free port; -1: off"
    )
    b.add_argument(
        "--flush-check-interval-ms", type=int, default=1000, help="log.flush.scheduler.interval.ms"
    )
    b.add_argument("--data-dir", default="data", help="log.dirs")
    b.add_argument(
        "--etcd-endpoints",
        default="",
        help="comma-separated etcd endpoints (host:port); empty: a single node with local metadata",
    )
    b.add_argument("--etcd-cacert", default=None, help="PEM CA bundle to verify etcd's certificate (TLS)")
    b.add_argument("--etcd-cert", default=None, help="PEM client certificate for etcd (--client-cert-auth)")
    b.add_argument("--etcd-key", default=None, help="PEM private key of --etcd-cert")
    b.add_argument(
        "--etcd-user", default=None, help="etcd user (password: BROOK_ETCD_PASSWORD or --etcd-password-file)"
    )
    b.add_argument("--etcd-password-file", default=None, help="file holding the etcd user's password")
    b.add_argument("--cluster-name", default="default", help="the key prefix of this cluster in etcd")
    b.add_argument(
        "--lease-ttl",
        type=int,
        default=2,
        help="seconds after which a silent broker is dead (etcd's minimum: 2)",
    )
    b.add_argument("--auto-create-topics", choices=("true", "false"), default="true")
    b.add_argument("--num-partitions", type=int, default=1)
    b.add_argument("--default-replication-factor", type=int, default=1)
    b.add_argument("--replica-lag-time-max-ms", type=int, default=30_000)
    b.add_argument(
        "--replication-throttled-rate",
        type=int,
        default=0,
        help="bytes/s for replicas being added by a reassignment; 0: unlimited",
    )
    b.add_argument("--auto-leader-rebalance-enable", choices=("true", "false"), default="true")
    b.add_argument(
        "--leader-imbalance-check-interval-seconds",
        type=float,
        default=300.0,
        help="how often the controller checks",
    )
    b.add_argument(
        "--leader-imbalance-per-broker-percentage",
        type=int,
        default=10,
        help="a broker leading fewer of its preferred partitions than this % short gets them back",
    )
    b.add_argument("--controlled-shutdown-timeout", type=float, default=15.0)
    b.add_argument(
        "--max-request-bytes", type=int, default=100 * 1024 * 1024, help="socket.request.max.bytes"
    )
    b.add_argument("--retention-check-interval-ms", type=int, default=300_000)
    b.add_argument(
        "--log-cleaner-backoff-ms", type=int, default=15_000, help="pause between compaction passes"
    )
    b.add_argument(
        "--producer-id-expiration-ms",
        type=int,
        default=86_400_000,
        help="a producer id idle this long (and in no transaction) is forgotten (producer.id.expiration.ms)",
    )
    b.add_argument("--producer-id-expiration-check-interval-ms", type=int, default=600_000)
    b.add_argument(
        "--log-dir-probe-interval-ms",
        type=int,
        default=5000,
        help="how often an offline log directory is probed to bring it back; -1: only at a restart",
    )
    b.add_argument(
        "--log-dir-min-free-bytes",
        type=int,
        default=16 * 1024 * 1024,
        help="free space an offline log directory needs to come back",
    )
    b.add_argument("--event-loop", choices=("asyncio", "uvloop"), default="asyncio")
    b.add_argument(
        "--topic-default",
        action="append",
        metavar="NAME=VALUE",
        help="broker-wide default for a topic config, e.g. retention.ms=60000 (repeat the flag; "
        "BROOK_TOPIC_DEFAULT: space-separated pairs)",
    )
    b.add_argument("--offsets-topic-partitions", type=int, default=g.offsets_topic_partitions)
    b.add_argument(
        "--offsets-topic-replication-factor", type=int, default=0, help="default: 3 in a cluster, else 1"
    )
    b.add_argument("--offsets-retention-minutes", type=int, default=g.offsets_retention_minutes)
    b.add_argument(
        "--offsets-retention-check-interval-ms", type=int, default=g.offsets_retention_check_interval_ms
    )
    b.add_argument("--group-min-session-timeout-ms", type=int, default=g.min_session_timeout_ms)
    t = TxnSettings()
    b.add_argument("--transaction-state-log-num-partitions", type=int, default=t.state_log_partitions)
    b.add_argument(
        "--transaction-state-log-replication-factor",
        type=int,
        default=0,
        help="default: 3 in a cluster, else 1",
    )
    b.add_argument(
        "--transaction-max-timeout-ms",
        type=int,
        default=t.max_timeout_ms,
        help="largest transaction.timeout.ms a producer may ask for",
    )
    b.add_argument(
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        type=int,
        default=t.abort_check_interval_ms,
        help="how often transactions open longer than their timeout are aborted",
    )
    b.add_argument(
        "--transactional-id-expiration-ms",
        type=int,
        default=t.id_expiration_ms,
        help="a transactional id unused this long, with no transaction in progress, is forgotten",
    )
    b.add_argument(
        "--transaction-remove-expired-transaction-cleanup-interval-ms",
        type=int,
        default=t.remove_expired_interval_ms,
        help="how often expired transactional ids are looked for",
    )
    b.add_argument("--group-initial-rebalance-delay-ms", type=int, default=g.initial_rebalance_delay_ms)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="brook", description="Brook: a Kafka-compatible broker")
    p.add_argument("--log-level", default=_env("LOG_LEVEL", "INFO"))
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    b = sub.add_parser("broker", help="run one broker")
    _add_broker_flags(b)
    add_security_flags(b)
    _env_defaults(b)

    d = sub.add_parser("dev", help="local development cluster")
    dsub = d.add_subparsers(dest="dev_command", required=True, parser_class=_Parser)
    up = dsub.add_parser("up", help="start a local Brook and print its bootstrap address")
    up.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="default: a new temporary directory; give the printed one again to restart on the same data",
    )
    up.add_argument(
        "--port", type=_port, default=9092, help="the first broker's port (others follow); 0: free ports"
    )
    up.add_argument(
        "--metrics-port",
        type=_port,
        default=9308,
        help="the first broker's /metrics, /healthz and /readyz port (others follow); 0: free ports",
    )
    up.add_argument("--brokers", type=int, default=3, help="brokers (with etcd); 1: a single node, no etcd")
    up.add_argument("--event-loop", choices=("asyncio", "uvloop"), default="asyncio")
    return p


SERVER_COMMANDS = ("broker", "dev")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    first = next((a for a in argv if not a.startswith("-")), None)
    if first not in SERVER_COMMANDS and "--log-level" not in argv:
        from brook.console import main as console_main  # topics, groups, produce, consume ...

        console_main(argv)
        return
    args = build_parser().parse_args(argv)
    level = args.log_level.upper()
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"):
        _fail(f"--log-level {args.log_level}: use DEBUG, INFO, WARNING or ERROR (or BROOK_LOG_LEVEL)")
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "broker":
        settings = _broker_settings(args)
        _check_data_dir(settings.data_dir)
        try:
            run(settings, lambda s: print(f"bootstrap: {settings.advertised[0]}:{s.port}", flush=True))
        except EtcdAuthError as e:  # wrong password, untrusted certificate: say so, no traceback
            _fail(f"cannot start: {e}")
        except OSError as e:  # start-up: a port taken, an address that is not this machine's, ...
            if e.errno == errno.EADDRINUSE:
                _fail(
                    f"a port is already in use ({e.strerror}): "
                    "choose another --port/--listeners/--metrics-port"
                )
            _fail(f"cannot start: {e.strerror or e}")
    elif args.command == "dev":
        dev_up(args.data_dir, args.port, args.brokers, args.event_loop, args.metrics_port)


if __name__ == "__main__":
    main()
