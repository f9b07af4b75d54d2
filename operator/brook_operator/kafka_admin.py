"""The one module that talks to Brook over the Kafka protocol (confluent-kafka's AdminClient).

Everything it returns is a plain `facts` value; every failure is a `facts.AdminError`. Blocking calls
run in a worker thread and admin futures are awaited, so the handlers' event loop never blocks.

Partition reassignments (AlterPartitionReassignments, ListPartitionReassignments) go through
kafka-python's KafkaAdminClient: confluent-kafka (librdkafka 2.16) has no call for them. Only this
module imports either client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)

from .facts import AdminError, BrokerInfo, ClusterSnapshot, PartitionInfo, Reassignment, TopicState
from .user_spec import AclRule, Quotas

T = TypeVar("T")

_UNAVAILABLE = {
    KafkaError._TRANSPORT,
    KafkaError._TIMED_OUT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError.REQUEST_TIMED_OUT,
}


def _error(exc: BaseException, what: str) -> AdminError:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        err: KafkaError = exc.args[0]
        return AdminError(f"{what}: {err.str()}", code=err.name(), unavailable=err.code() in _UNAVAILABLE)
    return AdminError(f"{what}: {exc}")


def _kp_error(exc: BaseException, what: str) -> AdminError:
    """A kafka-python failure as an AdminError (connection trouble and timeouts: unavailable)."""
    import kafka.errors as kerr

    unavailable = isinstance(
        exc, kerr.KafkaConnectionError | kerr.KafkaTimeoutError | kerr.RequestTimedOutError | OSError
    ) or type(exc).__name__ in ("NoBrokersAvailable", "NodeNotReadyError")
    code = str(getattr(exc, "message", "") or type(exc).__name__)
    return AdminError(f"{what}: {type(exc).__name__}: {exc}", code=code, unavailable=unavailable)


def _source(entry: ConfigEntry) -> int:
    """A config entry's source as a number (confluent-kafka gives an int or a ConfigSource)."""
    raw: Any = entry.source
    return int(getattr(raw, "value", raw))


class KafkaAdmin:
    """Admin operations against one Brook cluster (bootstrap servers `host:port[,host:port]`)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        timeout: float = 10.0,
        client_id: str = "brook-operator",
        security: Mapping[str, str] | None = None,
    ) -> None:
        """`security`: librdkafka TLS settings (security.protocol, ssl.ca.pem, ssl.certificate.pem,
        ssl.key.pem, ...) for a secured cluster's replication listener."""
        self.bootstrap = bootstrap
        self.timeout = timeout
        self._client_id = client_id
        self._security = dict(security or {})
        self._kp: Any = None  # kafka-python KafkaAdminClient (reassignments), created on first use
        self._kp_lock = threading.Lock()
        self._client = AdminClient(
            {
                "bootstrap.servers": bootstrap,
                "client.id": client_id,
                "socket.timeout.ms": int(timeout * 1000),
                "socket.connection.setup.timeout.ms": int(timeout * 1000),
                "reconnect.backoff.max.ms": 2000,
                "log_level": 3,  # librdkafka logs errors only; failures surface as AdminError
                **self._security,
            }
        )

    async def _await(self, fut: Future[T], what: str) -> T:
        try:
            return await asyncio.wait_for(asyncio.wrap_future(fut), self.timeout * 2)
        except TimeoutError as e:
            raise AdminError(f"{what}: timed out", code="_TIMED_OUT", unavailable=True) from e
        except KafkaException as e:
            raise _error(e, what) from e

    async def snapshot(self) -> ClusterSnapshot:
        """Metadata: cluster id, controller, brokers, and every partition's replicas and ISR."""

        def call() -> Any:
            return self._client.list_topics(timeout=self.timeout)

        try:
            md = await asyncio.to_thread(call)
        except KafkaException as e:
            raise _error(e, "Metadata") from e
        brokers = tuple(
            sorted(
                (BrokerInfo(b.id, b.host, b.port) for b in md.brokers.values()),
                key=lambda b: b.node_id,
            )
        )
        partitions = tuple(
            PartitionInfo(name, p.id, p.leader, tuple(p.replicas), tuple(p.isrs))
            for name, t in sorted(md.topics.items())
            for p in sorted(t.partitions.values(), key=lambda p: p.id)
        )
        controller = md.controller_id if md.controller_id is not None and md.controller_id >= 0 else None
        return ClusterSnapshot(md.cluster_id, controller, brokers, partitions)

    async def topic(self, name: str) -> TopicState | None:
        """The topic's id, partitions, replication factor and its own config overrides (None: absent)."""
        futs = self._client.describe_topics(TopicCollection([name]), request_timeout=self.timeout)
        try:
            desc = await self._await(futs[name], f"describe topic '{name}'")
        except AdminError as e:
            if e.code == "UNKNOWN_TOPIC_OR_PART":
                return None
            raise
        res = ConfigResource(ResourceType.TOPIC, name)
        cfuts = self._client.describe_configs([res], request_timeout=self.timeout)
        try:
            entries: Mapping[str, ConfigEntry] = await self._await(
                cfuts[res], f"describe configs of '{name}'"
            )
        except AdminError as e:
            if e.code == "UNKNOWN_TOPIC_OR_PART":
                return None
            raise
        overrides = {
            k: e.value
            for k, e in sorted(entries.items())
            if _source(e) == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and e.value is not None
        }
        rf = max((len(p.replicas) for p in desc.partitions), default=0)
        topic_id = str(desc.topic_id) if getattr(desc, "topic_id", None) is not None else None
        return TopicState(name, topic_id, len(desc.partitions), rf, overrides)

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None, config: Mapping[str, str]
    ) -> None:
        new = NewTopic(
            name,
            num_partitions=-1 if partitions is None else partitions,
            replication_factor=-1 if replication_factor is None else replication_factor,
            config=dict(config),
        )
        futs = self._client.create_topics([new], request_timeout=self.timeout)
        try:
            await self._await(futs[name], f"create topic '{name}'")
        except AdminError as e:
            if e.code != "TOPIC_ALREADY_EXISTS":  # a concurrent reconcile created it: the next pass adjusts
                raise

    async def create_partitions(self, name: str, total: int) -> None:
        futs = self._client.create_partitions([NewPartitions(name, total)], request_timeout=self.timeout)
        await self._await(futs[name], f"create partitions of '{name}'")

    async def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Iterable[str]) -> None:
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sorted(set_.items())
        ]
        entries += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in sorted(delete)
        ]
        if not entries:
            return
        res = ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries)
        futs = self._client.incremental_alter_configs([res], request_timeout=self.timeout)
        await self._await(futs[res], f"alter configs of '{name}'")

    async def delete_topic(self, name: str) -> None:
        futs = self._client.delete_topics([name], request_timeout=self.timeout)
        try:
            await self._await(futs[name], f"delete topic '{name}'")
        except AdminError as e:
            if e.code != "UNKNOWN_TOPIC_OR_PART":
                raise

    async def min_insync_replicas(self, topics: Iterable[str]) -> dict[str, int]:
        """Each topic's effective min.insync.replicas (topics that vanished meanwhile are left out)."""
        resources = [ConfigResource(ResourceType.TOPIC, t) for t in sorted(set(topics))]
        if not resources:
            return {}
        futs = self._client.describe_configs(resources, request_timeout=self.timeout)
        out: dict[str, int] = {}
        for res in resources:
            try:
                entries: Mapping[str, ConfigEntry] = await self._await(futs[res], "describe configs")
            except AdminError as e:
                if e.code == "UNKNOWN_TOPIC_OR_PART":
                    continue
                raise
            entry = entries.get("min.insync.replicas")
            if entry is not None and entry.value is not None and entry.value.lstrip("-").isdigit():
                out[res.name] = int(entry.value)
        return out

    # -- partition reassignments (kafka-python) ------------------------------------------------------
    def _reassigner(self) -> Any:
        """The kafka-python admin client, created on first use (it connects in its constructor)."""
        with self._kp_lock:
            if self._kp is None:
                from kafka.admin import KafkaAdminClient

                quiet = logging.getLogger("kafka")  # kafka-python logs every connection at INFO
                if quiet.level == logging.NOTSET:
                    quiet.setLevel(logging.WARNING)

                tls: dict[str, Any] = {}
                if self._security.get("security.protocol") == "SSL":
                    tls = {"security_protocol": "SSL", "ssl_context": _ssl_context(self._security)}
                self._kp = KafkaAdminClient(
                    **tls,
                    bootstrap_servers=self.bootstrap.split(","),
                    client_id=f"{self._client_id}-reassign",
                    request_timeout_ms=int(self.timeout * 1000),
                    bootstrap_timeout_ms=int(self.timeout * 1000),
                    reconnect_backoff_max_ms=2000,
                )
            return self._kp

    def _drop_reassigner(self) -> None:
        with self._kp_lock:
            kp, self._kp = self._kp, None
        if kp is not None:
            with contextlib.suppress(Exception):
                kp.close()

    async def _kp_call(self, what: str, fn: Any) -> Any:
        def call() -> Any:
            return fn(self._reassigner())

        try:
            return await asyncio.wait_for(asyncio.to_thread(call), self.timeout * 3)
        except TimeoutError as e:
            self._drop_reassigner()
            raise AdminError(f"{what}: timed out", code="_TIMED_OUT", unavailable=True) from e
        except Exception as e:  # kafka-python raises its own errors and OSErrors
            err = _kp_error(e, what)
            if err.unavailable:
                self._drop_reassigner()  # a fresh client bootstraps again next time
            raise err from e

    async def list_reassignments(self) -> dict[tuple[str, int], Reassignment]:
        """Every partition move in progress (ListPartitionReassignments)."""

        def call(kp: Any) -> Any:
            return kp.list_partition_reassignments(timeout_ms=int(self.timeout * 1000))

        raw = await self._kp_call("ListPartitionReassignments", call)
        out: dict[tuple[str, int], Reassignment] = {}
        for tp, r in sorted((raw or {}).items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
            out[(tp.topic, tp.partition)] = Reassignment(
                tp.topic,
                tp.partition,
                tuple(r.get("replicas") or ()),
                tuple(r.get("adding_replicas") or ()),
                tuple(r.get("removing_replicas") or ()),
            )
        return out

    async def alter_reassignments(
        self, targets: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], str | None]:
        """Start moving partitions to `targets` (None: cancel). Per partition: None (accepted) or the
        broker's error name; a partition the broker did not answer for reads NO_RESPONSE."""
        if not targets:
            return {}
        from kafka import TopicPartition

        request = {
            TopicPartition(t, p): (None if r is None else [int(b) for b in r])
            for (t, p), r in sorted(targets.items())
        }

        def call(kp: Any) -> Any:
            return kp.alter_partition_reassignments(request, timeout_ms=int(self.timeout * 1000))

        raw = await self._kp_call("AlterPartitionReassignments", call)
        answered = {(tp.topic, tp.partition): err for tp, err in (raw or {}).items()}
        out: dict[tuple[str, int], str | None] = {}
        for key in sorted(targets):
            if key not in answered:
                out[key] = "NO_RESPONSE"
            else:
                err = answered[key]
                out[key] = None if err is None else str(getattr(err, "message", None) or err.__name__)
        return out

    # -- users: SCRAM credentials, ACLs (confluent-kafka), quotas (kafka-python) ----------------------
    async def scram_users(self) -> set[str]:
        """Users with a SCRAM credential."""
        try:
            fut: Any = self._client.describe_user_scram_credentials()  # users=None: one future, all
        except Exception as e:  # the call itself may raise KafkaException
            raise _error(e, "DescribeUserScramCredentials") from e
        raw = await self._await(fut, "DescribeUserScramCredentials")
        return {str(u) for u, d in (raw or {}).items() if getattr(d, "scram_credential_infos", None)}

    async def upsert_scram(self, user: str, password: str, iterations: int) -> None:
        from confluent_kafka.admin import ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, iterations)
        upsert = UserScramCredentialUpsertion(user, info, password.encode())
        futs = self._client.alter_user_scram_credentials([upsert])
        for fut in futs.values():
            await self._await(fut, f"AlterUserScramCredentials({user})")

    async def delete_scram(self, user: str) -> None:
        from confluent_kafka.admin import ScramMechanism, UserScramCredentialDeletion

        futs = self._client.alter_user_scram_credentials(
            [UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)]
        )
        for fut in futs.values():
            await self._await(fut, f"AlterUserScramCredentials({user})")

    async def acls_of(self, principal: str) -> set[AclRule]:
        from confluent_kafka.admin import (
            AclBindingFilter,
            AclOperation,
            AclPermissionType,
            ResourcePatternType,
        )

        anything: Any = None  # a filter's "any name", "any host"
        flt = AclBindingFilter(
            ResourceType.ANY,
            anything,
            ResourcePatternType.ANY,
            principal,
            anything,
            AclOperation.ANY,
            AclPermissionType.ANY,
        )
        raw = await self._await(self._client.describe_acls(flt), "DescribeAcls")
        return {_rule_of(b) for b in raw or []}

    async def create_acls(self, principal: str, rules: Iterable[AclRule]) -> None:
        bindings = [_binding_of(principal, r) for r in rules]
        if not bindings:
            return
        for fut in self._client.create_acls(bindings).values():
            await self._await(fut, "CreateAcls")

    async def delete_acls(self, principal: str, rules: Iterable[AclRule]) -> None:
        from confluent_kafka.admin import AclBindingFilter

        filters = [AclBindingFilter(*_binding_args(principal, r)) for r in rules]
        if not filters:
            return
        for fut in self._client.delete_acls(filters).values():
            await self._await(fut, "DeleteAcls")

    async def set_quotas(self, user: str, quotas: Quotas) -> None:
        """The user's quotas (AlterClientQuotas); None values remove a quota."""
        from kafka.protocol.admin import AlterClientQuotasRequest as Req

        entry = Req.EntryData(
            entity=[Req.EntryData.EntityData(entity_type="user", entity_name=user)],
            ops=[
                Req.EntryData.OpData(key=k, value=v or 0.0, remove=v is None)
                for k, v in sorted(quotas.as_kafka().items())
            ],
        )
        request = Req(entries=[entry], validate_only=False)

        def call(kp: Any) -> Any:
            def errors(r: Any) -> Any:
                from kafka import errors as Errors

                for e in r.entries:
                    yield Errors.for_code(e.error_code)

            return kp._manager.run(kp._send_request_to_controller, request, errors)

        await self._kp_call("AlterClientQuotas", call)

    def close(self) -> None:
        self._drop_reassigner()


def _ssl_context(security: Mapping[str, str]) -> Any:
    """kafka-python takes an SSLContext; Python loads a certificate chain only from files."""
    import os
    import ssl
    import tempfile

    ctx = ssl.create_default_context(cadata=security["ssl.ca.pem"])
    if security.get("ssl.endpoint.identification.algorithm") == "none":
        ctx.check_hostname = False
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "client.pem")
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(security["ssl.certificate.pem"] + security["ssl.key.pem"])
        ctx.load_cert_chain(path)
    return ctx


_RESOURCE = {"topic": "TOPIC", "group": "GROUP", "cluster": "BROKER", "transactionalId": "TRANSACTIONAL_ID"}
_OPERATION = {
    "All": "ALL",
    "Read": "READ",
    "Write": "WRITE",
    "Create": "CREATE",
    "Delete": "DELETE",
    "Alter": "ALTER",
    "Describe": "DESCRIBE",
    "ClusterAction": "CLUSTER_ACTION",
    "DescribeConfigs": "DESCRIBE_CONFIGS",
    "AlterConfigs": "ALTER_CONFIGS",
    "IdempotentWrite": "IDEMPOTENT_WRITE",
}


def _binding_args(principal: str, r: AclRule) -> tuple[Any, ...]:
    from confluent_kafka.admin import AclOperation, AclPermissionType, ResourcePatternType

    return (
        ResourceType[_RESOURCE[r.resource_type]],
        r.resource_name,
        ResourcePatternType.PREFIXED if r.pattern_type == "prefix" else ResourcePatternType.LITERAL,
        principal,
        r.host,
        AclOperation[_OPERATION[r.operation]],
        AclPermissionType.DENY if r.permission == "deny" else AclPermissionType.ALLOW,
    )


def _binding_of(principal: str, r: AclRule) -> Any:
    from confluent_kafka.admin import AclBinding

    return AclBinding(*_binding_args(principal, r))


def _rule_of(b: Any) -> AclRule:
    rtype = {v: k for k, v in _RESOURCE.items()}.get(b.restype.name, b.restype.name.lower())
    op = {v: k for k, v in _OPERATION.items()}.get(b.operation.name, b.operation.name)
    return AclRule(
        rtype,
        b.name,
        "prefix" if b.resource_pattern_type.name == "PREFIXED" else "literal",
        op,
        "deny" if b.permission_type.name == "DENY" else "allow",
        b.host,
    )


class AdminPool:
    """One KafkaAdmin per bootstrap address, kept for the operator's lifetime (clients are costly)."""

    def __init__(self, timeout: float = 10.0) -> None:
        self._timeout = timeout
        self._admins: dict[str, KafkaAdmin] = {}
        self._lock = threading.Lock()

    def get(self, bootstrap: str, security: Mapping[str, str] | None = None) -> KafkaAdmin:
        """The client of `bootstrap`; a client made with other `security` (renewed certificates) is
        replaced."""
        with self._lock:
            admin = self._admins.get(bootstrap)
            if admin is not None and admin._security != dict(security or {}):
                admin.close()
                admin = None
            if admin is None:
                admin = self._admins[bootstrap] = KafkaAdmin(
                    bootstrap, timeout=self._timeout, security=security
                )
            return admin

    def forget(self, bootstrap: str) -> None:
        with self._lock:
            admin = self._admins.pop(bootstrap, None)
        if admin is not None:
            admin.close()
