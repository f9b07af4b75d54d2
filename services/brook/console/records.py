"""`brook produce` and `brook consume`: records from lines and back to lines."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from .common import DEFAULT_BOOTSTRAP as B
from .common import Bootstrap, ClientSettings, CommandError, client_config, command, parse_pairs

COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")


@command
def produce(
    topic: str,
    key_separator: Annotated[
        str | None, typer.Option("--key-separator", "-k", help="split each line into key SEP value")
    ] = None,
    header: Annotated[list[str] | None, typer.Option("--header", "-H", help="k=v, repeatable")] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p", min=0)] = None,
    compression: Annotated[str, typer.Option("--compression", "-z", help=", ".join(COMPRESSIONS))] = "none",
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="read lines from a file (default: stdin)")
    ] = None,
    acks: Annotated[str, typer.Option("--acks", help="all, 1 or 0")] = "all",
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Produce one record per line of stdin or --file; prints the count and rate at the end."""
    from confluent_kafka import Producer

    if compression not in COMPRESSIONS:
        raise CommandError(f"--compression must be one of {', '.join(COMPRESSIONS)}", 2)
    headers = list(parse_pairs(header, "--header").items())
    conf = {**client_config(bootstrap, x), "acks": acks, "compression.type": compression, "linger.ms": 5}
    p = Producer(conf)
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(err.str())

    try:
        source = file.open("rb") if file is not None else sys.stdin.buffer
    except OSError as e:
        raise CommandError(f"--file {file}: {e.strerror}", 2) from e
    size = file.stat().st_size if file is not None else 0
    progress = _progress(size) if file is not None and sys.stderr.isatty() else None
    count, nbytes, start = 0, 0, time.monotonic()
    with source:
        for raw in source:
            line = raw.rstrip(b"\r\n")
            key: bytes | None = None
            if key_separator is not None:
                k, sep, v = line.partition(key_separator.encode())
                key, line = (k, v) if sep else (None, line)
            kwargs: dict[str, Any] = {"key": key, "value": line, "headers": headers, "on_delivery": delivered}
            if partition is not None:
                kwargs["partition"] = partition
            while True:
                try:
                    p.produce(topic, **kwargs)
                    break
                except BufferError:
                    p.poll(0.1)
            p.poll(0)
            count += 1
            nbytes += len(raw)
            if progress is not None and count % 1000 == 0:
                progress(nbytes)
    left = p.flush(60)
    seconds = max(time.monotonic() - start, 1e-6)
    if progress is not None:
        progress(size)
    if failures or left:
        raise CommandError(
            f"{len(failures) + left} of {count} records not delivered: {(failures or ['timed out'])[0]}"
        )
    print(
        f"produced {count} records to {topic} in {seconds:.2f} s ({count / seconds:,.0f} records/s, "
        f"{nbytes / seconds / 1e6:.2f} MB/s)",
        file=sys.stderr,
    )


def _progress(total: int) -> Any:
    from rich.progress import BarColumn, Progress, TransferSpeedColumn

    bar = Progress(BarColumn(), TransferSpeedColumn(), transient=True)
    task = bar.add_task("produce", total=total)
    bar.start()

    def update(done: int) -> None:
        bar.update(task, completed=done)
        if done >= total:
            bar.stop()

    return update


@command
def consume(
    topic: str,
    group: Annotated[
        str | None, typer.Option("--group", "-g", help="consume as this group (commits offsets)")
    ] = None,
    from_beginning: Annotated[bool, typer.Option("--from-beginning")] = False,
    offset: Annotated[
        int | None, typer.Option("--offset", help="start at this offset in every partition")
    ] = None,
    from_timestamp: Annotated[
        int | None, typer.Option("--from-timestamp", help="start at this time (ms since epoch)")
    ] = None,
    num: Annotated[int | None, typer.Option("--num", "-n", min=1, help="stop after N records")] = None,
    fmt: Annotated[
        str,
        typer.Option(
            "--format", help="template: {topic} {partition} {offset} {timestamp} {key} {value} {headers}"
        ),
    ] = "{value}",
    timeout: Annotated[
        float | None, typer.Option("--timeout", help="stop after this many idle seconds")
    ] = None,
    bootstrap: Bootstrap = B,
    x: ClientSettings = None,
) -> None:
    """Print records as lines (Ctrl-C to stop, or -n / --timeout)."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, Consumer, TopicPartition

    if sum([from_beginning, offset is not None, from_timestamp is not None]) > 1:
        raise CommandError("give at most one of --from-beginning, --offset, --from-timestamp", 2)
    conf = {
        **client_config(bootstrap, x),
        "group.id": group or f"brook-cli-{int(time.time() * 1000)}",
        "enable.auto.commit": group is not None,
        "auto.offset.reset": "earliest" if from_beginning else "latest",
    }
    c = Consumer(conf)
    try:
        md = c.list_topics(topic, timeout=15)
        t = md.topics.get(topic)
        if t is None or t.error is not None:
            raise CommandError(f"topic {topic} does not exist")
        if group is not None and offset is None and from_timestamp is None:
            c.subscribe([topic])
        else:
            start = OFFSET_BEGINNING if from_beginning else OFFSET_END if offset is None else offset
            tps = [TopicPartition(topic, p, start) for p in sorted(t.partitions)]
            if from_timestamp is not None:
                tps = c.offsets_for_times(
                    [TopicPartition(topic, p, from_timestamp) for p in sorted(t.partitions)], 15
                )
            c.assign(tps)
        seen, idle_since = 0, time.monotonic()
        while num is None or seen < num:
            m = c.poll(0.5)
            if m is None:
                if timeout is not None and time.monotonic() - idle_since > timeout:
                    break
                continue
            err = m.error()
            if err is not None:
                if err.fatal():
                    raise CommandError(err.str())
                continue
            idle_since = time.monotonic()
            seen += 1
            print(_format(fmt, m), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        c.close()


def _text(b: bytes | None) -> str:
    return "" if b is None else b.decode(errors="replace")


def _format(fmt: str, m: Any) -> str:
    try:
        return (
            fmt.format(
                topic=m.topic(),
                partition=m.partition(),
                offset=m.offset(),
                timestamp=m.timestamp()[1],
                key=_text(m.key()),
                value=_text(m.value()),
                headers=",".join(f"{k}={_text(v)}" for k, v in (m.headers() or [])),
            )
            .replace("\\t", "\t")
            .replace("\\n", "\n")
        )
    except (KeyError, IndexError, ValueError) as e:
        raise CommandError(
            f"--format: {e} (use {{topic}} {{partition}} {{offset}} {{timestamp}} {{key}} {{value}}"
            " {{headers}})",
            2,
        ) from e
