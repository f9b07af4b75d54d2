"""The controller (one broker at a time, elected in etcd): leader election for partitions, ISR cleanup
of dead brokers, first states of new partitions, and partition reassignments.

It reconciles the view against what etcd says: every write is a compare-and-swap on the partition's
version, fenced by the controller epoch, so a deposed controller cannot overwrite a newer decision.
Its decisions depend only on the view, so it walks every partition when the view changed (each watch
event pokes it), after a round that wrote or failed, and every _WALK_S as a safety net; in between,
its rounds only step reassignments and the leader balance.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from dataclasses import replace
from typing import Protocol

from brook.config import TopicConfig
from brook.metadata import (
    NO_LEADER,
    BrokerInfo,
    ConflictError,
    EtcdMetadataStore,
    EtcdUnavailableError,
    FencedError,
    PartitionState,
    Reassignment,
    TopicRecord,
)
from brook.settings.broker import BrokerSettings
from brook.tasks import cancel_and_wait

log = logging.getLogger(__name__)

_RECONCILE_S = 0.5
_WALK_S = 10.0
_BATCH = 100
# etcd keeps every revision until compacted: the view marks (a write per broker per second, see
# brook.broker.view_freshness) and every ISR change would grow its database without end. The controller
# keeps this much history, as Kubernetes' API server does (5 min); a watch further behind re-lists.
HISTORY_S = 300.0


class ClusterView(Protocol):
    """What the controller reads and writes: this broker's view of the cluster (ClusterNode, kept current
    by its etcd watch) and the store it writes its decisions to."""

    @property
    def store(self) -> EtcdMetadataStore: ...
    @property
    def settings(self) -> BrokerSettings: ...
    @property
    def live(self) -> dict[int, BrokerInfo]: ...
    @property
    def topics(self) -> dict[str, TopicRecord]: ...
    @property
    def states(self) -> dict[tuple[str, int], PartitionState]: ...
    @property
    def reassignments(self) -> dict[tuple[str, int], Reassignment]: ...
    @property
    def topic_defaults(self) -> dict[str, str]: ...
    @property
    def revision(self) -> int: ...


class Controller:
    def __init__(self, node: ClusterView, epoch: int) -> None:
        self.node = node
        self.epoch = epoch
        self._task: asyncio.Task[None] | None = None
        self._poked = asyncio.Event()
        self._balanced_at = 0.0  # loop time of the last preferred-leader balance check
        self._walk_due = True  # the view changed since the last walk over every partition
        self._walked_at = 0.0
        self._compactor: asyncio.Task[None] | None = None

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._task = loop.create_task(self._run(), name=f"controller-{self.epoch}")
        self._compactor = loop.create_task(self._compact_history(), name=f"controller-{self.epoch}-compact")

    async def stop(self) -> None:
        await cancel_and_wait(self._task, self._compactor)
        self._task = self._compactor = None

    async def _compact_history(self, every_s: float = HISTORY_S) -> None:
        """Every `every_s`, drop etcd's history up to the view's revision of one round before."""
        keep_from = 0
        while True:
            await asyncio.sleep(every_s)
            if keep_from:
                try:
                    await self.node.store.client.compact(keep_from)
                except Exception as e:  # compacted already by another controller or an operator: fine
                    log.debug("controller: compacting etcd's history to %d: %r", keep_from, e)
                else:
                    log.info("controller: compacted etcd's history up to revision %d", keep_from)
            keep_from = self.node.revision

    def poke(self) -> None:
        """Something changed in the view: reconcile soon."""
        self._walk_due = True
        self._poked.set()

    async def _run(self) -> None:
        while True:
            self._poked.clear()
            try:
                await self.reconcile()
            except FencedError as e:  # a newer controller holds the epoch: this one's work is over
                log.info("controller: %s; stopping", e)
                return
            except (ConflictError, EtcdUnavailableError) as e:
                self._walk_due = True
                log.info("controller: %s; retrying", e)
            except Exception:
                self._walk_due = True
                log.exception("controller reconcile failed")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(_RECONCILE_S):  # (3.11's wait_for can swallow a cancel)
                    await self._poked.wait()

    def _unclean(self, topic: str) -> bool:
        rec = self.node.topics.get(topic)
        if rec is None:
            return False
        cfg = TopicConfig.from_strings(rec.configs, self.node.topic_defaults)
        return cfg.unclean_leader_election_enable

    async def reconcile(self) -> None:
        node = self.node
        live = set(node.live)
        updates: list[tuple[str, int, PartitionState, int]] = []
        now = asyncio.get_running_loop().time()
        walk = self._walk_due or now - self._walked_at >= _WALK_S
        if walk:
            self._walk_due = False
            self._walked_at = now
        for topic, rec in list(node.topics.items()) if walk else ():
            for i, replicas in enumerate(rec.assignment):
                st = node.states.get((topic, i))
                if st is None:
                    updates.append((topic, i, PartitionState.initial(replicas, list(live)), 0))
                    continue
                new = self._decide(topic, list(replicas), st, live)
                if new is not None:
                    updates.append((topic, i, new, st.version))
        if updates:
            self._walk_due = True  # look again next round (the writes come back as events, too)
        for start in range(0, len(updates), _BATCH):
            chunk = updates[start : start + _BATCH]
            try:
                written = await node.store.set_partition_states(chunk, controller_epoch=self.epoch)
            except ConflictError as e:
                log.debug("controller: a partition changed meanwhile (%s); next round", e)
                continue
            for (t, i, _, _), st in zip(chunk, written, strict=True):
                log.info(
                    "controller: %s-%d leader %d epoch %d ISR %s",
                    t,
                    i,
                    st.leader,
                    st.leader_epoch,
                    list(st.isr),
                )
        for key in list(node.reassignments):
            await self._step_reassignment(*key)
        s = node.settings
        if s.auto_leader_rebalance_enable and now - self._balanced_at >= s.leader_imbalance_check_interval_s:
            if self._balanced_at:  # not right after election: brokers are still coming back
                await self._balance_leaders(live)
            self._balanced_at = now

    async def _balance_leaders(self, live: set[int]) -> None:
        """auto.leader.rebalance.enable: a broker that leads too few of the partitions it is the
        preferred (first) replica of (more than leader.imbalance.per.broker.percentage short) gets them
        back, where it is alive and in sync, as Kafka's controller does."""
        node = self.node
        preferred: dict[int, list[tuple[str, int, PartitionState]]] = {}
        for topic, rec in node.topics.items():
            for i, replicas in enumerate(rec.assignment):
                st = node.states.get((topic, i))
                if st is not None and replicas and (topic, i) not in node.reassignments:
                    preferred.setdefault(replicas[0], []).append((topic, i, st))
        moves: list[tuple[str, int, PartitionState, int]] = []
        for broker, parts in preferred.items():
            off = [(t, i, st) for t, i, st in parts if st.leader != broker]
            if broker not in live or 100 * len(
                off
            ) <= node.settings.leader_imbalance_per_broker_percentage * len(parts):
                continue
            moves += [(t, i, st.evolve(leader=broker), st.version) for t, i, st in off if broker in st.isr]
        for start in range(0, len(moves), _BATCH):
            chunk = moves[start : start + _BATCH]
            try:
                await node.store.set_partition_states(chunk, controller_epoch=self.epoch)
            except ConflictError as e:
                log.debug("controller: leader balance raced a change (%s); next check", e)
                continue
            log.info("controller: %d partitions back to their preferred leaders", len(chunk))

    def _decide(
        self, topic: str, replicas: list[int], st: PartitionState, live: set[int]
    ) -> PartitionState | None:
        """The partition's next state given who is alive, or None when it is right."""
        isr = [r for r in st.isr if r in live]
        if st.leader != NO_LEADER and st.leader in live:
            if len(isr) != len(st.isr):  # dead followers leave the ISR
                return st.evolve(isr=isr)
            return None
        # The leader is gone: the first live in-sync replica (in preferred order) takes over.
        candidates = [r for r in replicas if r in isr]
        if candidates:
            return st.evolve(leader=candidates[0], isr=isr)
        if self._unclean(topic):
            alive = [r for r in replicas if r in live]
            if alive:
                log.warning("%s: unclean leader election of %d (data may be lost)", topic, alive[0])
                return st.evolve(leader=alive[0], isr=[alive[0]])
        if st.leader != NO_LEADER:
            # Offline until a member of the last ISR comes back; the ISR is kept for that.
            return st.evolve(leader=NO_LEADER, isr=list(st.isr))
        return None

    async def _step_reassignment(self, topic: str, index: int) -> None:
        """One step of moving a partition: add the targets, wait until they are in sync, move the
        leadership into the targets, drop the others, finish."""
        node = self.node
        r = node.reassignments.get((topic, index))
        rec = node.topics.get(topic)
        st = node.states.get((topic, index))
        if r is None or rec is None or st is None:
            return
        current, target = list(rec.assignment[index]), list(r.target)
        if not set(target) <= set(current):
            merged = target + [b for b in current if b not in target]
            assignment = list(rec.assignment)
            assignment[index] = tuple(merged)
            await node.store.update_topic(
                replace(rec, assignment=tuple(assignment)), controller_epoch=self.epoch
            )
            log.info(
                "reassignment %s-%d: adding replicas %s",
                topic,
                index,
                [b for b in target if b not in current],
            )
            return
        if not set(target) <= set(st.isr):
            return  # the new replicas are catching up (throttled)
        if st.leader not in target:
            new_leader = next(b for b in target if b in st.isr and b in node.live)
            await node.store.set_partition_state(
                topic,
                index,
                st.evolve(leader=new_leader),
                expected_version=st.version,
                controller_epoch=self.epoch,
            )
            log.info("reassignment %s-%d: leadership to %d", topic, index, new_leader)
            return
        if set(current) != set(target):
            assignment = list(rec.assignment)
            assignment[index] = tuple(target)
            await node.store.update_topic(
                replace(rec, assignment=tuple(assignment)), controller_epoch=self.epoch
            )
            await node.store.set_partition_state(
                topic,
                index,
                st.evolve(isr=[b for b in st.isr if b in target]),
                expected_version=st.version,
                controller_epoch=self.epoch,
            )
            log.info(
                "reassignment %s-%d: dropped replicas %s",
                topic,
                index,
                [b for b in current if b not in target],
            )
            return
        if current != target:  # same brokers, new order: the first is the preferred leader
            assignment = list(rec.assignment)
            assignment[index] = tuple(target)
            await node.store.update_topic(
                replace(rec, assignment=tuple(assignment)), controller_epoch=self.epoch
            )
            return
        if st.leader != target[0] and target[0] in st.isr and target[0] in node.live:
            await node.store.set_partition_state(
                topic,
                index,
                st.evolve(leader=target[0]),
                expected_version=st.version,
                controller_epoch=self.epoch,
            )
            log.info("reassignment %s-%d: preferred leader %d takes over", topic, index, target[0])
            return
        await node.store.delete_reassignment(topic, index, controller_epoch=self.epoch)
        log.info("reassignment %s-%d: done, replicas %s", topic, index, target)
