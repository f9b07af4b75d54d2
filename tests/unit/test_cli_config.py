"""`brook broker --config server.properties`: Java's properties syntax, Kafka's names, what is ignored and
why, and the precedence flag > --override > file > default."""

from __future__ import annotations

from pathlib import Path

import pytest

from brook.cli_config import ConfigError, Resolved, read_properties, resolve
from brook.settings.options import BY_DEST, Option


def _resolve(
    tmp_path: Path,
    text: str | None,
    overrides: tuple[str, ...] = (),
    flags: dict[str, object] | None = None,
    in_pod: bool = False,
) -> Resolved:
    config = None
    if text is not None:
        config = tmp_path / "server.properties"
        config.write_text(text)
    given = flags or {}

    def flag(o: Option) -> tuple[str, object] | None:
        return (o.flag, given[o.dest]) if o.dest in given else None

    return resolve(config, overrides, flag, in_pod)


def test_java_properties_syntax(tmp_path: Path) -> None:
    f = tmp_path / "p.properties"
    f.write_text(
        "# a comment\n! another\nnum.partitions = 3\nlog.dirs: /var/lib/brook\n"
        "super.users=User:admin;\\\n    User:bob\nsasl.oauthbearer.expected.issuer=https\\://id.example\n"
    )
    assert read_properties(f) == {
        "num.partitions": "3",
        "log.dirs": "/var/lib/brook",
        "super.users": "User:admin;User:bob",
        "sasl.oauthbearer.expected.issuer": "https://id.example",
    }


def test_precedence_flag_over_override_over_file_over_default(tmp_path: Path) -> None:
    file = "num.partitions=2\n"
    assert _resolve(tmp_path, None).values.num_partitions == 1
    assert _resolve(tmp_path, file).values.num_partitions == 2
    assert _resolve(tmp_path, file, ("num.partitions=3",)).values.num_partitions == 3
    r = _resolve(tmp_path, file, ("num.partitions=3",), {"num_partitions": "4"})
    assert r.values.num_partitions == 4
    assert r.static["num.partitions"] == "4"  # described as the broker runs it


def test_kafka_names_become_settings(tmp_path: Path) -> None:
    r = _resolve(
        tmp_path,
        "auto.create.topics.enable=FALSE\nlog.retention.hours=24\nlog.retention.bytes=1000\n"
        "min.insync.replicas=2\nlog.dir=/d\nbroker.id=7\nsocket.request.max.bytes=2000000\n",
    )
    v = r.values
    assert (v.auto_create_topics, v.data_dir, v.node_id, v.max_request_bytes) == ("false", "/d", "7", 2000000)
    assert sorted(v.topic_default) == [
        "min.insync.replicas=2",
        "retention.bytes=1000",
        "retention.ms=86400000",
    ]
    assert r.static["log.retention.hours"] == "24" and "log.retention.ms" not in r.static
    assert r.warnings == []


def test_the_most_specific_retention_wins(tmp_path: Path) -> None:
    r = _resolve(tmp_path, "log.retention.hours=24\nlog.retention.minutes=5\n")
    assert r.values.topic_default == ["retention.ms=300000"]
    r = _resolve(
        tmp_path,
        "log.retention.ms=60000\nlog.retention.hours=24\n",
        flags={"topic_default": ["retention.ms=1"]},
    )
    assert r.values.topic_default == [
        "retention.ms=60000",
        "retention.ms=1",
    ]  # the flag's comes last: it wins


def test_kafka_design_only_properties_are_named_with_why(tmp_path: Path) -> None:
    r = _resolve(
        tmp_path,
        "process.roles=broker,controller\nzookeeper.connect=zk:2181\nnum.io.threads=8\nnode.id=3\n"
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://:9093\ncontroller.listener.names=CONTROLLER\n"
        "frobnicate=1\nfoo.bar=2\n",
        in_pod=True,
    )
    assert r.values.listeners == "PLAINTEXT://127.0.0.1:9092"
    assert r.values.node_id is None  # the pod's ordinal
    text = "\n".join(r.warnings)
    assert "process.roles, controller.listener.names" in text and "KRaft" in text
    assert "zookeeper.connect" in text and "num.io.threads" in text
    assert "node.id" in text and "ordinal" in text
    assert "controller listener CONTROLLER" in text
    (unknown,) = [w for w in r.warnings if w.startswith("unknown")]
    assert unknown == "unknown properties, ignored (Brook has no such setting): frobnicate, foo.bar"


@pytest.mark.parametrize(
    ("text", "overrides", "message"),
    [
        (
            "num.partitions=0",
            (),
            "server.properties: num.partitions=0: must be an integer from 1 to 2147483647",
        ),
        ("", ("num.partitions=many",), "--override: num.partitions=many: must be an integer from 1 to"),
        (
            "auto.create.topics.enable=maybe",
            (),
            "auto.create.topics.enable=maybe: must be one of true, false",
        ),
        ("log.segment.bytes=1", (), "log.segment.bytes=1: log.segment.bytes must be an integer from 14 to"),
        ("log.dirs=/a,/b", (), "log.dirs=/a,/b: Brook keeps one log directory per broker"),
        ("", ("num.partitions",), "--override expects key=value, got 'num.partitions'"),
    ],
)
def test_invalid_values_name_key_value_and_range(
    tmp_path: Path, text: str, overrides: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ConfigError) as e:
        _resolve(tmp_path, text, overrides)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_options_have_kafka_names_once() -> None:
    names = [o.kafka for o in BY_DEST.values() if o.kafka]
    assert len(names) == len(set(names))
