"""`brook topic ...`: create, list, describe, alter-config, add-partitions, delete."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from .common import DEFAULT_BOOTSTRAP as B
from .common import (
    Bootstrap,
    ClientSettings,
    CommandError,
    Output,
    OutputOpt,
    admin,
    command,
    emit,
    metadata,
    offset_spec,
    parse_pairs,
    result,
)
from .iceberg import CatalogUri, lag_rows

app = typer.Typer(
    help="Topics: create, list, describe, change configs and partitions, delete.", no_args_is_help=True
)


@app.command("create")
@command
def create(
    name: str,
    partitions: Annotated[int, typer.Option("--partitions", "-p", min=1)] = 1,
    replicas: Annotated[int, typer.Option("--replicas", "-r", min=1)] = 1,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="key=value, repeatable")] = None,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Create a topic with N partitions and replication factor R."""
    from confluent_kafka.admin import NewTopic

    configs = parse_pairs(config, "--config")
    a = admin(bootstrap, x)
    result(a.create_topics([NewTopic(name, partitions, replicas, config=configs)])[name], f"create {name}")
    emit(
        output,
        {"topic": name, "partitions": partitions, "replicas": replicas, "config": configs},
        ["TOPIC", "PARTITIONS", "REPLICAS"],
        [(name, partitions, replicas)],
    )


@app.command("list")
@command
def list_(
    internal: Annotated[bool, typer.Option("--internal", "-i", help="include __consumer_offsets")] = False,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Every topic with its partition count and replication factor."""
    md = metadata(admin(bootstrap, x))
    rows = []
    for name in sorted(md.topics):
        if name.startswith("__") and not internal:
            continue
        parts = md.topics[name].partitions
        rf = max((len(p.replicas) for p in parts.values()), default=0)
        rows.append((name, len(parts), rf))
    emit(
        output,
        [{"topic": n, "partitions": p, "replicas": r} for n, p, r in rows],
        ["TOPIC", "PARTITIONS", "REPLICAS"],
        rows,
    )


def _offsets(a: Any, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
    from confluent_kafka import TopicPartition

    out: dict[int, tuple[int, int]] = {}
    if not partitions:
        return out
    start = a.list_offsets({TopicPartition(topic, p): offset_spec("earliest") for p in partitions})
    end = a.list_offsets({TopicPartition(topic, p): offset_spec("latest") for p in partitions})
    for p in partitions:
        s = result(start[TopicPartition(topic, p)], f"start offset of {topic}-{p}").offset
        e = result(end[TopicPartition(topic, p)], f"end offset of {topic}-{p}").offset
        out[p] = (s, e)
    return out


@app.command("describe")
@command
def describe(
    name: str,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
    iceberg_catalog_uri: CatalogUri = None,
) -> None:
    """Partitions (leader, replicas, ISR, start and end offsets), configs with their source, and for an
    Iceberg topic its table's offsets and lag."""
    from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

    a = admin(bootstrap, x)
    md = metadata(a, name)
    t = md.topics.get(name)
    if t is None or t.error is not None:
        reason = t.error.str() if t is not None and t.error is not None else "not found"
        raise CommandError(f"topic {name}: {reason}")
    ids = sorted(t.partitions)
    offsets = _offsets(a, name, ids)
    parts = []
    for i in ids:
        p = t.partitions[i]
        s, e = offsets[i]
        parts.append(
            {
                "partition": i,
                "leader": p.leader,
                "replicas": list(p.replicas),
                "isr": list(p.isrs),
                "start_offset": s,
                "end_offset": e,
            }
        )
    res = ConfigResource(ResourceType.TOPIC, name)
    entries = result(a.describe_configs([res])[res], f"configs of {name}")
    configs = [
        {"name": k, "value": v.value, "source": ConfigSource(v.source).name}
        for k, v in sorted(entries.items())
    ]
    table = lag_rows(a, name, ids, {c["name"]: c["value"] for c in configs}, iceberg_catalog_uri)
    data: dict[str, Any] = {"topic": name, "partitions": parts, "configs": configs}
    if table is not None:
        data["iceberg"] = table
    if output is not Output.table:
        emit(output, data)
        return
    emit(
        output,
        None,
        ["PARTITION", "LEADER", "REPLICAS", "ISR", "START", "END"],
        [
            (p["partition"], p["leader"], p["replicas"], p["isr"], p["start_offset"], p["end_offset"])
            for p in parts
        ],
    )
    print()
    emit(output, None, ["CONFIG", "VALUE", "SOURCE"], [(c["name"], c["value"], c["source"]) for c in configs])
    if table is not None:
        print()
        unknown = "? (--iceberg-catalog-uri)"
        emit(
            output,
            None,
            ["PARTITION", "ICEBERG TABLE", "STABLE OFFSET", "TABLE OFFSET", "TABLE LAG"],
            [
                (
                    r["partition"],
                    r["table"],
                    r["stable_offset"],
                    _or(r["table_offset"], unknown),
                    _or(r["lag"], "?"),
                )
                for r in table
            ],
        )


def _or(value: int | None, unknown: str) -> int | str:
    return unknown if value is None else value


@app.command("alter-config")
@command
def alter_config(
    name: str,
    set_: Annotated[list[str] | None, typer.Option("--set", "-s", help="key=value, repeatable")] = None,
    delete: Annotated[
        list[str] | None, typer.Option("--delete", "-d", help="key to reset, repeatable")
    ] = None,
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Set or reset topic configs (IncrementalAlterConfigs)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    sets = parse_pairs(set_, "--set")
    if not sets and not delete:
        raise CommandError("nothing to change: give --set key=value or --delete key", 2)
    ops = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()]
    ops += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete or []]
    res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=ops)
    a = admin(bootstrap, x)  # referenced until its futures resolve
    result(a.incremental_alter_configs([res])[res], f"alter configs of {name}")
    print(
        f"altered {name}: "
        + ", ".join([f"{k}={v}" for k, v in sets.items()] + [f"-{k}" for k in delete or []])
    )


@app.command("add-partitions")
@command
def add_partitions(
    name: str,
    total: Annotated[int, typer.Option("--total", "-t", min=1, help="the new partition count")],
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Grow a topic to --total partitions."""
    from confluent_kafka.admin import NewPartitions

    a = admin(bootstrap, x)  # referenced until its futures resolve
    result(a.create_partitions([NewPartitions(name, total)])[name], f"add partitions to {name}")
    print(f"{name} has {total} partitions")


@app.command("delete")
@command
def delete_(
    names: list[str],
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Delete topics."""
    a = admin(bootstrap, x)  # referenced until its futures resolve
    futs = a.delete_topics(list(names))
    for n in names:
        result(futs[n], f"delete {n}")
        print(f"deleted {n}")
