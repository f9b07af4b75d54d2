"""Typed views of the custom resources' specs, with the CRD's defaults applied.

The API server applies the CRD defaults and validation; this module applies the same defaults again (a
test checks they equal the CRD's) and re-checks what the operator relies on, so a spec that bypassed
the schema (an older object, an API server without defaulting) is reported, not half-applied. It also
checks what a structural schema cannot express: config names and values, cross-field rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from brook.config import validate_topic_config

from .brokerconfig import normalize_value, validate_broker_config
from .iceberg_spec import ClusterIceberg, parse_cluster_iceberg, topic_configs
from .oauth_spec import OAuth, parse_oauth, shared_oauth

DEFAULT_ETCD_IMAGE = "quay.io/coreos/etcd:v3.5.17"
DEFAULT_RACK_TOPOLOGY_KEY = "topology.kubernetes.io/zone"
MAX_CLUSTER_NAME = 45  # <name>-broker-<ordinal> and the controller-revision-hash label fit in 63
QUANTITY = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?$")
TOPIC_NAME = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LISTENER_NAME = re.compile(r"^[a-z]([a-z0-9-]{0,13}[a-z0-9])?$")
ENDPOINT = re.compile(r"^https?://[^\s/]+$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$")
URL = re.compile(r"^https?://\S+$")


class SpecError(ValueError):
    """The spec cannot be applied; `errors` lists every problem found."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass(frozen=True, slots=True)
class Storage:
    type: str = "persistent"  # persistent | ephemeral
    size: str = "10Gi"
    storage_class_name: str | None = None
    delete_claim: bool = False


@dataclass(frozen=True, slots=True)
class ManagedEtcd:
    replicas: int = 3
    image: str = DEFAULT_ETCD_IMAGE
    size: str = "1Gi"
    storage_class_name: str | None = None
    resources: dict[str, dict[str, str | int]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SecretKey:
    name: str
    key: str


@dataclass(frozen=True, slots=True)
class EtcdTls:
    """TLS towards an external etcd: the CA bundle of its server certificate and, for etcd's
    --client-cert-auth, a kubernetes.io/tls Secret (tls.crt, tls.key) of the brokers' certificate."""

    ca: SecretKey | None = None  # None: the system's CAs
    client_secret: str | None = None


@dataclass(frozen=True, slots=True)
class EtcdUser:
    user: str
    password: SecretKey


@dataclass(frozen=True, slots=True)
class Etcd:
    endpoints: tuple[str, ...] = ()
    managed: ManagedEtcd | None = None
    tls: EtcdTls | None = None  # external endpoints only
    auth: EtcdUser | None = None


LISTENER_TYPES = ("internal", "nodeport", "loadbalancer")
AUTHENTICATIONS = ("none", "scram-sha-512", "plain", "tls", "oauth")
# The operator's own listener: brokers replicate over it and the operator administers through it.
REPLICATION_LISTENER = "replication"
REPLICATION_PORT = 9091


@dataclass(frozen=True, slots=True)
class Listener:
    name: str = "plain"
    port: int = 9092
    type: str = "internal"  # internal | nodeport | loadbalancer
    tls: bool = False
    authentication: str = "none"  # none | scram-sha-512 | plain | tls (client certificates) | oauth
    oauth: OAuth | None = None  # authentication oauth: how the brokers check tokens
    # External listeners: the host clients use for broker <ordinal> (else the Service's address), and
    # the first node port (broker i gets node_port + 1 + i, the bootstrap node_port).
    advertised_hosts: dict[int, str] = field(default_factory=dict)
    node_port: int | None = None

    @property
    def external(self) -> bool:
        return self.type != "internal"

    @property
    def security_protocol(self) -> str:
        """Kafka's name for what the listener speaks (listener.security.protocol.map)."""
        sasl = self.authentication in ("scram-sha-512", "plain", "oauth")
        if self.tls:
            return "SASL_SSL" if sasl else "SSL"
        return "SASL_PLAINTEXT" if sasl else "PLAINTEXT"


@dataclass(frozen=True, slots=True)
class Authorization:
    enabled: bool = False
    super_users: tuple[str, ...] = ()  # Kafka principals, e.g. "User:admin"


@dataclass(frozen=True, slots=True)
class Certificates:
    issuer: str = "operator"  # operator: a CA of the operator's own | cert-manager: Certificates
    validity_days: int = 365
    renew_before_days: int = 30
    cert_manager_issuer: str | None = None  # cert-manager: the Issuer/ClusterIssuer name
    cert_manager_issuer_kind: str = "ClusterIssuer"


METRICS_HOSTS = ("0.0.0.0", "::")  # what kubelet probes and Prometheus reach at the pod's IP


@dataclass(frozen=True, slots=True)
class Metrics:
    enabled: bool = True
    port: int = 9308
    host: str = "0.0.0.0"  # the bind address of /metrics, /healthz, /readyz (--metrics-host)


@dataclass(frozen=True, slots=True)
class SchemaRegistry:
    enabled: bool = False  # every broker serves the registry (brook broker --schema-registry-port)
    port: int = 8081
    tls: bool = False  # HTTPS with the brokers' certificate (valid for the bootstrap Service)
    basic_auth: bool = False  # HTTP basic auth against the SCRAM users (a SASL_PLAINTEXT listener)


@dataclass(frozen=True, slots=True)
class Autoscaling:
    enabled: bool = False
    min_replicas: int = 1
    max_replicas: int | None = None
    prometheus_url: str | None = None
    bytes_in_per_broker: int | None = None
    partitions_per_broker: int | None = None
    scale_up_window_seconds: int = 300
    scale_down_window_seconds: int = 900
    cooldown_seconds: int = 600


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    replicas: int = 3
    image: str | None = None  # None: the operator's own image
    image_pull_policy: str = "IfNotPresent"
    log_level: str = "INFO"
    storage: Storage = field(default_factory=Storage)
    resources: dict[str, dict[str, str | int]] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)  # Kafka names, string values
    rack_topology_key: str | None = None  # None: no rack awareness
    etcd: Etcd | None = None
    listeners: tuple[Listener, ...] = (Listener(),)
    metrics: Metrics = field(default_factory=Metrics)
    schema_registry: SchemaRegistry = field(default_factory=SchemaRegistry)
    autoscaling: Autoscaling = field(default_factory=Autoscaling)
    iceberg: ClusterIceberg = field(default_factory=ClusterIceberg)
    authorization: Authorization = field(default_factory=Authorization)
    certificates: Certificates = field(default_factory=Certificates)
    replication_port: int = REPLICATION_PORT  # the operator's replication listener (when secured)

    @property
    def listener(self) -> Listener:
        """The in-cluster client listener: the bootstrap Service's port (the first internal one)."""
        return next((li for li in self.listeners if not li.external), self.listeners[0])

    @property
    def secured(self) -> bool:
        """TLS or authentication anywhere: the brokers replicate over a mutual-TLS listener of the
        operator's and the operator administers through it with a certificate of its own."""
        return self.authorization.enabled or any(
            li.tls or li.authentication != "none" for li in self.listeners
        )


@dataclass(frozen=True, slots=True)
class TopicSpec:
    cluster: str
    topic_name: str
    partitions: int | None = None  # None: the cluster's num.partitions
    replication_factor: int | None = None  # None: the cluster's default.replication.factor
    config: dict[str, str] = field(default_factory=dict)


class _Reader:
    """Reads typed fields from an untyped mapping, collecting errors instead of raising."""

    def __init__(self) -> None:
        self.errors: list[str] = []

    def obj(self, m: Mapping[str, Any], key: str, path: str) -> Mapping[str, Any] | None:
        v = m.get(key)
        if v is None:
            return None
        if not isinstance(v, Mapping):
            self.errors.append(f"{path}.{key} must be an object")
            return None
        return v

    def int_(
        self,
        m: Mapping[str, Any],
        key: str,
        path: str,
        default: int,
        lo: int | None = None,
        hi: int | None = None,
    ) -> int:
        v = self.opt_int(m, key, path, lo, hi)
        return default if v is None else v

    def opt_int(
        self, m: Mapping[str, Any], key: str, path: str, lo: int | None = None, hi: int | None = None
    ) -> int | None:
        v = m.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int):
            self.errors.append(f"{path}.{key} must be an integer")
            return None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            bounds = f">= {lo}" if hi is None else f"between {lo} and {hi}"
            self.errors.append(f"{path}.{key} must be {bounds}, got {v}")
            return None
        return v

    def bool_(self, m: Mapping[str, Any], key: str, path: str, default: bool) -> bool:
        v = m.get(key)
        if v is None:
            return default
        if not isinstance(v, bool):
            self.errors.append(f"{path}.{key} must be true or false")
            return default
        return v

    def str_(
        self,
        m: Mapping[str, Any],
        key: str,
        path: str,
        default: str | None = None,
        *,
        pattern: re.Pattern[str] | None = None,
        choices: tuple[str, ...] = (),
    ) -> str | None:
        v = m.get(key)
        if v is None:
            return default
        if not isinstance(v, str) or not v:
            self.errors.append(f"{path}.{key} must be a non-empty string")
            return default
        if pattern is not None and not pattern.match(v):
            self.errors.append(f"{path}.{key} '{v}' is not valid")
            return default
        if choices and v not in choices:
            self.errors.append(f"{path}.{key} must be one of {', '.join(choices)}, got '{v}'")
            return default
        return v

    def resources(self, m: Mapping[str, Any], key: str, path: str) -> dict[str, dict[str, str | int]]:
        r = self.obj(m, key, path)
        out: dict[str, dict[str, str | int]] = {}
        if r is None:
            return out
        for part in ("limits", "requests"):
            q = self.obj(r, part, f"{path}.{key}")
            if q is None:
                continue
            vals: dict[str, str | int] = {}
            for name, value in q.items():
                if isinstance(value, bool) or not isinstance(value, int | str):
                    self.errors.append(f"{path}.{key}.{part}.{name} must be a quantity")
                else:
                    vals[str(name)] = value
            out[part] = dict(sorted(vals.items()))
        return out

    def config(self, m: Mapping[str, Any], key: str, path: str) -> dict[str, str]:
        c = self.obj(m, key, path)
        out: dict[str, str] = {}
        for name, value in (c or {}).items():
            s = normalize_value(value)
            if s is None:
                self.errors.append(f"{path}.{key}.{name} must be a string, number or boolean")
            else:
                out[str(name)] = s
        return dict(sorted(out.items()))


def parse_cluster(name: str, spec: Mapping[str, Any] | None) -> ClusterSpec:
    """The typed spec of a Cluster named `name`; raises SpecError listing every problem."""
    r = _Reader()
    s: Mapping[str, Any] = spec or {}
    p = "spec"
    if len(name) > MAX_CLUSTER_NAME:
        r.errors.append(f"the Cluster name has at most {MAX_CLUSTER_NAME} characters")

    st = r.obj(s, "storage", p) or {}
    storage = Storage(
        type=r.str_(st, "type", f"{p}.storage", "persistent", choices=("persistent", "ephemeral")) or "",
        size=r.str_(st, "size", f"{p}.storage", "10Gi", pattern=QUANTITY) or "",
        storage_class_name=r.str_(st, "storageClassName", f"{p}.storage"),
        delete_claim=r.bool_(st, "deleteClaim", f"{p}.storage", False),
    )

    rack_key: str | None = None
    rack = r.obj(s, "rack", p)
    if rack is not None:
        rack_key = r.str_(rack, "topologyKey", f"{p}.rack", DEFAULT_RACK_TOPOLOGY_KEY)

    etcd = _parse_etcd(r, s, p)

    replication_port = r.int_(s, "replicationPort", p, REPLICATION_PORT, 1024, 65535)
    listeners = _parse_listeners(r, s, p, replication_port)

    mt = r.obj(s, "metrics", p) or {}
    metrics = Metrics(
        enabled=r.bool_(mt, "enabled", f"{p}.metrics", True),
        port=r.int_(mt, "port", f"{p}.metrics", 9308, 1024, 65535),
        host=r.str_(mt, "host", f"{p}.metrics", "0.0.0.0", choices=METRICS_HOSTS) or "0.0.0.0",
    )
    for li in listeners:
        if metrics.port == li.port:
            r.errors.append(f"{p}.metrics.port must differ from the listener port {li.port}")

    sr = r.obj(s, "schemaRegistry", p) or {}
    registry = SchemaRegistry(
        enabled=r.bool_(sr, "enabled", f"{p}.schemaRegistry", False),
        port=r.int_(sr, "port", f"{p}.schemaRegistry", 8081, 1024, 65535),
        tls=r.bool_(sr, "tls", f"{p}.schemaRegistry", False),
        basic_auth=r.bool_(sr, "basicAuth", f"{p}.schemaRegistry", False),
    )
    if registry.enabled:
        taken = {li.port for li in listeners} | {metrics.port}
        if registry.port in taken:
            r.errors.append(f"{p}.schemaRegistry.port must differ from the listener and metrics ports")
        # The registry is a Kafka client of its own broker: through a plain listener, else (a secured
        # cluster) through the replication listener with the broker's own certificate.
        if registry.tls and not any(li.tls for li in listeners):
            r.errors.append(f"{p}.schemaRegistry.tls uses the brokers' certificate: give a listener tls true")
        # The registry checks a user:password by logging in to a SCRAM listener (with or without TLS).
        if registry.basic_auth and not any(li.authentication == "scram-sha-512" for li in listeners):
            r.errors.append(
                f"{p}.schemaRegistry.basicAuth needs a listener with authentication scram-sha-512"
            )

    autoscaling = _parse_autoscaling(r, s, p)
    config = r.config(s, "config", p)
    r.errors.extend(f"{p}.config: {e}" for e in validate_broker_config(config))

    out = ClusterSpec(
        replicas=r.int_(s, "replicas", p, 3, 1),
        image=r.str_(s, "image", p),
        image_pull_policy=r.str_(
            s, "imagePullPolicy", p, "IfNotPresent", choices=("Always", "IfNotPresent", "Never")
        )
        or "IfNotPresent",
        log_level=r.str_(s, "logLevel", p, "INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR")) or "INFO",
        storage=storage,
        resources=r.resources(s, "resources", p),
        config=config,
        rack_topology_key=rack_key,
        etcd=etcd,
        listeners=listeners,
        metrics=metrics,
        schema_registry=registry,
        autoscaling=autoscaling,
        iceberg=parse_cluster_iceberg(s.get("iceberg"), f"{p}.iceberg", r.errors),
        authorization=_parse_authorization(r, s, p),
        certificates=_parse_certificates(r, s, p),
        replication_port=replication_port,
    )
    if out.authorization.enabled and not any(li.authentication != "none" for li in out.listeners):
        r.errors.append(
            f"{p}.authorization needs a listener with authentication (else every client is anonymous)"
        )
    if out.replicas > 1 and out.etcd is None:
        r.errors.append(
            f"{p}.etcd is required for more than one broker (brokers share metadata through etcd)"
        )
    if r.errors:
        raise SpecError(r.errors)
    return out


def _parse_listeners(
    r: _Reader, s: Mapping[str, Any], p: str, replication_port: int = REPLICATION_PORT
) -> tuple[Listener, ...]:
    raw = s.get("listeners")
    if raw is None:
        return (Listener(),)
    if not isinstance(raw, list) or not raw or not all(isinstance(x, Mapping) for x in raw):
        r.errors.append(f"{p}.listeners must be a non-empty list of listeners")
        return (Listener(),)
    out: list[Listener] = []
    for i, li in enumerate(raw):
        lp = f"{p}.listeners[{i}]"
        name = r.str_(li, "name", lp, pattern=LISTENER_NAME)
        port = r.opt_int(li, "port", lp, 1024, 65535)
        if name is None or port is None:
            r.errors.append(f"{lp} needs a name and a port")
            continue
        if name == REPLICATION_LISTENER or port == replication_port:
            r.errors.append(
                f"{lp}: the name '{REPLICATION_LISTENER}' and port {replication_port} are the operator's"
                " replication listener"
            )
        hosts: dict[int, str] = {}
        for j, h in enumerate(li.get("advertisedHosts") or []):
            hp = f"{lp}.advertisedHosts[{j}]"
            if not isinstance(h, Mapping):
                r.errors.append(f"{hp} must be an object with broker and host")
                continue
            broker = r.opt_int(h, "broker", hp, 0)
            host = r.str_(h, "host", hp)
            if broker is not None and host is not None:
                hosts[broker] = host
        listener = Listener(
            name=name,
            port=port,
            type=r.str_(li, "type", lp, "internal", choices=LISTENER_TYPES) or "internal",
            tls=r.bool_(li, "tls", lp, False),
            authentication=r.str_(li, "authentication", lp, "none", choices=AUTHENTICATIONS) or "none",
            advertised_hosts=hosts,
            node_port=r.opt_int(li, "nodePort", lp, 30000, 32767),
        )
        if listener.authentication == "oauth":
            listener = replace(listener, oauth=parse_oauth(li.get("oauth"), f"{lp}.oauth", r.errors))
        elif "oauth" in li:
            r.errors.append(f"{lp}.oauth applies to authentication oauth only")
        if listener.authentication == "tls" and not listener.tls:
            r.errors.append(f"{lp}: authentication tls (client certificates) needs tls: true")
        if listener.node_port is not None and listener.type != "nodeport":
            r.errors.append(f"{lp}.nodePort applies to type nodeport only")
        out.append(listener)
    names_ = [li.name for li in out]
    ports = [li.port for li in out]
    if len(set(names_)) != len(names_) or len(set(ports)) != len(ports):
        r.errors.append(f"{p}.listeners: names and ports must be unique")
    if out and all(li.external for li in out):
        r.errors.append(f"{p}.listeners needs an internal listener (in-cluster clients, probes)")
    shared_oauth(tuple(out), p, r.errors)
    return tuple(out) or (Listener(),)


def _parse_authorization(r: _Reader, s: Mapping[str, Any], p: str) -> Authorization:
    a = r.obj(s, "authorization", p) or {}
    ap = f"{p}.authorization"
    supers: list[str] = []
    for i, u in enumerate(a.get("superUsers") or []):
        if not isinstance(u, str) or not u.startswith("User:") or len(u) <= len("User:"):
            r.errors.append(f"{ap}.superUsers[{i}] must be a principal like User:admin")
        else:
            supers.append(u)
    return Authorization(enabled=r.bool_(a, "enabled", ap, False), super_users=tuple(supers))


def _parse_certificates(r: _Reader, s: Mapping[str, Any], p: str) -> Certificates:
    c = r.obj(s, "certificates", p) or {}
    cp = f"{p}.certificates"
    out = Certificates(
        issuer=r.str_(c, "issuer", cp, "operator", choices=("operator", "cert-manager")) or "operator",
        validity_days=r.int_(c, "validityDays", cp, 365, 2, 3650),
        renew_before_days=r.int_(c, "renewBeforeDays", cp, 30, 1, 3649),
        cert_manager_issuer=r.str_(c, "certManagerIssuer", cp),
        cert_manager_issuer_kind=r.str_(
            c, "certManagerIssuerKind", cp, "ClusterIssuer", choices=("Issuer", "ClusterIssuer")
        )
        or "ClusterIssuer",
    )
    if out.renew_before_days >= out.validity_days:
        r.errors.append(f"{cp}.renewBeforeDays must be less than validityDays")
    if out.issuer == "cert-manager" and out.cert_manager_issuer is None:
        r.errors.append(f"{cp}.certManagerIssuer is required with issuer cert-manager")
    return out


def _parse_etcd(r: _Reader, s: Mapping[str, Any], p: str) -> Etcd | None:
    e = r.obj(s, "etcd", p)
    if e is None:
        return None
    ep = f"{p}.etcd"
    endpoints: tuple[str, ...] = ()
    raw = e.get("endpoints")
    if raw is not None:
        if not isinstance(raw, list) or not raw:
            r.errors.append(f"{ep}.endpoints must be a non-empty list")
        else:
            for i, x in enumerate(raw):
                if not isinstance(x, str) or not ENDPOINT.match(x):
                    r.errors.append(f"{ep}.endpoints[{i}] must look like http://host:port")
            endpoints = tuple(x for x in raw if isinstance(x, str))
    managed: ManagedEtcd | None = None
    m = r.obj(e, "managed", ep)
    if m is not None:
        mp = f"{ep}.managed"
        replicas = r.int_(m, "replicas", mp, 3)
        if replicas not in (1, 3, 5):
            r.errors.append(f"{mp}.replicas must be 1, 3 or 5")
        mst = r.obj(m, "storage", mp) or {}
        managed = ManagedEtcd(
            replicas=replicas,
            image=r.str_(m, "image", mp, DEFAULT_ETCD_IMAGE) or DEFAULT_ETCD_IMAGE,
            size=r.str_(mst, "size", f"{mp}.storage", "1Gi", pattern=QUANTITY) or "1Gi",
            storage_class_name=r.str_(mst, "storageClassName", f"{mp}.storage"),
            resources=r.resources(m, "resources", mp),
        )
    if (raw is None) == (m is None):
        r.errors.append(f"{ep} needs exactly one of endpoints or managed")
    tls, auth = _parse_etcd_tls(r, e, ep), _parse_etcd_auth(r, e, ep)
    if m is not None and (tls is not None or auth is not None):
        r.errors.append(f"{ep}.tls and {ep}.auth are for external endpoints, not a managed etcd")
    return Etcd(endpoints=endpoints, managed=managed, tls=tls, auth=auth)


def _secret_key(r: _Reader, m: Mapping[str, Any], key: str, path: str, default_key: str) -> SecretKey | None:
    o = r.obj(m, key, path)
    if o is None:
        return None
    name = r.str_(o, "name", f"{path}.{key}", pattern=DNS_SUBDOMAIN)
    if name is None:
        if "name" not in o:
            r.errors.append(f"{path}.{key}.name is required")
        return None
    return SecretKey(name, r.str_(o, "key", f"{path}.{key}", default_key) or default_key)


def _parse_etcd_tls(r: _Reader, e: Mapping[str, Any], ep: str) -> EtcdTls | None:
    t = r.obj(e, "tls", ep)
    if t is None:
        return None
    tp = f"{ep}.tls"
    return EtcdTls(
        ca=_secret_key(r, t, "caSecret", tp, "ca.crt"),
        client_secret=r.str_(t, "clientCertificateSecret", tp, pattern=DNS_SUBDOMAIN),
    )


def _parse_etcd_auth(r: _Reader, e: Mapping[str, Any], ep: str) -> EtcdUser | None:
    a = r.obj(e, "auth", ep)
    if a is None:
        return None
    ap = f"{ep}.auth"
    user = r.str_(a, "user", ap)
    password = _secret_key(r, a, "passwordSecret", ap, "password")
    if user is None or password is None:
        r.errors.append(f"{ap} needs user and passwordSecret")
        return None
    return EtcdUser(user, password)


def _parse_autoscaling(r: _Reader, s: Mapping[str, Any], p: str) -> Autoscaling:
    a = r.obj(s, "autoscaling", p) or {}
    ap = f"{p}.autoscaling"
    t = r.obj(a, "targets", ap) or {}
    up = r.obj(a, "scaleUp", ap) or {}
    down = r.obj(a, "scaleDown", ap) or {}
    out = Autoscaling(
        enabled=r.bool_(a, "enabled", ap, False),
        min_replicas=r.int_(a, "minReplicas", ap, 1, 1),
        max_replicas=r.opt_int(a, "maxReplicas", ap, 1),
        prometheus_url=r.str_(a, "prometheusUrl", ap, pattern=URL),
        bytes_in_per_broker=r.opt_int(t, "bytesInPerBroker", f"{ap}.targets", 1),
        partitions_per_broker=r.opt_int(t, "partitionsPerBroker", f"{ap}.targets", 1),
        scale_up_window_seconds=r.int_(up, "stabilizationWindowSeconds", f"{ap}.scaleUp", 300, 0, 3600),
        scale_down_window_seconds=r.int_(down, "stabilizationWindowSeconds", f"{ap}.scaleDown", 900, 0, 3600),
        cooldown_seconds=r.int_(a, "cooldownSeconds", ap, 600, 0),
    )
    if out.max_replicas is not None and out.min_replicas > out.max_replicas:
        r.errors.append(f"{ap}.minReplicas must not exceed maxReplicas")
    if out.enabled:
        if out.max_replicas is None or out.prometheus_url is None:
            r.errors.append(f"{ap} needs maxReplicas and prometheusUrl when enabled")
        if out.bytes_in_per_broker is None and out.partitions_per_broker is None:
            r.errors.append(f"{ap}.targets needs bytesInPerBroker or partitionsPerBroker when enabled")
    return out


def parse_topic(name: str, spec: Mapping[str, Any] | None) -> TopicSpec:
    """The typed spec of a Topic resource named `name`; raises SpecError listing every problem."""
    r = _Reader()
    s: Mapping[str, Any] = spec or {}
    p = "spec"
    cluster = r.str_(s, "cluster", p, pattern=DNS_LABEL)
    if cluster is None and "cluster" not in s:
        r.errors.append(f"{p}.cluster is required")
    topic_name = r.str_(s, "topicName", p, name)
    if topic_name is not None and not TOPIC_NAME.match(topic_name):
        r.errors.append(f"topic name '{topic_name}' is not a valid Kafka topic name")
    config = r.config(s, "config", p)
    iceberg = topic_configs(s.get("iceberg"), f"{p}.iceberg", r.errors)
    if both := sorted(set(config) & set(iceberg)):
        r.errors.append(f"{p}.config sets {', '.join(both)}, which {p}.iceberg sets too")
    config = {**config, **iceberg}
    for k, v in config.items():
        if (err := validate_topic_config(k, v)) is not None:
            r.errors.append(f"{p}.config: {err}")
    out = TopicSpec(
        cluster=cluster or "",
        topic_name=topic_name or name,
        partitions=r.opt_int(s, "partitions", p, 1),
        replication_factor=r.opt_int(s, "replicationFactor", p, 1, 32767),
        config=config,
    )
    if r.errors:
        raise SpecError(r.errors)
    return out
