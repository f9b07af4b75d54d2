"""One `brook broker` option: its flag and BROOK_* variable, type, default, help, the --help subject it is
shown under, and the Kafka property it stands for (brook.settings.options has them all)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# --help's subjects, in the order they are shown.
CONFIG = "Configuration file"
CLUSTER = "Cluster and replication"
SECURITY = "Listeners and security"
STORAGE = "Storage and retention"
GROUPS = "Groups and transactions"
LIMITS = "Limits and quotas"
OBSERVABILITY = "Observability"
REGISTRY = "Schema registry"
ICEBERG = "Iceberg topics"

# str: text; int/float: numbers (within minimum..maximum); bool: true or false; flag: a switch without a
# value; list: a repeatable flag.
Kind = Literal["str", "int", "float", "bool", "flag", "list"]


@dataclass(frozen=True, slots=True)
class Option:
    flag: str
    kind: Kind
    default: str | int | float | bool | None
    help: str
    panel: str
    kafka: str | None = None  # the server.properties name
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    maximum: float | None = None
    kafka_type: str = ""  # DescribeConfigs' type when it is not the kind's (LONG, SHORT, LIST, CLASS)

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def env(self) -> str:
        return "BROOK_" + self.dest.upper()

    @property
    def config_type(self) -> str:
        return self.kafka_type or {"int": "INT", "float": "DOUBLE", "bool": "BOOLEAN"}.get(
            self.kind, "STRING"
        )
