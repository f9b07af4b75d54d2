"""Cluster mode: this broker's life in etcd.

It registers under a lease, keeps a view of the cluster's metadata (snapshot, then the watch), opens
the partitions assigned to it, becomes leader or follower of each as the partition states say, runs
the follower fetchers, records ISR changes of the partitions it leads (compare-and-swap), and runs the
controller when elected. On stop it hands its leaderships over before leaving. One implementation of
the seam cluster_metadata.ClusterMetadata; single_node.py is the other.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from brook.metadata import (
    NO_LEADER,
    AclKey,
    AclsChanged,
    BrokerInfo,
    BrokerJoined,
    BrokerLeft,
    BrokerRegistry,
    ControllerChanged,
    ControllerElection,
    ControllerInfo,
    EntityConfigsChanged,
    EtcdClient,
    EtcdMetadataStore,
    MetadataError,
    MetadataEvent,
    MetadataSnapshot,
    PartitionState,
    PartitionStateChanged,
    PartitionStateDeleted,
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
from brook.protocol.errors import ErrorCode, KafkaError
from brook.replication.fetchers import ReplicaFetchers
from brook.replication.isr import due_isr_changes
from brook.replication.replica import LeaderAndIsr
from brook.tasks import cancel_and_wait, every

from .cluster_admin import ClusterAdmin, topic_meta
from .cluster_metadata import BrokerHost, LiveBroker
from .controller import Controller
from .inter_broker import peer_security
from .partition import Partition, PartitionRole, now_ms
from .view_freshness import MARK_INTERVAL_S, ViewFreshness, ViewMarker

log = logging.getLogger(__name__)

_ISR_CHECK_S = 0.25
_OPEN_AT_ONCE = 64  # new logs opened between two turns of the event loop
_FENCE_MARGIN_S = 0.1  # a leader stops this long before its lease may expire: the append in hand ends
_STALL_S = 5.0  # a view mark not back through the watch after this long: the watch is stuck


class ClusterNode(ClusterAdmin):
    def __init__(self, broker: BrokerHost) -> None:
        self.broker = broker
        self.settings = broker.settings
        self.node_id = broker.settings.node_id
        self.client = EtcdClient(self.settings.etcd_endpoints, auth=self.settings.etcd_auth)
        self.store = EtcdMetadataStore(self.client, self.settings.cluster_name)
        host, port = self.settings.advertised
        self.registry = BrokerRegistry(
            self.client,
            self.store.layout,
            BrokerInfo(
                self.node_id,
                host,
                port,
                self.settings.rack,
                endpoints=tuple(
                    (li.name, li.advertised_host, li.advertised_port)
                    for li in self.settings.effective_listeners()
                ),
                max_partitions=broker.partition_budget,
            ),
            ttl=self.settings.lease_ttl_s,
            wait_for_stale=self.settings.lease_ttl_s + 2.0,
        )
        self.election = ControllerElection(
            self.client,
            self.store.layout,
            self.node_id,
            ttl=self.settings.lease_ttl_s,
            on_elected=self._elected,
            on_resigned=self._resigned,
        )
        # The view of the cluster, kept current by the watch.
        self.cluster_id = ""
        self.live: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicRecord] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.reassignments: dict[tuple[str, int], Reassignment] = {}
        self.entity_configs: dict[tuple[str, str], dict[str, str]] = {}
        self.scram: dict[str, dict[str, ScramCredential]] = {}
        self.acls: dict[AclKey, list[dict[str, Any]]] = {}
        self.controller: ControllerInfo | None = None
        self.revision = 0
        self._changed = asyncio.Condition()
        self._fetchers = ReplicaFetchers[Partition](
            self.node_id,
            self._throttled,
            self.settings.replication_throttled_rate,
            broker.metrics.on_replication_in,
            peer_security(self.settings),
        )
        self._controller: Controller | None = None
        self.view = ViewFreshness(self.settings.lease_ttl_s + MARK_INTERVAL_S, _STALL_S)
        self._watch_task: asyncio.Task[None] | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._pids: list[int] = []  # the rest of this broker's producer-id block
        self._stopping = False
        broker.replicas.fence.bind(self.lead_until)  # a deposed leader stops acknowledging

    def lead_until(self) -> float:
        """Until when this broker may act as a leader (brook.broker.leader_fence): while its lease
        surely lives and its view is proven current (brook.broker.view_freshness), and only once the
        view has caught up with its registration: a broker back from a partition still believes in
        the leaderships the controller moved meanwhile."""
        if self.revision < self.registry.broker.epoch:
            return 0.0
        return min(self.registry.registered_until(), self.view.valid_until()) - _FENCE_MARGIN_S

    # -- lifecycle ---------------------------------------------------------------------------------
    async def start(self) -> None:
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        await self.client.connect(self.store.layout.prefix)  # a key this cluster's etcd user may read
        self.cluster_id = await self.store.cluster_id(self.settings.cluster_id)
        sent = asyncio.get_running_loop().time()
        snap = await self.store.snapshot()
        self._load(snap, sent)
        await self.registry.register()
        self.live[self.node_id] = self.registry.broker
        await self.election.start()
        self._start_watch(snap)
        marker = ViewMarker(
            self.node_id, self.store, self.registry, lambda: self.revision, self._restart_watch, self.view
        )
        self._tasks.append(asyncio.create_task(marker.run(), name=f"broker-{self.node_id}-view-marks"))
        # The ISR loop outlives any one failed round: a leader that stopped shrinking and expanding
        # ISRs would fail acks=all for good.
        isr = every(_ISR_CHECK_S, self._isr_round, "ISR round")
        self._tasks.append(asyncio.create_task(isr, name=f"broker-{self.node_id}-isr"))
        log.info(
            "broker %d joined cluster %s (%d brokers live)", self.node_id, self.cluster_id, len(self.live)
        )

    async def stop(self) -> None:
        """Controlled shutdown: resign as controller, leave, wait until leaderships have moved."""
        self._stopping = True
        await self.leave()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.settings.controlled_shutdown_timeout_s
        while loop.time() < deadline and self._leaderships_to_move():
            async with self._changed:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(0.5):
                        await self._changed.wait()
        if self._controller is not None:
            await self._controller.stop()
        await cancel_and_wait(*self._tasks)
        await cancel_and_wait(self._watch_task)
        await self._fetchers.stop()
        await self.client.close()

    async def leave(self) -> None:
        """Resign as controller and deregister, so the controller moves this broker's leaderships to
        in-sync replicas elsewhere and drops it from the ISRs; stop replicating (else leaders keep it in
        their ISRs meanwhile). The view stays current. Controlled shutdown, and an offline log directory
        (brook.broker.log_dir_failure), which comes back with `rejoin`."""
        with contextlib.suppress(Exception):
            await self.election.stop()
        with contextlib.suppress(Exception):
            await self.registry.deregister()
        await self._fetchers.stop()

    async def rejoin(self) -> None:
        """After `leave` for an offline log directory, now reopened: register again and take the roles
        etcd gives (the partitions are new objects, so each role is applied as at start)."""
        if not self.registry.registered.is_set():  # else a retry after a later step failed
            await self.registry.register()
        self.live[self.node_id] = self.registry.broker
        await self.election.start()
        # Roles from a view that has caught up with the registration: leaderships moved while the
        # directory was offline are not taken up again (the fence would refuse appends, but a group
        # coordinator would load meanwhile).
        try:
            await self.wait_revision(self.registry.broker.epoch, timeout=2 * self.settings.lease_ttl_s)
        except TimeoutError:
            log.warning(
                "broker %d: its view lags its registration; re-reading the cluster state", self.node_id
            )
            await self._restart_watch()  # applies every topic
            return
        for rec in list(self.topics.values()):
            self._apply_topic(rec)

    def _leaderships_to_move(self) -> list[tuple[str, int]]:
        """Partitions this broker still leads that another in-sync replica could lead."""
        return [
            k for k, st in self.states.items()
            if st.leader == self.node_id and any(r != self.node_id and r in self.live for r in st.isr)
        ]  # fmt: skip

    # -- what handlers ask -------------------------------------------------------------------------
    @property
    def topic_defaults(self) -> dict[str, str]:
        return self.broker.replicas.topic_defaults

    @property
    def controller_id(self) -> int:
        return self.controller.broker_id if self.controller is not None else -1

    @property
    def registered(self) -> bool:
        return self.node_id in self.live

    def offline_partitions(self) -> int:
        return sum(1 for st in self.states.values() if st.leader not in self.live)

    def brokers(self, listener: str | None = None) -> list[LiveBroker]:
        return [
            LiveBroker(b.broker_id, *b.endpoint(listener), b.rack)
            for b in sorted(self.live.values(), key=lambda b: b.broker_id)
        ]

    def partition_state(self, topic: str, index: int) -> LeaderAndIsr:
        rec = self.topics.get(topic)
        if rec is None or not 0 <= index < rec.partitions:
            raise KafkaError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{index} does not exist")
        st = self.states.get((topic, index))
        replicas = list(rec.assignment[index])
        if st is None:
            return LeaderAndIsr(NO_LEADER, -1, replicas, [])
        leader = st.leader if st.leader in self.live else NO_LEADER
        return LeaderAndIsr(leader, st.leader_epoch, replicas, list(st.isr))

    # -- the view ----------------------------------------------------------------------------------
    def _load(self, snap: MetadataSnapshot, sent_at: float) -> None:
        """Take the whole view from a snapshot read sent at loop time `sent_at`."""
        for gone in [name for name in self.topics if name not in snap.topics]:  # deleted meanwhile
            self._remove_topic(gone)
        self.live = dict(snap.brokers)
        self.controller = snap.controller
        self.topics = dict(snap.topics)
        self.states = {(t, p): st for t, parts in snap.partitions.items() for p, st in parts.items()}
        self.reassignments = dict(snap.reassignments)
        self.entity_configs = dict(snap.entity_configs)
        self.scram = dict(snap.scram)
        self.acls = dict(snap.acls)
        self.broker.acls_changed()
        self.broker.quotas_changed()
        self.revision = snap.revision
        self.view.caught_up(snap.revision, sent_at)
        self.broker.apply_broker_configs()
        for rec in self.topics.values():
            self._apply_topic(rec)
        if self._controller is not None:
            self._controller.poke()

    def _start_watch(self, snap: MetadataSnapshot | None) -> None:
        self._watch_task = asyncio.create_task(self._watch(snap), name=f"broker-{self.node_id}-watch")

    async def _restart_watch(self) -> None:
        """Drop the watch (it may be stuck) and start afresh: the snapshot, then a new watch."""
        await cancel_and_wait(self._watch_task)
        self._start_watch(None)

    async def _watch(self, snap: MetadataSnapshot | None) -> None:
        """Apply every change after `snap` (None: read the cluster state first), in order."""
        while True:
            try:
                if snap is None:
                    sent = asyncio.get_running_loop().time()
                    snap = await self.store.snapshot()
                    self._load(snap, sent)
                    async with self._changed:  # admin requests waiting on the view (a stuck watch)
                        self._changed.notify_all()
                async with self.store.watch(snap) as events:
                    async for ev in events:
                        if isinstance(ev, ViewMarked):  # proves the view, changes nothing in it
                            if ev.broker_id == self.node_id:
                                self.view.seen(ev.revision)
                            continue
                        if isinstance(ev, TopicCreated | TopicChanged):
                            self.topics[ev.topic.name] = ev.topic
                            await self._apply_topic_stepwise(ev.topic)
                        else:
                            self._apply_event(ev)
                        async with self._changed:
                            self.revision = max(self.revision, ev.revision)
                            self._changed.notify_all()
                        if self._controller is not None:
                            self._controller.poke()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("metadata watch failed; re-reading the cluster state")
                await asyncio.sleep(1.0)
            snap = None

    def _apply_event(self, ev: MetadataEvent) -> None:
        if isinstance(ev, BrokerJoined):
            self.live[ev.broker.broker_id] = ev.broker
            self._refresh_fetchers()
        elif isinstance(ev, BrokerLeft):
            self.live.pop(ev.broker_id, None)
            if ev.broker_id == self.node_id and not self._stopping and not self._log_dir_offline:
                log.warning("this broker's registration disappeared; the registry re-registers it")
            self._refresh_fetchers()
        elif isinstance(ev, ControllerChanged):
            self.controller = ev.controller
        elif isinstance(ev, TopicDeleted):
            self._remove_topic(ev.name)
        elif isinstance(ev, PartitionStateChanged):
            if self._set_state(ev.topic, ev.partition, ev.state):
                self._apply_role(ev.topic, ev.partition)
        elif isinstance(ev, PartitionStateDeleted):
            self.states.pop((ev.topic, ev.partition), None)
        elif isinstance(ev, EntityConfigsChanged):
            if ev.configs:
                self.entity_configs[(ev.kind, ev.name)] = ev.configs
            else:
                self.entity_configs.pop((ev.kind, ev.name), None)
            if ev.kind == "broker":
                self.broker.apply_broker_configs()
            elif ev.kind == "quota":
                self.broker.quotas_changed()
        elif isinstance(ev, ScramChanged):
            if ev.credentials:
                self.scram[ev.user] = ev.credentials
            else:
                self.scram.pop(ev.user, None)
        elif isinstance(ev, AclsChanged):
            if ev.entries:
                self.acls[ev.key] = ev.entries
            else:
                self.acls.pop(ev.key, None)
            self.broker.acls_changed()
        elif isinstance(ev, ReassignmentChanged):
            if ev.reassignment is None:
                self.reassignments.pop((ev.topic, ev.partition), None)
            else:
                self.reassignments[(ev.topic, ev.partition)] = ev.reassignment

    def _remove_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        for key in [k for k in self.states if k[0] == name]:
            del self.states[key]
        for p in [p for p in self.broker.replicas.partitions() if p.topic == name]:
            self._unfollow(p)
        self.broker.replicas.remove_topic(name)

    def _set_state(self, topic: str, index: int, st: PartitionState) -> bool:
        """Keep the newest state (etcd versions only grow): our own write may come back after the watch
        already delivered a later one, and a stale version would fail every compare-and-swap after."""
        current = self.states.get((topic, index))
        if current is not None and current.version >= st.version:
            return False
        self.states[(topic, index)] = st
        return True

    def _apply_topic(self, rec: TopicRecord) -> None:
        local, _ = self._open_replicas(rec)
        for i in local:
            self._apply_role(rec.name, i)

    def _open_replicas(
        self, rec: TopicRecord, max_open: int | None = None, sync: bool = True
    ) -> tuple[list[int], list[Partition]]:
        """Open this broker's replicas of a topic (at most `max_open` new ones), close the others: the
        partition indexes it hosts, and the replicas opened now."""
        local = [i for i, reps in enumerate(rec.assignment) if self.node_id in reps]
        for p in list(self.broker.replicas.partitions()):
            if p.topic == rec.name and p.index not in local:
                self._unfollow(p)  # moved away by a reassignment
        return local, self.broker.replicas.apply_topic(topic_meta(rec), local, max_open, sync)

    async def _apply_topic_stepwise(self, rec: TopicRecord) -> None:
        # A topic of thousands of partitions takes seconds to open, mostly fsyncs of new directories: the
        # loop opens a few dozen at a time and the fsyncs run in a thread, so the lease keep-alive and
        # requests go on (the partitions answer NOT_LEADER_OR_FOLLOWER until their roles are applied).
        while True:
            _, opened = self._open_replicas(rec, _OPEN_AT_ONCE, sync=False)
            if not opened:  # nothing new here (a config change, another broker's partitions): no yield
                break
            try:
                await asyncio.to_thread(self.broker.replicas.sync_dirs, opened)
            except OSError as e:
                self.broker.replicas.log_dir.fail(f"syncing new directories of {rec.name}", e)
            if len(opened) < _OPEN_AT_ONCE:
                break
        self._apply_topic(rec)  # all open: applies the roles

    def _apply_role(self, topic: str, index: int) -> None:
        p = self.broker.replicas.local_partition(topic, index)
        rec = self.topics.get(topic)
        st = self.states.get((topic, index))
        if p is None or rec is None or st is None:
            return
        role = PartitionRole(
            st.leader, st.leader_epoch, list(rec.assignment[index]), list(st.isr), st.version
        )
        was_leader = p.is_leader
        if st.leader == self.node_id:
            self._unfollow(p)
            p.become_leader(role)
            if not was_leader:
                try:
                    self.broker.coordinator_partition_loaded(topic, index)
                except KafkaError as e:  # its log failed to read: the log directory is offline now,
                    # and the broker leaves; it loads the partition when it leads it again
                    log.warning("%s-%d: its coordinator could not load it: %s", topic, index, e.message)
        else:
            p.become_follower(role)
            if was_leader:
                self.broker.coordinator_partition_unloaded(topic, index)
            self._follow(p, st.leader)

    # -- fetchers ----------------------------------------------------------------------------------
    def _follow(self, p: Partition, leader: int) -> None:
        info = self.live.get(leader)
        if leader == NO_LEADER or info is None or self._stopping or self._log_dir_offline:
            self._fetchers.unfollow(p)
            return
        self._fetchers.follow(p, leader, (info.host, info.port), self._followers_of)

    def _followers_of(self, leader: int) -> list[Partition]:
        return [p for p in self.broker.replicas.partitions() if not p.is_leader and p.role.leader == leader]

    @property
    def _log_dir_offline(self) -> bool:
        return self.broker.replicas.log_dir.offline

    def _unfollow(self, p: Partition) -> None:
        self._fetchers.unfollow(p)

    def _refresh_fetchers(self) -> None:
        for p in self.broker.replicas.partitions():
            if not p.is_leader:
                self._follow(p, p.role.leader)

    def _throttled(self, p: Partition) -> bool:
        return (p.topic, p.index) in self.reassignments

    # -- ISR ---------------------------------------------------------------------------------------
    async def _isr_round(self) -> None:
        """Every _ISR_CHECK_S, the ISR decisions of the led partitions that may need one: those whose
        followers' state changed since they were last settled (Partition.isr_settled), and those counted
        as fetching by a follower's fetch session that stopped fetching for the lag time."""
        replicas, lag = self.broker.replicas, self.settings.replica_lag_time_max_ms
        due = replicas.isr_due
        due.update(self.broker.fetch_sessions.stale_partitions(now_ms(), lag))
        for p, new_isr in due_isr_changes(due, lag, self._hosted):
            st = self.states.get((p.topic, p.index))
            if st is None or st.leader != self.node_id:
                continue
            new_isr = [r for r in new_isr if r in self.live or r in st.isr]  # the dead do not come back
            if sorted(new_isr) == sorted(st.isr):
                continue
            epoch = self.controller.epoch if self.controller is not None else 0
            p.propose_isr(new_isr)  # acks wait for added members from now on, not from the write
            try:
                written = await self.store.set_partition_state(
                    p.topic,
                    p.index,
                    st.evolve(isr=new_isr),
                    expected_version=st.version,
                    controller_epoch=epoch,
                )
            except MetadataError as e:  # a conflict, a fence, etcd away or refusing: next round
                log.debug("ISR change of %s-%d not recorded: %s", p.topic, p.index, e)
                continue
            log.info("%s-%d: ISR %s -> %s", p.topic, p.index, list(st.isr), new_isr)
            if set(st.isr) - set(new_isr):
                self.broker.metrics.on_isr_shrink()
            if set(new_isr) - set(st.isr):
                self.broker.metrics.on_isr_expand()
            if self._set_state(p.topic, p.index, written):
                self._apply_role(p.topic, p.index)

    def _hosted(self, p: Partition) -> bool:
        return self.broker.replicas.local_partition(p.topic, p.index) is p

    # -- controller --------------------------------------------------------------------------------
    async def _elected(self, info: ControllerInfo) -> None:
        log.info("broker %d is the controller (epoch %d)", self.node_id, info.epoch)
        self.controller = info
        self._controller = Controller(self, info.epoch)
        self._controller.start()

    async def _resigned(self, info: ControllerInfo) -> None:
        log.info("broker %d is no longer the controller", self.node_id)
        if self._controller is not None:
            await self._controller.stop()
            self._controller = None
