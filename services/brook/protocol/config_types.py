"""The numbers the config APIs (DescribeConfigs, AlterConfigs, IncrementalAlterConfigs) carry: which
kind of resource a config belongs to, and where a described value comes from. Kafka's
ConfigResource.Type and DescribeConfigsResponse.ConfigSource, wire values as they are."""

from __future__ import annotations

from enum import IntEnum


class ConfigResource(IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8
    GROUP = 32


class ConfigSource(IntEnum):
    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    DYNAMIC_BROKER_LOGGER_CONFIG = 6
    GROUP_CONFIG = 8
