"""`brook broker`'s options, one table: each flag with its BROOK_* variable, type, default, help, the
subject its --help groups it under, and the Kafka property it stands for in a server.properties (None
for Brook's own settings). The CLI builds its command and reads properties files from it; DescribeConfigs
takes the types and docs of the Kafka names it does not otherwise describe."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from brook.groups import GroupSettings
from brook.security.authorizer import AUTHORIZERS
from brook.security.connection_limits import UNLIMITED
from brook.security.tls import CLIENT_AUTH
from brook.transactions import TxnSettings

RACK_AWARE_SELECTOR = "org.apache.kafka.common.replica.RackAwareReplicaSelector"

# --help's subjects, in the order they are shown.
CONFIG = "Configuration file"
CLUSTER = "Cluster and replication"
SECURITY = "Listeners and security"
STORAGE = "Storage and retention"
GROUPS = "Groups and transactions"
LIMITS = "Limits and quotas"
OBSERVABILITY = "Observability"

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


_G, _T = GroupSettings(), TxnSettings()
_BOOL = ("true", "false")
_O = Option
OPTIONS: tuple[Option, ...] = (
    # Cluster and replication
    _O("--node-id", "str", None, "broker.id / node.id (default: a pod's ordinal, else 0)", CLUSTER),
    _O(
        "--node-id-from-hostname",
        "flag",
        False,
        "take the broker id from the hostname's -<ordinal> suffix (StatefulSet pods)",
        CLUSTER,
    ),
    _O(
        "--etcd-endpoints",
        "str",
        "",
        "comma-separated etcd endpoints (host:port); empty: a single node with local metadata",
        CLUSTER,
    ),
    _O("--etcd-cacert", "str", None, "PEM CA bundle to verify etcd's certificate (TLS)", CLUSTER),
    _O("--etcd-cert", "str", None, "PEM client certificate for etcd (--client-cert-auth)", CLUSTER),
    _O("--etcd-key", "str", None, "PEM private key of --etcd-cert", CLUSTER),
    _O(
        "--etcd-user",
        "str",
        None,
        "etcd user (password: BROOK_ETCD_PASSWORD or --etcd-password-file)",
        CLUSTER,
    ),
    _O("--etcd-password-file", "str", None, "file holding the etcd user's password", CLUSTER),
    _O("--cluster-name", "str", "default", "the key prefix of this cluster in etcd", CLUSTER),
    _O("--lease-ttl", "int", 6, "seconds after which a silent broker is dead", CLUSTER, minimum=1),
    _O("--rack", "str", None, "this broker's rack", CLUSTER, kafka="broker.rack"),
    _O("--rack-file", "str", None, "a file holding the rack (empty or missing: none)", CLUSTER),
    _O(
        "--replica-selector-class",
        "str",
        None,
        f"{RACK_AWARE_SELECTOR} lets consumers with client.rack fetch from an in-sync follower in their "
        "rack (KIP-392); empty: from leaders",
        CLUSTER,
        kafka="replica.selector.class",
    ),
    _O(
        "--default-replication-factor",
        "int",
        1,
        "replicas of auto-created topics",
        CLUSTER,
        "default.replication.factor",
        minimum=1,
    ),
    _O(
        "--replica-lag-time-max-ms",
        "int",
        30_000,
        "a follower this far behind leaves the ISR",
        CLUSTER,
        "replica.lag.time.max.ms",
        minimum=1,
        kafka_type="LONG",
    ),
    _O(
        "--replication-throttled-rate",
        "int",
        0,
        "bytes/s for replicas being added by a reassignment; 0: unlimited",
        CLUSTER,
        "leader.replication.throttled.rate",
        minimum=0,
        kafka_type="LONG",
    ),
    _O(
        "--auto-leader-rebalance-enable",
        "bool",
        "true",
        "give partitions back to their preferred leader",
        CLUSTER,
        "auto.leader.rebalance.enable",
        choices=_BOOL,
    ),
    _O(
        "--leader-imbalance-check-interval-seconds",
        "float",
        300.0,
        "how often the controller checks leader balance",
        CLUSTER,
        "leader.imbalance.check.interval.seconds",
        minimum=0,
        kafka_type="LONG",
    ),
    _O(
        "--leader-imbalance-per-broker-percentage",
        "int",
        10,
        "a broker leading this many percent fewer of its preferred partitions gets them back",
        CLUSTER,
        "leader.imbalance.per.broker.percentage",
        minimum=0,
    ),
    _O(
        "--controlled-shutdown-timeout",
        "float",
        15.0,
        "seconds to hand leaderships over at a stop",
        CLUSTER,
        minimum=0,
    ),
    _O(
        "--event-loop",
        "str",
        "asyncio",
        "asyncio (sendfile) or uvloop",
        CLUSTER,
        choices=("asyncio", "uvloop"),
    ),
    # Listeners and security
    _O("--host", "str", "127.0.0.1", "address to listen on (without --listeners)", SECURITY),
    _O("--port", "int", 9092, "port to listen on (without --listeners)", SECURITY, minimum=0, maximum=65535),
    _O("--advertised-host", "str", None, "host clients are told to use (default: --host)", SECURITY),
    _O(
        "--advertised-port",
        "int",
        None,
        "port clients are told to use (default: --port)",
        SECURITY,
        minimum=0,
        maximum=65535,
    ),
    _O(
        "--listeners",
        "str",
        "",
        "NAME://host:port,... (default: PLAINTEXT on --host:--port)",
        SECURITY,
        "listeners",
    ),
    _O(
        "--advertised-listeners",
        "str",
        "",
        "NAME://host:port,... clients are told",
        SECURITY,
        "advertised.listeners",
    ),
    _O(
        "--advertised-listeners-file",
        "str",
        None,
        "read advertised.listeners from this file at start-up (exclusive with --advertised-listeners)",
        SECURITY,
    ),
    _O(
        "--listener-security-protocol-map",
        "str",
        "",
        "NAME:PROTOCOL,... (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL); default: names are protocols",
        SECURITY,
        "listener.security.protocol.map",
    ),
    _O(
        "--inter-broker-listener-name",
        "str",
        "",
        "the listener brokers replicate over; default: the first",
        SECURITY,
        "inter.broker.listener.name",
    ),
    _O(
        "--ssl-keystore-location",
        "str",
        None,
        "PEM: certificate chain (and key unless --ssl-key-location)",
        SECURITY,
        "ssl.keystore.location",
    ),
    _O("--ssl-key-location", "str", None, "PEM private key (password: BROOK_SSL_KEY_PASSWORD)", SECURITY),
    _O(
        "--ssl-truststore-location",
        "str",
        None,
        "PEM CA certificates for client certificates",
        SECURITY,
        "ssl.truststore.location",
    ),
    _O(
        "--ssl-client-auth",
        "str",
        "none",
        "client certificates: none, requested or required",
        SECURITY,
        "ssl.client.auth",
        choices=tuple(CLIENT_AUTH),
    ),
    _O(
        "--ssl-client-auth-listeners",
        "str",
        "",
        "NAME,... listeners that require a client certificate whatever --ssl-client-auth says "
        "(Kafka's listener.name.<name>.ssl.client.auth=required)",
        SECURITY,
    ),
    _O(
        "--sasl-enabled-mechanisms",
        "str",
        "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "SASL mechanisms of SASL listeners (and OAUTHBEARER)",
        SECURITY,
        "sasl.enabled.mechanisms",
        kafka_type="LIST",
    ),
    _O(
        "--connections-max-reauth-ms",
        "int",
        0,
        "KIP-368 session lifetime; 0: no re-authentication",
        SECURITY,
        "connections.max.reauth.ms",
        minimum=0,
        kafka_type="LONG",
    ),
    _O(
        "--connection-failed-authentication-delay-ms",
        "int",
        100,
        "wait before closing a connection that failed authentication",
        SECURITY,
        "connection.failed.authentication.delay.ms",
        minimum=0,
    ),
    _O(
        "--sasl-mechanism-inter-broker-protocol",
        "str",
        "PLAIN",
        "mechanism brokers log in to each other with",
        SECURITY,
        "sasl.mechanism.inter.broker.protocol",
    ),
    _O(
        "--sasl-oauthbearer-jwks-endpoint-url",
        "str",
        "",
        "the identity provider's JWKS (signing keys)",
        SECURITY,
        "sasl.oauthbearer.jwks.endpoint.url",
    ),
    _O(
        "--sasl-oauthbearer-jwks-endpoint-refresh-ms",
        "int",
        3_600_000,
        "how often the JWKS is fetched again",
        SECURITY,
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        minimum=1,
        kafka_type="LONG",
    ),
    _O(
        "--sasl-oauthbearer-expected-audience",
        "str",
        "",
        "comma-separated; a token needs one of them",
        SECURITY,
        "sasl.oauthbearer.expected.audience",
        kafka_type="LIST",
    ),
    _O(
        "--sasl-oauthbearer-expected-issuer",
        "str",
        "",
        "the issuer tokens must name",
        SECURITY,
        "sasl.oauthbearer.expected.issuer",
    ),
    _O(
        "--sasl-oauthbearer-sub-claim-name",
        "str",
        "sub",
        "the claim holding the principal's name",
        SECURITY,
        "sasl.oauthbearer.sub.claim.name",
    ),
    _O(
        "--sasl-oauthbearer-clock-skew-seconds",
        "int",
        30,
        "clock difference allowed with the identity provider",
        SECURITY,
        "sasl.oauthbearer.clock.skew.seconds",
        minimum=0,
    ),
    _O(
        "--sasl-oauthbearer-unsecured",
        "bool",
        "false",
        "accept unsigned tokens (development only)",
        SECURITY,
        choices=_BOOL,
    ),
    _O("--inter-broker-sasl-username", "str", None, "this broker's SASL user towards the others", SECURITY),
    _O(
        "--inter-broker-sasl-password-file",
        "str",
        None,
        "file holding that user's password (else BROOK_INTER_BROKER_SASL_PASSWORD)",
        SECURITY,
    ),
    _O(
        "--authorizer-class-name",
        "str",
        "",
        f"{' or '.join(AUTHORIZERS)} enforces ACLs; empty: none",
        SECURITY,
        "authorizer.class.name",
        kafka_type="STRING",
    ),
    _O(
        "--super-users",
        "str",
        "",
        "principals allowed everything, e.g. 'User:admin;User:broker'",
        SECURITY,
        "super.users",
    ),
    _O(
        "--allow-everyone-if-no-acl-found",
        "bool",
        "false",
        "allow a resource that has no ACL",
        SECURITY,
        "allow.everyone.if.no.acl.found",
        choices=_BOOL,
    ),
    # Storage and retention
    _O("--data-dir", "str", "data", "the log directory", STORAGE, "log.dirs"),
    _O(
        "--topic-default",
        "list",
        None,
        "broker-wide default for a topic config, e.g. retention.ms=60000 (repeat the flag; "
        "BROOK_TOPIC_DEFAULT: space-separated pairs); a server.properties says log.retention.ms=60000",
        STORAGE,
    ),
    _O(
        "--auto-create-topics",
        "bool",
        "true",
        "create a topic when a client asks for it",
        STORAGE,
        "auto.create.topics.enable",
        choices=_BOOL,
    ),
    _O(
        "--num-partitions",
        "int",
        1,
        "partitions of auto-created topics",
        STORAGE,
        "num.partitions",
        minimum=1,
    ),
    _O(
        "--retention-check-interval-ms",
        "int",
        300_000,
        "how often retention is applied",
        STORAGE,
        "log.retention.check.interval.ms",
        minimum=1,
        kafka_type="LONG",
    ),
    _O(
        "--flush-check-interval-ms",
        "int",
        1000,
        "how often the flusher checks logs",
        STORAGE,
        "log.flush.scheduler.interval.ms",
        minimum=1,
        kafka_type="LONG",
    ),
    _O(
        "--log-cleaner-backoff-ms",
        "int",
        15_000,
        "pause between compaction passes",
        STORAGE,
        "log.cleaner.backoff.ms",
        minimum=0,
        kafka_type="LONG",
    ),
    _O(
        "--log-dir-probe-interval-ms",
        "int",
        5000,
        "how often an offline log directory is probed to bring it back; -1: only at a restart",
        STORAGE,
        minimum=-1,
    ),
    _O(
        "--log-dir-min-free-bytes",
        "int",
        16 * 1024 * 1024,
        "free space an offline log directory needs to come back",
        STORAGE,
        minimum=0,
    ),
    # Groups and transactions
    _O(
        "--offsets-topic-partitions",
        "int",
        _G.offsets_topic_partitions,
        "partitions of __consumer_offsets",
        GROUPS,
        "offsets.topic.num.partitions",
        minimum=1,
    ),
    _O(
        "--offsets-topic-replication-factor",
        "int",
        0,
        "replicas of __consumer_offsets; 0: 3 in a cluster, else 1",
        GROUPS,
        "offsets.topic.replication.factor",
        minimum=0,
        kafka_type="SHORT",
    ),
    _O(
        "--offsets-retention-minutes",
        "int",
        _G.offsets_retention_minutes,
        "how long an empty group's offsets are kept",
        GROUPS,
        "offsets.retention.minutes",
        minimum=1,
    ),
    _O(
        "--offsets-retention-check-interval-ms",
        "int",
        _G.offsets_retention_check_interval_ms,
        "how often stale offsets expire",
        GROUPS,
        "offsets.retention.check.interval.ms",
        minimum=1,
        kafka_type="LONG",
    ),
    _O(
        "--group-min-session-timeout-ms",
        "int",
        _G.min_session_timeout_ms,
        "smallest session timeout a member may ask for",
        GROUPS,
        "group.min.session.timeout.ms",
        minimum=0,
    ),
    _O(
        "--group-initial-rebalance-delay-ms",
        "int",
        _G.initial_rebalance_delay_ms,
        "wait for members before a first rebalance",
        GROUPS,
        "group.initial.rebalance.delay.ms",
        minimum=0,
    ),
    _O(
        "--producer-id-expiration-ms",
        "int",
        86_400_000,
        "a producer id idle this long (and in no transaction) is forgotten",
        GROUPS,
        "producer.id.expiration.ms",
        minimum=1,
    ),
    _O(
        "--producer-id-expiration-check-interval-ms",
        "int",
        600_000,
        "how often idle producer ids are looked for",
        GROUPS,
        "producer.id.expiration.check.interval.ms",
        minimum=1,
    ),
    _O(
        "--transaction-state-log-num-partitions",
        "int",
        _T.state_log_partitions,
        "partitions of __transaction_state",
        GROUPS,
        "transaction.state.log.num.partitions",
        minimum=1,
    ),
    _O(
        "--transaction-state-log-replication-factor",
        "int",
        0,
        "replicas of __transaction_state; 0: 3 in a cluster, else 1",
        GROUPS,
        "transaction.state.log.replication.factor",
        minimum=0,
        kafka_type="SHORT",
    ),
    _O(
        "--transaction-max-timeout-ms",
        "int",
        _T.max_timeout_ms,
        "largest transaction.timeout.ms a producer may ask for",
        GROUPS,
        "transaction.max.timeout.ms",
        minimum=1,
    ),
    _O(
        "--transaction-abort-timed-out-transaction-cleanup-interval-ms",
        "int",
        _T.abort_check_interval_ms,
        "how often transactions open longer than their timeout are aborted",
        GROUPS,
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        minimum=1,
    ),
    _O(
        "--transactional-id-expiration-ms",
        "int",
        _T.id_expiration_ms,
        "a transactional id unused this long, with no transaction in progress, is forgotten",
        GROUPS,
        "transactional.id.expiration.ms",
        minimum=1,
    ),
    _O(
        "--transaction-remove-expired-transaction-cleanup-interval-ms",
        "int",
        _T.remove_expired_interval_ms,
        "how often expired transactional ids are looked for",
        GROUPS,
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        minimum=1,
    ),
    # Limits and quotas
    _O(
        "--max-request-bytes",
        "int",
        100 * 1024 * 1024,
        "largest request accepted",
        LIMITS,
        "socket.request.max.bytes",
        minimum=1,
    ),
    _O(
        "--max-connections",
        "int",
        -1,
        "-1: 3/4 of the open-file limit",
        LIMITS,
        "max.connections",
        minimum=-1,
    ),
    _O(
        "--max-connections-per-ip",
        "int",
        UNLIMITED,
        "connections from one address",
        LIMITS,
        "max.connections.per.ip",
        minimum=0,
    ),
    _O(
        "--max-connections-per-ip-overrides",
        "str",
        "",
        "host:count,... exceptions to --max-connections-per-ip",
        LIMITS,
        "max.connections.per.ip.overrides",
    ),
    _O(
        "--max-connection-creation-rate",
        "int",
        UNLIMITED,
        "new connections per second",
        LIMITS,
        "max.connection.creation.rate",
        minimum=0,
    ),
    _O(
        "--max-broker-partitions",
        "int",
        -1,
        "replicas this broker may host (each keeps a file open); -1: 1/4 of the open-file limit",
        LIMITS,
        "max.broker.partitions",
        minimum=-1,
    ),
    _O(
        "--quota-window-num",
        "int",
        11,
        "samples of a client quota's rate",
        LIMITS,
        "quota.window.num",
        minimum=1,
    ),
    _O(
        "--quota-window-size-seconds",
        "float",
        1.0,
        "length of one quota sample",
        LIMITS,
        "quota.window.size.seconds",
        minimum=0.001,
        kafka_type="INT",
    ),
    # Observability
    _O("--metrics-host", "str", "0.0.0.0", "address of /metrics, /healthz and /readyz", OBSERVABILITY),
    _O(
        "--metrics-port",
        "int",
        0,
        "port of /metrics, /healthz, /readyz; 0: any free port; -1: off",
        OBSERVABILITY,
        minimum=-1,
        maximum=65535,
    ),
)
BY_DEST = {o.dest: o for o in OPTIONS}
BY_KAFKA = {o.kafka: o for o in OPTIONS if o.kafka}
