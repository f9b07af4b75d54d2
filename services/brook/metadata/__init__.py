"""Cluster metadata in etcd: broker registration, controller election, topics and partition state
with compare-and-swap and controller fencing, typed watches, and replica placement.

The only room that talks to etcd (and the only one allowed to import aetcd: client.py, channel.py).
Layout: keys.py.
"""

from .changes import MetadataSnapshot, MetadataWatch
from .channel import EtcdAuth
from .client import EtcdClient
from .election import ControllerElection
from .errors import (
    BrokerIdInUseError,
    CompactedError,
    ConflictError,
    EtcdAuthError,
    EtcdUnavailableError,
    FencedError,
    MetadataError,
    TopicExistsError,
    UnknownTopicError,
)
from .keys import KeyLayout
from .kv import KeyValue, WatchEvent
from .lease import KeptLease
from .models import (
    NO_LEADER,
    AclKey,
    AclsChanged,
    BrokerInfo,
    BrokerJoined,
    BrokerLeft,
    ControllerChanged,
    ControllerInfo,
    EntityConfigsChanged,
    MetadataEvent,
    PartitionState,
    PartitionStateChanged,
    PartitionStateDeleted,
    ProducerIdBlock,
    Reassignment,
    ReassignmentChanged,
    ScramChanged,
    ScramCredential,
    TopicChanged,
    TopicCreated,
    TopicDeleted,
    TopicRecord,
    ViewMarked,
)
from .placement import PlacementError, assign_replicas
from .registry import BrokerRegistry, MembershipWatch, live_brokers
from .store import EtcdMetadataStore
from .watch import PrefixWatch, watch_key, watch_prefix

__all__ = [
    "NO_LEADER",
    "AclKey",
    "AclsChanged",
    "BrokerIdInUseError",
    "BrokerInfo",
    "BrokerJoined",
    "BrokerLeft",
    "BrokerRegistry",
    "CompactedError",
    "ConflictError",
    "ControllerChanged",
    "ControllerElection",
    "ControllerInfo",
    "EntityConfigsChanged",
    "EtcdAuth",
    "EtcdAuthError",
    "EtcdClient",
    "EtcdMetadataStore",
    "EtcdUnavailableError",
    "FencedError",
    "KeptLease",
    "KeyLayout",
    "KeyValue",
    "MembershipWatch",
    "MetadataError",
    "MetadataEvent",
    "MetadataSnapshot",
    "MetadataWatch",
    "PartitionState",
    "PartitionStateChanged",
    "PartitionStateDeleted",
    "PlacementError",
    "PrefixWatch",
    "ProducerIdBlock",
    "Reassignment",
    "ReassignmentChanged",
    "ScramChanged",
    "ScramCredential",
    "TopicChanged",
    "TopicCreated",
    "TopicDeleted",
    "TopicExistsError",
    "TopicRecord",
    "UnknownTopicError",
    "ViewMarked",
    "WatchEvent",
    "assign_replicas",
    "live_brokers",
    "watch_key",
    "watch_prefix",
]
