"""`brook group ...`: list, describe (members, assignment, committed offsets, lag), reset-offsets
(a plan without --execute), delete."""

from __future__ import annotations

import datetime as dt
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
    result,
)
from .share_groups import ShareClient, plaintext

app = typer.Typer(
    help="Consumer and share groups: list, describe with lag, reset offsets, delete.", no_args_is_help=True
)


@app.command("list")
@command
def list_(bootstrap: Bootstrap = B, output: OutputOpt = Output.table, x: ClientSettings = None) -> None:
    """Every group with its state and protocol (classic, consumer: KIP-848, or share: KIP-932)."""
    a = admin(bootstrap, x)  # referenced until its futures resolve
    res = result(a.list_consumer_groups(), "list groups")
    rows = [(g.group_id, str(g.state).replace("ConsumerGroupState.", ""), _name(g.type)) for g in res.valid]
    rows = sorted(rows + [(g, state.upper(), "share") for g, state in _share_groups(bootstrap, x)])
    emit(
        output,
        [{"group": g, "state": s, "protocol": t} for g, s, t in rows],
        ["GROUP", "STATE", "PROTOCOL"],
        rows,
    )


def _share_groups(bootstrap: str, x: list[str] | None) -> list[tuple[str, str]]:
    if not plaintext(x):
        return []
    client = ShareClient(bootstrap)
    try:
        return client.list_groups()
    except CommandError:
        return []  # a broker without share groups (ListGroups v5 refused)
    finally:
        client.close()


def _share_describe(bootstrap: str, x: list[str] | None, group: str) -> tuple[Any, Any] | None:
    if not plaintext(x):
        return None
    client = ShareClient(bootstrap)
    try:
        return client.describe(group)
    except CommandError:
        return None
    finally:
        client.close()


def _share_starts(offsets: Any) -> dict[tuple[str, int], int]:
    return {
        (t.topic_name, p.partition_index): p.start_offset
        for t in offsets.topics
        for p in t.partitions
        if p.error_code == 0 and p.start_offset >= 0
    }


def _describe_share(a: Any, group: str, desc: Any, offsets: Any, output: Output) -> None:
    """A share group: members and their partitions, each partition's start offset, end and lag."""
    members = [
        {
            "member": m.member_id,
            "client": m.client_id,
            "host": m.client_host,
            "partitions": sorted(
                f"{tp.topic_name}-{p}" for tp in m.assignment.topic_partitions for p in tp.partitions
            ),
        }
        for m in desc.members
    ]
    lags = {(t.topic_name, p.partition_index): p.lag for t in offsets.topics for p in t.partitions}
    starts = _share_starts(offsets)
    ends = _ends(a, sorted(starts))
    parts = [
        {"topic": t, "partition": p, "start": starts[(t, p)], "end": ends[(t, p)], "lag": lags[(t, p)]}
        for t, p in sorted(starts)
    ]
    columns = {"TOPIC": "topic", "PARTITION": "partition", "START": "start", "END": "end", "LAG": "lag"}
    state, assignor = desc.group_state.upper(), desc.assignor_name
    if not _emit_group(output, group, state, "share", assignor, members, parts, columns):
        return
    for m in members:
        print(f"member {m['member']} ({m['client']}, {m['host']}): {', '.join(m['partitions']) or '-'}")


def _name(value: Any) -> str:
    """A ConsumerGroupType of confluent-kafka's by name: classic, consumer (unknown if not told)."""
    return str(getattr(value, "name", value)).lower() if value is not None else "unknown"


def _committed(a: Any, group: str) -> dict[tuple[str, int], int]:
    from confluent_kafka import ConsumerGroupTopicPartitions

    got = result(
        a.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group], f"offsets of {group}"
    )
    return {(tp.topic, tp.partition): tp.offset for tp in got.topic_partitions if tp.offset >= 0}


def _ends(a: Any, tps: list[tuple[str, int]], spec: Any = None) -> dict[tuple[str, int], int]:
    from confluent_kafka import TopicPartition

    if not tps:
        return {}
    futs = a.list_offsets({TopicPartition(t, p): spec or offset_spec("latest") for t, p in tps})
    return {(t, p): result(futs[TopicPartition(t, p)], f"offsets of {t}-{p}").offset for t, p in tps}


@app.command("describe")
@command
def describe(
    group: str, bootstrap: Bootstrap = B, output: OutputOpt = Output.table, x: ClientSettings = None
) -> None:
    """Members and their partitions, committed and end offsets, lag per partition and in total; for a
    share group its start offsets (below them every record is acknowledged or archived)."""
    a = admin(bootstrap, x)
    share = _share_describe(bootstrap, x, group)
    if share is not None:
        _describe_share(a, group, *share, output)
        return
    desc = result(a.describe_consumer_groups([group])[group], f"describe {group}")
    owner: dict[tuple[str, int], str] = {}
    members = []
    for m in desc.members:
        tps = [(tp.topic, tp.partition) for tp in (m.assignment.topic_partitions if m.assignment else [])]
        target = m.target_assignment.topic_partitions if getattr(m, "target_assignment", None) else None
        members.append(
            {
                "member": m.member_id,
                "client": m.client_id,
                "host": m.host,
                "partitions": [f"{t}-{p}" for t, p in sorted(tps)],
                # The consumer protocol's target (what the broker is moving the member to).
                "target": None if target is None else [f"{tp.topic}-{tp.partition}" for tp in target],
            }
        )
        for tp in tps:
            owner[tp] = m.client_id
    committed = _committed(a, group)
    keys = sorted(set(committed) | set(owner))
    ends = _ends(a, keys)
    parts: list[dict[str, Any]] = []
    for t, p in keys:
        c = committed.get((t, p))
        lag = None if c is None else max(ends[(t, p)] - c, 0)
        parts.append(
            {
                "topic": t,
                "partition": p,
                "committed": c,
                "end": ends[(t, p)],
                "lag": lag,
                "owner": owner.get((t, p)),
            }
        )
    state = str(desc.state).replace("ConsumerGroupState.", "")
    protocol = _name(getattr(desc, "type", None))
    columns = {
        "TOPIC": "topic",
        "PARTITION": "partition",
        "COMMITTED": "committed",
        "END": "end",
        "LAG": "lag",
        "OWNER": "owner",
    }
    _emit_group(output, group, state, protocol, desc.partition_assignor, members, parts, columns)


def _emit_group(
    output: Output,
    group: str,
    state: str,
    protocol: str,
    assignor: str | None,
    members: list[dict[str, Any]],
    parts: list[dict[str, Any]],
    columns: dict[str, str],
) -> bool:
    """A described group as a document, or its summary line and partition table; True for the table."""
    total = sum(max(int(x["lag"] or 0), 0) for x in parts)
    data = {
        "group": group,
        "state": state,
        "protocol": protocol,
        "assignor": assignor,
        "members": members,
        "partitions": parts,
        "total_lag": total,
    }
    if output is not Output.table:
        emit(output, data)
        return False
    print(
        f"group {group}: {state}, {protocol} protocol, assignor {assignor or '-'}, "
        f"{len(members)} member(s), total lag {total}"
    )
    emit(output, None, list(columns), [tuple(x[k] for k in columns.values()) for x in parts])
    return True


@app.command("reset-offsets")
@command
def reset_offsets(
    group: str,
    topic: Annotated[str, typer.Option("--topic", "-t")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest")] = False,
    to_datetime: Annotated[
        str | None, typer.Option("--to-datetime", help="ISO 8601, e.g. 2026-11-24T10:00:00Z")
    ] = None,
    to_offset: Annotated[int | None, typer.Option("--to-offset")] = None,
    shift_by: Annotated[int | None, typer.Option("--shift-by")] = None,
    execute: Annotated[
        bool, typer.Option("--execute", help="apply the plan (without it: only print it)")
    ] = False,
    bootstrap: Bootstrap = B,
    output: OutputOpt = Output.table,
    x: ClientSettings = None,
) -> None:
    """Move a group's committed offsets on one topic (a share group's start offsets); the group must
    have no active members."""
    from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

    chosen = [to_earliest, to_latest, to_datetime is not None, to_offset is not None, shift_by is not None]
    if sum(chosen) != 1:
        raise CommandError(
            "give exactly one of --to-earliest, --to-latest, --to-datetime, --to-offset, --shift-by", 2
        )
    a = admin(bootstrap, x)
    t = metadata(a, topic).topics.get(topic)
    if t is None or t.error is not None:
        raise CommandError(f"topic {topic} does not exist")
    tps = [(topic, p) for p in sorted(t.partitions)]
    earliest = _ends(a, tps, offset_spec("earliest"))
    latest = _ends(a, tps)
    share = _share_describe(bootstrap, x, group)
    committed = _committed(a, group) if share is None else _share_starts(share[1])
    if to_datetime is not None:
        try:
            when = dt.datetime.fromisoformat(to_datetime)
        except ValueError as e:
            raise CommandError(f"--to-datetime: '{to_datetime}' is not an ISO 8601 date-time", 2) from e
        if when.tzinfo is None:
            when = when.replace(tzinfo=dt.UTC)
        at = _ends(a, tps, offset_spec("for_timestamp", int(when.timestamp() * 1000)))
    plan = []
    for tp in tps:
        lo, hi = earliest[tp], latest[tp]
        if to_earliest:
            new = lo
        elif to_latest:
            new = hi
        elif to_datetime is not None:
            new = at[tp] if at[tp] >= 0 else hi
        elif to_offset is not None:
            new = to_offset
        else:
            assert shift_by is not None
            new = committed.get(tp, lo) + shift_by
        new = min(max(new, lo), hi)  # as kafka-consumer-groups.sh: clamped to the partition's range
        plan.append({"topic": tp[0], "partition": tp[1], "current": committed.get(tp), "new": new})
    if execute and share is not None:
        if share[0].members:
            raise CommandError(f"group {group} has {len(share[0].members)} active member(s): stop them first")
        client = ShareClient(bootstrap)
        try:
            client.alter_offsets(group, topic, {p["partition"]: p["new"] for p in plan})
        finally:
            client.close()
    elif execute:
        desc = result(a.describe_consumer_groups([group])[group], f"describe {group}")
        if desc.members:
            raise CommandError(f"group {group} has {len(desc.members)} active member(s): stop them first")
        req = ConsumerGroupTopicPartitions(
            group, [TopicPartition(p["topic"], p["partition"], p["new"]) for p in plan]
        )
        result(a.alter_consumer_group_offsets([req])[group], f"reset offsets of {group}")
    data = {"group": group, "executed": execute, "offsets": plan}
    if output is not Output.table:
        emit(output, data)
        return
    emit(
        output,
        None,
        ["TOPIC", "PARTITION", "CURRENT", "NEW"],
        [(p["topic"], p["partition"], p["current"], p["new"]) for p in plan],
    )
    print("offsets reset" if execute else "(plan only: add --execute to apply it)")


@app.command("delete")
@command
def delete_(groups: list[str], bootstrap: Bootstrap = B, x: ClientSettings = None) -> None:
    """Delete consumer groups (with no active members) and their committed offsets."""
    a = admin(bootstrap, x)  # referenced until its futures resolve
    futs = a.delete_consumer_groups(list(groups))
    for g in groups:
        result(futs[g], f"delete {g}")
        print(f"deleted {g}")
