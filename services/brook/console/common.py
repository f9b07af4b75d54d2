"""What every `brook` client command shares: the connection options, output as a table, JSON or YAML,
and errors as one line with an exit code scripts can rely on (0 ok, 1 the cluster refused or is
unreachable, 2 bad usage)."""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from enum import StrEnum
from typing import Annotated, Any, TypeVar

import typer
import yaml
from rich.console import Console
from rich.table import Table

T = TypeVar("T")
DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
TIMEOUT_S = 15.0
DOWN_S = 3.0  # every broker refused for this long: unreachable, without waiting out TIMEOUT_S


class Output(StrEnum):
    table = "table"
    json = "json"
    yaml = "yaml"


Bootstrap = Annotated[
    str,
    typer.Option(
        "--bootstrap",
        "-b",
        envvar="BROOK_BOOTSTRAP",
        help="host:port of any broker (or several, comma-separated)",
    ),
]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", help="table, json or yaml")]
ClientSettings = Annotated[
    list[str] | None,
    typer.Option("-X", help="a client setting key=value (librdkafka names), repeatable"),
]


class CommandError(Exception):
    """A one-line message for the user; `code` is the exit status."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def client_config(bootstrap: str, settings: Sequence[str] | None) -> dict[str, Any]:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "log_level": 0,  # the client's own log lines would interleave with the output
        "logger": _Quiet(),
        "error_cb": _reachability,
    }
    for item in settings or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"-X expects key=value, got '{item}'", 2)
        conf[key.strip()] = value
    return conf


class _Quiet:
    """librdkafka's logs go nowhere; errors surface as the commands' own messages."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __getattr__(self, name: str) -> Callable[..., None]:
        return self.log


class _Reachability:
    """librdkafka's error callback: since when every broker it knows is down, and why."""

    def __init__(self) -> None:
        self.down_since: float | None = None
        self.reason = ""

    def __call__(self, err: Any) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._ALL_BROKERS_DOWN:
            self.down_since = self.down_since or time.monotonic()
        elif err.code() == KafkaError._TRANSPORT:
            self.reason = err.str()

    def unreachable(self) -> bool:
        return self.down_since is not None and time.monotonic() - self.down_since >= DOWN_S


_reachability = _Reachability()  # one command per process


def admin(bootstrap: str, settings: Sequence[str] | None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(bootstrap, settings))


def result(fut: Future[T], what: str) -> T:
    """A future's result, or a CommandError naming what failed and the broker's reason."""
    from confluent_kafka import KafkaError, KafkaException

    try:
        return fut.result(TIMEOUT_S)
    except KafkaException as e:
        err = e.args[0]
        if getattr(err, "code", lambda: None)() == KafkaError.SECURITY_DISABLED:
            raise CommandError(
                f"{what}: the cluster has no authorizer (start its brokers with --authorizer-class-name)"
            ) from e
        raise CommandError(f"{what}: {getattr(err, 'str', lambda: str(err))()}") from e
    except TimeoutError as e:
        raise CommandError(f"{what}: no answer within {TIMEOUT_S:.0f} s (is the cluster reachable?)") from e


def metadata(client: Any, topic: str | None = None) -> Any:
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + TIMEOUT_S
    while True:
        try:
            return client.list_topics(topic, timeout=min(1.0, max(deadline - time.monotonic(), 0.1)))
        except KafkaException as e:
            client.poll(0)  # serves the error callback
            if time.monotonic() >= deadline or _reachability.unreachable():
                reason = _reachability.reason or e.args[0].str()
                raise CommandError(
                    f"cannot reach the cluster: {reason} (check --bootstrap / BROOK_BOOTSTRAP)"
                ) from e


def emit(
    output: Output, data: Any, columns: Sequence[str] | None = None, rows: Iterable[Sequence[Any]] = ()
) -> None:
    """JSON or YAML of `data`; a table of `rows` under `columns` otherwise (or `data` as key: value)."""
    if output is Output.json:
        print(json.dumps(data, indent=2, sort_keys=False, default=str))
    elif output is Output.yaml:
        print(yaml.safe_dump(data, sort_keys=False), end="")
    elif columns is not None:
        table = Table(*columns, box=None, pad_edge=False, header_style="bold")
        for row in rows:
            table.add_row(*("" if v is None else str(v) for v in row))
        Console(soft_wrap=True).print(table)
    elif isinstance(data, Mapping):
        for k, v in data.items():
            print(f"{k}: {v}")


def command(fn: Callable[..., None]) -> Callable[..., None]:
    """Run a command: a CommandError (or a client error) is one line on stderr and an exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> None:
        from confluent_kafka import KafkaException

        try:
            fn(*args, **kwargs)
        except CommandError as e:
            print(f"brook: {e}", file=sys.stderr)
            raise typer.Exit(e.code) from None
        except KafkaException as e:
            print(f"brook: {e.args[0].str() if e.args else e}", file=sys.stderr)
            raise typer.Exit(1) from None
        except (BrokenPipeError, KeyboardInterrupt):
            raise typer.Exit(130) from None

    return wrapper


def parse_pairs(items: Sequence[str] | None, flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise CommandError(f"{flag} expects key=value, got '{item}'", 2)
        out[key] = value
    return out


def offset_spec(kind: str, *args: int) -> Any:
    """OffsetSpec.<kind>(*args): latest, earliest, for_timestamp."""
    from confluent_kafka.admin import OffsetSpec

    return getattr(OffsetSpec, kind)(*args)  # (untyped in confluent-kafka)
