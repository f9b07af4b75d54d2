"""The server side of the `brook` command: `brook broker` (one broker, as a pod runs it) and `brook dev
up`, added to brook.console's application by `register`. brook.cli imports this module only for these
commands and for --help: a client command does not pay for importing the broker (~0.8 s).

A broker setting comes from, highest first: its flag or BROOK_<FLAG> variable (upper case, dashes as
underscores, e.g. BROOK_NODE_ID), an `--override key=value`, the `--config` server.properties (Kafka's
property names), the default.
"""

from __future__ import annotations

import errno
import inspect
import logging
import os
import re
import socket
from enum import StrEnum
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer

from brook.cli_config import ConfigError, in_pod, resolve
from brook.cli_exit import fail
from brook.cli_security import etcd_auth, security
from brook.config import TOPIC_CONFIGS, validate_topic_config
from brook.dev.up import dev_up
from brook.groups import GroupSettings
from brook.groups.assignors import ASSIGNORS
from brook.iceberg.ports import IcebergSettings
from brook.metadata import EtcdAuthError, EtcdUnavailableError, MetadataError
from brook.server.runner import run
from brook.settings.broker import BrokerSettings
from brook.settings.options import CONFIG, OPTIONS, RACK_AWARE_SELECTOR, Option
from brook.transactions import TxnSettings

PRECEDENCE = (
    "A setting comes from, highest first: its flag (or BROOK_* variable), an --override key=value, the "
    "--config server.properties (Kafka's names), its default."
)


def _check_data_dir(path: Path) -> None:
    """--data-dir must be a directory this process can write (made when missing)."""
    if path.exists() and not path.is_dir():
        fail(f"--data-dir {path} is a file: give a directory (BROOK_DATA_DIR)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        fail(f"--data-dir {path}: cannot create it ({e.strerror})")
    if not os.access(path, os.W_OK | os.X_OK):
        fail(f"--data-dir {path} is not writable by this user: fix its permissions or choose another")


def _node_id(a: SimpleNamespace) -> int:
    """--node-id, else the ordinal of a StatefulSet pod (<name>-<ordinal>) from BROOK_POD_NAME or the
    hostname when --node-id-from-hostname is given or BROOK_NODE_ID is set but empty."""
    if a.node_id is not None and str(a.node_id).strip() != "":
        return int(a.node_id)
    name = os.environ.get("BROOK_POD_NAME") or os.environ.get("HOSTNAME") or socket.gethostname()
    if a.node_id_from_hostname or os.environ.get("BROOK_POD_NAME") or "BROOK_NODE_ID" in os.environ:
        m = re.search(r"-(\d+)$", name)
        if m is None:
            fail(f"cannot take the broker id from '{name}': it does not end in -<ordinal>")
        return int(m.group(1))
    return 0


def _rack(a: SimpleNamespace) -> str | None:
    """--rack, else the content of --rack-file (written by the operator's rack init container)."""
    if a.rack:
        return str(a.rack)
    if a.rack_file:
        try:
            return Path(a.rack_file).read_text().strip() or None
        except FileNotFoundError:
            return None
    return None


def _replica_selector(a: SimpleNamespace) -> str | None:
    """--replica-selector-class: empty (leaders serve every fetch) or Kafka's RackAwareReplicaSelector."""
    name = (a.replica_selector_class or "").strip()
    if name and name != RACK_AWARE_SELECTOR:
        fail(f"--replica-selector-class: only {RACK_AWARE_SELECTOR} is available, not '{name}'")
    return name or None


def _consumer_assignors(value: str) -> tuple[str, ...]:
    """--group-consumer-assignors: Brook's assignors by name (Kafka also takes class names)."""
    names = tuple(n.strip() for n in value.split(",") if n.strip())
    unknown = [n for n in names if n not in ASSIGNORS]
    if not names or unknown:
        bad = ", ".join(unknown) or "(none)"
        fail(f"--group-consumer-assignors: unknown {bad}; known: {', '.join(ASSIGNORS)}")
    return names


def _topic_defaults(items: list[str]) -> dict[str, str]:
    """--topic-default name=value..., checked as CreateTopics checks a topic's configs."""
    defaults = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            fail(f"--topic-default expects name=value, got '{item}'")
        if key not in TOPIC_CONFIGS:
            fail(f"--topic-default {item}: unknown topic config '{key}'; known: {', '.join(TOPIC_CONFIGS)}")
        if (err := validate_topic_config(key, value)) is not None:
            fail(f"--topic-default {item}: {err}")
        defaults[key] = value
    return defaults


def _broker_settings(a: SimpleNamespace) -> BrokerSettings:
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
            classic_max_size=a.group_max_size,
            initial_rebalance_delay_ms=a.group_initial_rebalance_delay_ms,
            consumer_heartbeat_interval_ms=a.group_consumer_heartbeat_interval_ms,
            consumer_session_timeout_ms=a.group_consumer_session_timeout_ms,
            consumer_max_size=a.group_consumer_max_size,
            consumer_assignors=_consumer_assignors(a.group_consumer_assignors),
            consumer_migration_policy=a.group_consumer_migration_policy,
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
        schema_registry_host=a.schema_registry_host,
        schema_registry_port=a.schema_registry_port,
        schema_registry_ssl_certfile=a.schema_registry_ssl_certfile,
        schema_registry_ssl_keyfile=a.schema_registry_ssl_keyfile,
        schema_registry_basic_auth=a.schema_registry_basic_auth,
        iceberg=IcebergSettings(
            a.iceberg_catalog_uri or None,
            a.iceberg_warehouse or None,
            _pairs("--iceberg-catalog-property", a.iceberg_catalog_property or []),
            a.iceberg_schema_registry_url or None,
        ),
    )
    return security(a, settings)


def _pairs(flag: str, items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            fail(f"{flag} expects name=value, got '{item}'")
        out[key] = value
    return out


def _metavar(o: Option) -> str:
    if o.choices:
        return "|".join(o.choices)
    return {"int": "INT", "float": "NUMBER", "list": "NAME=VALUE"}.get(o.kind, "TEXT")


def _help(o: Option) -> str:
    """The option's help, with its server.properties name and default (click sees no default: a value
    left unset gives way to --override and the file)."""
    extra = [f"server.properties: {o.kafka}"] if o.kafka else []
    if o.default not in (None, "", False):
        extra.append(f"default: {o.default}")
    return o.help + (f" ({'; '.join(extra)})" if extra else "")


def _parameter(o: Option) -> inspect.Parameter:
    common: dict[str, Any] = {"envvar": o.env, "help": _help(o), "rich_help_panel": o.panel}
    annotation: Any
    if o.kind == "flag":
        annotation, default = Annotated[bool, typer.Option(o.flag, **common)], False
    elif o.kind == "list":
        annotation = Annotated[list[str] | None, typer.Option(o.flag, metavar=_metavar(o), **common)]
        default = None
    else:
        annotation = Annotated[str | None, typer.Option(o.flag, metavar=_metavar(o), **common)]
        default = None
    return inspect.Parameter(o.dest, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)


def broker(
    ctx: typer.Context,
    config: Path | None = None,
    override: list[str] | None = None,
    **values: Any,
) -> None:
    # typer sees one parameter per option (_broker_signature); each value arrives unconverted, so
    # that a value left unset gives way to --override and the file, and errors name where it came from.
    def given(o: Option) -> tuple[str, object] | None:
        source = getattr(ctx.get_parameter_source(o.dest), "name", None)  # typer's own click's enum
        if source == "COMMANDLINE":
            return o.flag, values[o.dest]
        if source == "ENVIRONMENT":
            return o.env, values[o.dest]
        return None

    try:
        resolved = resolve(config, override or [], given, in_pod())
    except ConfigError as e:
        fail(str(e))
    for warning in resolved.warnings:
        logging.getLogger("brook.cli").warning("%s", warning)
    settings = _broker_settings(resolved.values)
    settings.static_config = resolved.static
    _check_data_dir(settings.data_dir)
    try:
        run(settings, lambda s: print(f"bootstrap: {settings.advertised[0]}:{s.port}", flush=True))
    except EtcdAuthError as e:  # wrong password, untrusted certificate: say so, no traceback
        fail(f"cannot start: {e}")
    except MetadataError as e:  # etcd unreachable, the broker id taken, ...: one line, as above
        logging.getLogger("brook.cli").debug("start-up failed", exc_info=True)
        hint = " (check --etcd-endpoints / BROOK_ETCD_ENDPOINTS)"
        fail(f"cannot start: {e}" + (hint if isinstance(e, EtcdUnavailableError) else ""))
    except OSError as e:  # start-up: a port taken, an address that is not this machine's, ...
        if e.errno == errno.EADDRINUSE:
            fail(f"a port is already in use ({e.strerror}): choose another --port/--listeners/--metrics-port")
        fail(f"cannot start: {e.strerror or e}")


def _broker_signature() -> None:
    """`brook broker`'s parameters, one per row of brook.settings.options.OPTIONS."""
    file_options = [
        inspect.Parameter(
            "config",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                Path | None,
                typer.Option(
                    "--config",
                    envvar="BROOK_CONFIG",
                    metavar="FILE",
                    help="a server.properties with Kafka's property names",
                    rich_help_panel=CONFIG,
                ),
            ],
        ),
        inspect.Parameter(
            "override",
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                list[str] | None,
                typer.Option(
                    "--override",
                    metavar="KEY=VALUE",
                    help="a property over the --config file's, as kafka-server-start.sh takes it (repeat it)",
                    rich_help_panel=CONFIG,
                ),
            ],
        ),
    ]
    ctx = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)
    params = [ctx, *file_options, *(_parameter(o) for o in OPTIONS)]
    broker.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    broker.__annotations__ = {p.name: p.annotation for p in params} | {"return": None}


_broker_signature()


class EventLoop(StrEnum):
    asyncio = "asyncio"
    uvloop = "uvloop"


dev_app = typer.Typer(help="A local development cluster.", no_args_is_help=True)


@dev_app.command("up")
def dev_up_command(
    data_dir: Annotated[
        Path | None,
        typer.Option(help="default: a new temporary directory; give the printed one again to restart on it"),
    ] = None,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="the first broker's port (others follow); 0: free ports")
    ] = 9092,
    metrics_port: Annotated[
        int,
        typer.Option(
            min=0,
            max=65535,
            help="the first broker's /metrics, /healthz and /readyz port (others follow); 0: free ports",
        ),
    ] = 9308,
    brokers: Annotated[int, typer.Option(min=1, help="brokers (with etcd); 1: a single node, no etcd")] = 3,
    event_loop: Annotated[EventLoop, typer.Option(help="the brokers' event loop")] = EventLoop.asyncio,
) -> None:
    """Start a local Brook (etcd and supervised brokers) and print its bootstrap address."""
    dev_up(data_dir, port, brokers, event_loop.value, metrics_port)


def register(app: typer.Typer) -> None:
    """Add `brook broker` and `brook dev` to `app`."""
    app.command(
        "broker",
        help=f"Run one broker. {PRECEDENCE}",
        short_help="Run one broker (--config server.properties, flags, BROOK_* variables)",
    )(broker)
    app.add_typer(dev_app, name="dev")
