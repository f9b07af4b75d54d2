"""Topic reconciliation: pure decisions (`plan_topic`, `plan_delete`, `owner_of`) and a thin executor.

Changes flow from the Topic resource to the cluster, never back:
- missing topic: created (partitions / replication factor absent: the cluster's defaults);
- more partitions asked: partitions added; fewer: Ready=False, reason NotSupported (Kafka cannot);
- another replication factor or a new topicName: Ready=False, reason NotSupported;
- config: every desired entry is set, and every override the resource does not ask for is removed, so
  out-of-band changes are reverted (the timer re-runs this);
- two resources for one topic: the older (creation time, then name) wins; the other gets
  Ready=False, reason ResourceConflict, and never touches the topic (not even on delete).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from brook.config import TOPIC_CONFIGS

from . import status
from .facts import AdminError, TopicState
from .spec import SpecError, TopicSpec, parse_topic


@dataclass(frozen=True, slots=True, order=True)
class Claim:
    """A Topic resource claiming a topic name; ordered by age (creationTimestamp, then name, then uid)."""

    created: str  # RFC 3339, as Kubernetes writes it (sorts chronologically)
    name: str
    uid: str
    namespace: str = ""


def owner_of(claims: Iterable[Claim]) -> Claim | None:
    """The claim that manages the topic: the oldest."""
    return min(claims, default=None)


@dataclass(frozen=True, slots=True)
class CreateTopic:
    name: str
    partitions: int | None
    replication_factor: int | None
    config: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CreatePartitions:
    name: str
    total: int


@dataclass(frozen=True, slots=True)
class AlterConfigs:
    name: str
    set: Mapping[str, str]
    delete: tuple[str, ...] = ()


Action = CreateTopic | CreatePartitions | AlterConfigs


@dataclass(frozen=True, slots=True)
class TopicPlan:
    actions: tuple[Action, ...]
    ready: bool
    reason: str
    message: str


def same_value(name: str, a: str, b: str) -> bool:
    """Two spellings of one config value are equal (list order, number format, boolean case)."""
    if a == b:
        return True
    d = TOPIC_CONFIGS.get(name)
    if d is None:
        return False
    if d.type == "list":
        return {x.strip() for x in a.split(",") if x.strip()} == {
            x.strip() for x in b.split(",") if x.strip()
        }
    if d.type == "boolean":
        return a.lower() == b.lower()
    try:
        if d.type in ("int", "long"):
            return int(a) == int(b)
        if d.type == "double":
            return float(a) == float(b)
    except ValueError:
        return False
    return False


def config_drift(
    desired: Mapping[str, str], overrides: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...]]:
    """(entries to set, overrides to delete) so the topic's own configs equal `desired` exactly."""
    to_set = {
        k: v for k, v in sorted(desired.items()) if k not in overrides or not same_value(k, v, overrides[k])
    }
    to_delete = tuple(sorted(k for k in overrides if k not in desired))
    return to_set, to_delete


def plan_topic(
    desired: TopicSpec,
    observed: TopicState | None,
    *,
    conflict: Claim | None = None,
    managed_name: str | None = None,
) -> TopicPlan:
    """What to do so the cluster's topic matches `desired`.

    `conflict`: the older claim when this resource is not the topic's owner. `managed_name`: the topic
    name this resource managed so far (status.topicName), if any.
    """
    name = desired.topic_name
    if conflict is not None:
        return TopicPlan(
            (),
            False,
            status.RESOURCE_CONFLICT,
            f"topic '{name}' is managed by the older Topic resource {conflict.namespace}/{conflict.name}",
        )
    if managed_name is not None and managed_name != name:
        return TopicPlan(
            (),
            False,
            status.NOT_SUPPORTED,
            f"topicName cannot change (this resource manages '{managed_name}', the spec asks for '{name}')",
        )
    if observed is None:
        create = CreateTopic(name, desired.partitions, desired.replication_factor, dict(desired.config))
        return TopicPlan((create,), True, status.RECONCILED, f"topic '{name}' created")

    actions: list[Action] = []
    problems: list[str] = []
    if desired.partitions is not None:
        if desired.partitions < observed.partitions:
            problems.append(
                f"decreasing partitions from {observed.partitions} to {desired.partitions} is not supported"
            )
        elif desired.partitions > observed.partitions:
            actions.append(CreatePartitions(name, desired.partitions))
    if desired.replication_factor is not None and desired.replication_factor != observed.replication_factor:
        problems.append(
            f"changing the replication factor from {observed.replication_factor} to "
            f"{desired.replication_factor} is not supported"
        )
    to_set, to_delete = config_drift(desired.config, observed.overrides)
    if to_set or to_delete:
        actions.append(AlterConfigs(name, to_set, to_delete))
    if problems:
        return TopicPlan(tuple(actions), False, status.NOT_SUPPORTED, "; ".join(problems))
    done = [_describe(a) for a in actions]
    return TopicPlan(
        tuple(actions), True, status.RECONCILED, "; ".join(done) if done else "topic is up to date"
    )


def _describe(a: Action) -> str:
    if isinstance(a, CreatePartitions):
        return f"partitions increased to {a.total}"
    if isinstance(a, AlterConfigs):
        changed = sorted([*a.set, *a.delete])
        return f"config {', '.join(changed)} reconciled"
    return f"topic '{a.name}' created"


@dataclass(frozen=True, slots=True)
class DeleteDecision:
    delete_topic: bool
    message: str


def plan_delete(*, topic_name: str, keep: bool, is_owner: bool, cluster_exists: bool) -> DeleteDecision:
    """Whether deleting a Topic resource deletes the topic in the cluster."""
    if not cluster_exists:
        return DeleteDecision(False, "the cluster no longer exists: nothing to delete")
    if not is_owner:
        return DeleteDecision(False, f"an older Topic resource manages '{topic_name}': the topic is kept")
    if keep:
        return DeleteDecision(False, f"topic '{topic_name}' is kept (brook.dev/keep-topic-on-delete)")
    return DeleteDecision(True, f"topic '{topic_name}' deleted")


def keep_on_delete(annotations: Mapping[str, str] | None) -> bool:
    return (annotations or {}).get("brook.dev/keep-topic-on-delete", "").strip().lower() == "true"


class TopicAdmin(Protocol):
    """The admin operations topic reconciliation needs (kafka_admin.KafkaAdmin implements them)."""

    async def topic(self, name: str) -> TopicState | None: ...

    async def create_topic(
        self, name: str, partitions: int | None, replication_factor: int | None, config: Mapping[str, str]
    ) -> None: ...

    async def create_partitions(self, name: str, total: int) -> None: ...

    async def alter_topic_config(self, name: str, set_: Mapping[str, str], delete: Iterable[str]) -> None: ...

    async def delete_topic(self, name: str) -> None: ...


@dataclass(frozen=True, slots=True)
class TopicOutcome:
    condition: status.Condition
    state: TopicState | None


async def reconcile(
    admin: TopicAdmin, desired: TopicSpec, *, conflict: Claim | None = None, managed_name: str | None = None
) -> TopicOutcome:
    """Observe, plan, apply the plan's actions, observe again. Admin errors propagate (facts.AdminError)."""
    observed = await admin.topic(desired.topic_name) if conflict is None else None
    plan = plan_topic(desired, observed, conflict=conflict, managed_name=managed_name)
    for action in plan.actions:
        if isinstance(action, CreateTopic):
            await admin.create_topic(action.name, action.partitions, action.replication_factor, action.config)
        elif isinstance(action, CreatePartitions):
            await admin.create_partitions(action.name, action.total)
        else:
            await admin.alter_topic_config(action.name, action.set, action.delete)
    if plan.actions:
        observed = await admin.topic(desired.topic_name)
    return TopicOutcome(status.topic_condition(plan.ready, plan.reason, plan.message), observed)


def _status_of(
    spec: TopicSpec | None,
    condition: status.Condition,
    state: TopicState | None,
    *,
    previous: Mapping[str, Any] | None,
    generation: int | None,
    now: str,
    owner: bool,
) -> dict[str, Any]:
    prev = previous or {}
    out: dict[str, Any] = {
        "observedGeneration": generation,
        "conditions": status.merge_conditions(
            prev.get("conditions"), [condition], now=now, generation=generation
        ),
    }
    if owner and spec is not None and condition.reason != status.NOT_SUPPORTED:
        out["topicName"] = spec.topic_name
    if state is not None:
        out.update(
            topicId=state.topic_id,
            partitions=state.partitions,
            replicationFactor=state.replication_factor,
        )
    return out


def claim_of(body: Mapping[str, Any]) -> Claim:
    meta = body.get("metadata") or {}
    return Claim(
        created=str(meta.get("creationTimestamp", "")),
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        namespace=str(meta.get("namespace", "")),
    )


def topic_name_of(body: Mapping[str, Any]) -> str:
    """The topic a Topic resource designates (spec.topicName, else metadata.name)."""
    spec = body.get("spec") or {}
    name = spec.get("topicName") if isinstance(spec, Mapping) else None
    return str(name or (body.get("metadata") or {}).get("name", ""))


async def reconcile_resource(
    body: Mapping[str, Any],
    *,
    claims: Iterable[Claim],
    admin: TopicAdmin | None,
    now: str,
) -> dict[str, Any]:
    """One reconcile pass of a Topic resource; returns its new status. `admin` None: no such Cluster.

    `claims`: every Topic resource (including this one) naming the same cluster and topic.
    """
    meta = body.get("metadata") or {}
    generation = meta.get("generation")
    previous = body.get("status") or {}
    me = claim_of(body)
    owner = owner_of([*claims, me])
    is_owner = owner is None or owner.uid == me.uid

    def report(
        spec: TopicSpec | None, cond: status.Condition, state: TopicState | None = None
    ) -> dict[str, Any]:
        return _status_of(
            spec, cond, state, previous=previous, generation=generation, now=now, owner=is_owner
        )

    try:
        spec = parse_topic(me.name, body.get("spec"))
    except SpecError as e:
        return report(None, status.topic_condition(False, status.INVALID_SPEC, "; ".join(e.errors)))
    if admin is None:
        return report(
            spec,
            status.topic_condition(
                False, status.CLUSTER_NOT_FOUND, f"no Cluster '{spec.cluster}' in namespace {me.namespace}"
            ),
        )
    managed = previous.get("topicName") if is_owner else None
    try:
        outcome = await reconcile(
            admin, spec, conflict=None if is_owner else owner, managed_name=str(managed) if managed else None
        )
    except AdminError as e:
        reason = status.KAFKA_UNAVAILABLE if e.unavailable else status.KAFKA_ERROR
        return report(spec, status.topic_condition(False, reason, str(e)))
    return report(spec, outcome.condition, outcome.state)


async def delete_resource(
    body: Mapping[str, Any], *, claims: Iterable[Claim], admin: TopicAdmin | None
) -> DeleteDecision:
    """Deletion of a Topic resource: delete the topic unless kept, not ours, or the cluster is gone.

    Admin errors propagate, so the finalizer stays and the deletion is retried.
    """
    meta = body.get("metadata") or {}
    me = claim_of(body)
    owner = owner_of([*claims, me])
    name = str((body.get("status") or {}).get("topicName") or topic_name_of(body))
    decision = plan_delete(
        topic_name=name,
        keep=keep_on_delete(meta.get("annotations")),
        is_owner=owner is None or owner.uid == me.uid,
        cluster_exists=admin is not None,
    )
    if decision.delete_topic and admin is not None:
        await admin.delete_topic(name)
    return decision
