"""`brook cluster ...`: info (brokers, controller, under-replicated and offline partitions) and
elect-leaders."""

from __future__ import annotations

from typing import Annotated

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
    result,
)

app = typer.Typer(
    help="The cluster: brokers, controller, partition health, leader elections.", no_args_is_help=True
)


@app.command("info")
@command
def info(bootstrap: Bootstrap = B, output: OutputOpt = Output.table, x: ClientSettings = None) -> None:
    """Brokers with their racks, the controller, under-replicated and offline partitions."""
    a = admin(bootstrap, x)
    desc = result(a.describe_cluster(), "describe cluster")
    md = metadata(a)
    under, offline = [], []
    for name, t in sorted(md.topics.items()):
        for i, p in sorted(t.partitions.items()):
            if p.leader < 0:
                offline.append(f"{name}-{i}")
            elif len(p.isrs) < len(p.replicas):
                under.append(f"{name}-{i}")
    controller = desc.controller.id if desc.controller is not None else None
    brokers = [
        {"id": n.id, "host": n.host, "port": n.port, "rack": n.rack}
        for n in sorted(desc.nodes, key=lambda n: n.id)
    ]
    data = {
        "cluster_id": desc.cluster_id,
        "controller": controller,
        "brokers": brokers,
        "under_replicated_partitions": under,
        "offline_partitions": offline,
    }
    if output is not Output.table:
        emit(output, data)
        return
    print(f"cluster {desc.cluster_id}, controller {controller}")
    emit(
        output,
        None,
        ["BROKER", "HOST", "PORT", "RACK"],
        [(b["id"], b["host"], b["port"], b["rack"]) for b in brokers],
    )
    print(f"under-replicated partitions: {len(under)}" + (f" ({', '.join(under[:10])})" if under else ""))
    print(f"offline partitions: {len(offline)}" + (f" ({', '.join(offline[:10])})" if offline else ""))


@app.command("elect-leaders")
@command
def elect_leaders(
    topic: Annotated[str | None, typer.Option("--topic", "-t", help="only this topic's partitions")] = None,
    unclean: Annotated[bool, typer.Option("--unclean", help="unclean election (may lose data)")] = False,
    preferred: Annotated[bool, typer.Option("--preferred", help="preferred leaders (the default)")] = False,
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Move leadership to the preferred replicas (or elect an out-of-sync replica with --unclean)."""
    from confluent_kafka import ElectionType, TopicPartition

    if unclean and preferred:
        raise CommandError("give --preferred or --unclean, not both", 2)
    a = admin(bootstrap, x)
    parts = None
    if topic is not None:
        t = metadata(a, topic).topics.get(topic)
        if t is None or t.error is not None:
            raise CommandError(f"topic {topic} does not exist")
        parts = [TopicPartition(topic, p) for p in sorted(t.partitions)]
    kind = ElectionType.UNCLEAN if unclean else ElectionType.PREFERRED
    try:
        fut = a.elect_leaders(kind, parts)
    except Exception as e:  # an older client library
        raise CommandError(f"elect-leaders: {e}") from e
    answer = result(fut, "elect leaders")
    for tp, err in sorted(answer.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        print(f"{tp.topic}-{tp.partition}: {'elected' if err is None else err.str()}")
