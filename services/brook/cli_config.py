"""Where each `brook broker` setting comes from: a flag (or its BROOK_* variable), else an --override
key=value, else the --config server.properties, else the default; Kafka's property names throughout.

Properties Brook does not know are named in one warning; those that only mean something in Kafka's own
design (ZooKeeper, the KRaft quorum, thread pools) are named as ignored with the reason; a known one with a
value out of its range stops the start with one line naming the key, the value and the range (exit 2).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from types import SimpleNamespace

import javaproperties

from brook.config import BROKER_TOPIC_SYNONYMS, validate_topic_config
from brook.settings.described import TOPIC_TO_BROKER
from brook.settings.options import OPTIONS, Option
from brook.settings.properties import (
    ID_KEYS,
    KNOWN,
    TIME_KEYS,
    TIME_SYNONYMS,
    check,
    convert,
    ignored_reason,
)

log = logging.getLogger("brook.cli")


class ConfigError(Exception):
    """A setting that stops the start: one line, exit status 2."""


def read_properties(path: Path) -> dict[str, str]:
    """A Java properties file (key=value, key: value, key value; # and ! comments; continuations;
    escapes), as Kafka's start script reads server.properties."""
    try:
        with path.open(encoding="utf-8") as f:
            return dict(javaproperties.load(f))
    except OSError as e:
        raise ConfigError(f"--config {path}: {e.strerror or e}") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path}: not a properties file ({e})") from None


def parse_overrides(items: Iterable[str]) -> dict[str, str]:
    """--override key=value ..., as kafka-server-start.sh takes them."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--override expects key=value, got '{item}'")
        out[key.strip()] = value.strip()
    return out


class Resolved:
    """The settings of one start: a namespace of every option by its dest, and the Kafka names set by
    the file, the overrides or the flags with their values as given (DescribeConfigs' static ones)."""

    def __init__(self) -> None:
        self.values = SimpleNamespace()
        self.static: dict[str, str] = {}
        self.warnings: list[str] = []


def _layered(file: Mapping[str, str], overrides: Mapping[str, str], where: str) -> dict[str, tuple[str, str]]:
    """key -> (value, where it comes from), overrides over the file."""
    out = {k: (v, where) for k, v in file.items()}
    out.update({k: (v, "--override") for k, v in overrides.items()})
    return out


def _classify(props: dict[str, tuple[str, str]], in_pod: bool, r: Resolved) -> set[str]:
    """The keys taken as settings; the ignored and unknown ones go to r.warnings."""
    taken, unknown = set(), []
    by_reason: dict[str, list[str]] = {}
    for key in props:
        reason = ignored_reason(key)
        if key in ID_KEYS and in_pod:
            reason = "in a pod the broker id is the pod's ordinal"
        if reason is not None:
            by_reason.setdefault(reason, []).append(key)
        elif key in KNOWN:
            taken.add(key)
        else:
            unknown.append(key)
    for reason, keys in by_reason.items():
        r.warnings.append(f"ignored ({reason}): {', '.join(keys)}")
    if unknown:
        r.warnings.append(f"unknown properties, ignored (Brook has no such setting): {', '.join(unknown)}")
    return taken


def _drop_controller_listeners(props: dict[str, tuple[str, str]], r: Resolved) -> None:
    """A combined KRaft node lists its controller listener with the others: Brook opens no such port."""
    names = {n.strip().upper() for n in props.get("controller.listener.names", ("", ""))[0].split(",")}
    dropped = set()
    for key in ("listeners", "advertised.listeners"):
        if key not in props:
            continue
        value, where = props[key]
        items = [i.strip() for i in value.split(",") if i.strip()]
        kept = [i for i in items if i.partition("://")[0].strip().upper() not in names]
        dropped |= {i.partition("://")[0].strip().upper() for i in items} - {
            i.partition("://")[0].strip().upper() for i in kept
        }
        props[key] = (",".join(kept), where)
    if dropped:
        r.warnings.append(
            f"ignored (Brook has no KRaft quorum): the controller listener {', '.join(sorted(dropped))}"
        )


def _topic_defaults(props: dict[str, tuple[str, str]], taken: set[str], r: Resolved) -> list[str]:
    """Topic defaults given by their broker names (log.retention.ms, min.insync.replicas, ...), as
    --topic-default name=value items."""
    items = []
    for key in sorted(taken & BROKER_TOPIC_SYNONYMS.keys() - TIME_KEYS):
        value, _ = props[key]
        items.append(f"{BROKER_TOPIC_SYNONYMS[key]}={value}")
        r.static[key] = value
    for topic, chain in TIME_SYNONYMS.items():
        for key, unit in chain:
            if key not in taken:
                continue
            value, where = props[key]
            n = int(value)  # checked
            ms = str(-1 if n == -1 else n * unit)
            if (err := validate_topic_config(topic, ms)) is not None:
                raise ConfigError(f"{where}: {key}={value}: must be -1 or a positive time ({err})")
            r.static[key] = value
            if not any(k in r.static for k, _ in chain[: chain.index((key, unit))]):
                items.append(f"{topic}={ms}")
    return items


def resolve(
    config: Path | None,
    overrides: Iterable[str],
    given: Callable[[Option], tuple[str, object] | None],
    in_pod: bool,
) -> Resolved:
    """Every option's value, highest first: `given(option)` (a flag or its variable: (what, raw value)),
    an override, the config file, the option's default."""
    r = Resolved()
    file = read_properties(config) if config is not None else {}
    props = _layered(file, parse_overrides(overrides), str(config))
    _drop_controller_listeners(props, r)
    taken = _classify(props, in_pod, r)
    for key in sorted(taken):
        text, where = props[key]
        if (err := check(key, text)) is not None:
            raise ConfigError(f"{where}: {key}={text}: {err}")
    if "log.dir" in taken and "log.dirs" not in taken:
        props["log.dirs"] = props["log.dir"]
        taken.add("log.dirs")
    ids = [k for k in ID_KEYS if k in taken]
    if ids:
        props.setdefault("node.id", props[ids[0]])
    topic_items = _topic_defaults(props, taken, r)
    for o in OPTIONS:
        flag = given(o)
        value: object
        if flag is not None:
            value = _from_flag(o, *flag)
            if o.kafka and o.kind != "list":
                r.static[o.kafka] = str(flag[1]).strip()
        elif o.dest == "node_id" and ids:
            value = props["node.id"][0].strip()
            r.static.update({k: str(value) for k in ID_KEYS})
        elif o.kafka is not None and o.kafka in taken:
            text = props[o.kafka][0]
            value = convert(o, text)[0]  # checked
            r.static[o.kafka] = text.strip()
        else:
            value = o.default
        setattr(r.values, o.dest, value)
    flags = list(r.values.topic_default or [])
    r.values.topic_default = topic_items + flags
    for item in flags:
        topic, _, given_value = item.partition("=")
        if topic in TOPIC_TO_BROKER:
            r.static[TOPIC_TO_BROKER[topic]] = given_value
    return r


def _from_flag(o: Option, what: str, raw: object) -> object:
    if o.kind in ("flag", "list"):
        return raw
    value, err = convert(o, str(raw))
    if err is None:
        return value
    if what.startswith("BROOK_"):
        raise ConfigError(f"{what}={raw!r} is not valid for {o.flag}: {err}")
    raise ConfigError(f"{o.flag} {raw}: {err}")


def in_pod() -> bool:
    return bool(os.environ.get("BROOK_POD_NAME"))
