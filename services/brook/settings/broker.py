"""Broker-level configuration (Kafka names in comments), typed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from brook.groups import GroupSettings
from brook.iceberg.ports import IcebergSettings
from brook.metadata import EtcdAuth
from brook.security.authorizer import AuthorizerSettings
from brook.security.connection_limits import ConnectionLimitSettings
from brook.security.listeners import Listener
from brook.security.quotas import QuotaSettings
from brook.security.sasl import SaslSettings
from brook.security.sasl_client import ClientCredentials
from brook.security.tls import TlsSettings
from brook.transactions import TxnSettings


@dataclass(slots=True)
class BrokerSettings:
    node_id: int = 0  # broker.id
    host: str = "127.0.0.1"  # listener bind address
    port: int = 9092
    advertised_host: str | None = None  # advertised.listeners host; defaults to host
    advertised_port: int | None = None
    rack: str | None = None  # broker.rack
    # replica.selector.class: None (consumers fetch from leaders) or RackAwareReplicaSelector (KIP-392)
    replica_selector_class: str | None = None
    data_dir: Path = Path("data")  # log.dirs
    cluster_id: str | None = None  # generated and persisted on first start when unset
    auto_create_topics: bool = True  # auto.create.topics.enable
    num_partitions: int = 1  # num.partitions
    default_replication_factor: int = 1  # default.replication.factor
    max_request_bytes: int = 100 * 1024 * 1024  # socket.request.max.bytes
    retention_check_interval_ms: int = 5 * 60 * 1000  # log.retention.check.interval.ms
    flush_check_interval_ms: int = 1000  # log.flush.scheduler.interval.ms
    cleaner_backoff_ms: int = 15_000  # log.cleaner.backoff.ms
    producer_id_expiration_ms: int = 86_400_000  # producer.id.expiration.ms
    producer_id_expiration_check_interval_ms: int = 600_000  # producer.id.expiration.check.interval.ms
    # An offline log directory (a failed write) is probed this often and comes back once it takes writes
    # with this much space free (Kafka has neither: it needs a restart); -1: only a restart brings it back.
    log_dir_probe_interval_ms: int = 5000
    log_dir_min_free_bytes: int = 16 * 1024 * 1024
    event_loop: str = "asyncio"  # asyncio (zero-copy sendfile) or uvloop (no loop.sendfile support)
    topic_defaults: dict[str, str] = field(default_factory=dict)  # broker-wide topic config defaults
    groups: GroupSettings = field(default_factory=GroupSettings)
    transactions: TxnSettings = field(default_factory=TxnSettings)
    # Cluster mode (etcd); empty endpoints: a single node with its metadata in <data_dir>/meta.json.
    etcd_endpoints: list[str] = field(default_factory=list)
    etcd_auth: EtcdAuth = field(default_factory=EtcdAuth)  # TLS and user/password towards etcd
    cluster_name: str = "default"
    lease_ttl_s: int = 2  # a broker is declared dead this long after its last lease refresh
    replica_lag_time_max_ms: int = 30_000  # replica.lag.time.max.ms
    replication_throttled_rate: int = 0  # leader.replication.throttled.rate, bytes/s; 0: unlimited
    controlled_shutdown_timeout_s: float = 15.0
    # Preferred-leader balancing (Kafka's names): leadership returns to each partition's first replica.
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_s: float = 300.0
    leader_imbalance_per_broker_percentage: int = 10
    metrics_host: str = "0.0.0.0"
    metrics_port: int = 0  # /metrics, /healthz, /readyz; 0: a free port; -1: off
    schema_registry_host: str = "0.0.0.0"
    schema_registry_port: int = -1  # the schema registry's REST API; 0: a free port; -1: off
    schema_registry_ssl_certfile: str | None = None  # PEM files: HTTPS
    schema_registry_ssl_keyfile: str | None = None
    schema_registry_basic_auth: bool = False  # basic auth against the SCRAM users
    iceberg: IcebergSettings = field(default_factory=IcebergSettings)  # the catalog of Iceberg topics
    # listeners / advertised.listeners / listener.security.protocol.map, parsed; empty: one PLAINTEXT
    # listener on host:port advertised as advertised_host:advertised_port.
    listeners: list[Listener] = field(default_factory=list)
    inter_broker_listener_name: str | None = None  # inter.broker.listener.name; default: the first
    tls: TlsSettings = field(default_factory=TlsSettings)
    sasl: SaslSettings = field(default_factory=SaslSettings)
    # This broker's SASL identity towards the others when the inter-broker listener uses SASL.
    inter_broker_credentials: ClientCredentials | None = None
    authorizer: AuthorizerSettings = field(default_factory=AuthorizerSettings)
    quotas: QuotaSettings = field(default_factory=QuotaSettings)
    connection_limits: ConnectionLimitSettings = field(default_factory=ConnectionLimitSettings)
    # Partition replicas this broker may host (each keeps a file open); -1: a quarter of the open-file
    # limit (see brook.broker.partition_budget).
    max_broker_partitions: int = -1
    # Kafka names set by the server.properties, --override or flags, with their values as given:
    # DescribeConfigs reports them as STATIC_BROKER_CONFIG.
    static_config: dict[str, str] = field(default_factory=dict)

    @property
    def advertised(self) -> tuple[str, int]:
        """The inter-broker listener's advertised address (the one registered for replication)."""
        if self.listeners:
            ib = self.inter_broker_listener()
            return ib.advertised_host, ib.advertised_port
        return (self.advertised_host or self.host, self.advertised_port or self.port)

    def effective_listeners(self) -> list[Listener]:
        if self.listeners:
            return list(self.listeners)
        host, port = self.advertised
        return [Listener("PLAINTEXT", self.host, self.port, "PLAINTEXT", host, port)]

    def inter_broker_listener(self) -> Listener:
        listeners = self.effective_listeners()
        for listener in listeners:
            if listener.name == self.inter_broker_listener_name:
                return listener
        return listeners[0]
