"""The soak: a 3-broker cluster on hosts of its own, real clients, and faults one after another.

Etcd and each broker run in network namespaces (tests/support/netns.py), each broker with the disk
fault shim and libfaketime preloaded (tests/support/diskfault.py). The workload (tests/support/
checker.py) runs throughout: an idempotent producer (acks=all), a transactional producer (one
transaction in four aborted) and a read_committed consumer group. Faults, drawn at random:

  kill9           kill -9 of a broker, restarted 1-3 s later
  sigstop         SIGSTOP of a broker for 0.3-1.2 s (shorter than its lease: no failover expected)
  etcd_kill9      kill -9 of etcd, restarted 1-3 s later
  cut_etcd        a partition leader cut from etcd (still reaching clients and followers), 3-5 s
  cut_follower    a follower cut from its leader, both ways, 3-5 s
  one_way_etcd    a leader unable to send to etcd, 3-5 s
  loss            20 % of a broker's packets dropped, 3-5 s
  isolate         a leader cut from etcd and the other brokers, not from clients, 3-5 s
  disk_write_eio  EIO on a broker's log writes, 2-3 s (its log directory goes offline, then back)
  disk_read_eio   EIO on its reads, 2-3 s
  disk_fsync      ENOSPC on fsync, 2-3 s
  clock_jump      a broker's wall clock an hour forward or back, 3-5 s, then right again

After each fault heals, the workload must acknowledge more within 60 s (else the run counts a stall
and goes on). At the end everything heals, the clients drain, and the checker reads every partition
back: acknowledged records lost, duplicated or reordered, aborted records read, committed offsets
going backwards. `scripts/soak` runs it (default 1,000 faults); the test suite runs each kind briefly.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tests.integration.test_cluster import create, partition_md
from tests.support.checker import Workload
from tests.support.cluster import Cluster, eventually
from tests.support.diskfault import Clock, DiskFaults
from tests.support.netns import NetLab

TOPIC_CONFIG = {"min.insync.replicas": "2"}
ARGS = ["--log-dir-probe-interval-ms", "200"]


class Soak:
    def __init__(self, root: Path, rng: random.Random) -> None:
        self.rng = rng
        self.lab = NetLab()
        self.disks = {n: DiskFaults(root / f"disk-{n}.ctl", root / f"broker-{n}") for n in range(3)}
        self.clocks = {n: Clock(root / f"clock-{n}.ctl") for n in range(3)}
        self.cluster = Cluster(root, lab=self.lab, extra_args=ARGS, broker_env=self._env)
        self.faults: Counter[str] = Counter()
        self.stalls: list[str] = []

    def _env(self, node: int) -> dict[str, str]:
        disk, clock = self.disks[node].env(), self.clocks[node].env()
        return {**disk, **clock, "LD_PRELOAD": f"{disk['LD_PRELOAD']}:{clock['LD_PRELOAD']}"}

    def start(self) -> Workload:
        self.cluster.start()
        for name in ("soak", "soak-txn"):
            create(self.cluster, name, 3, 3, TOPIC_CONFIG)
        work = Workload(self.cluster.bootstrap, "soak", "soak-txn", "soak-group").start()
        eventually(lambda: len(work.acked) > 200 and work.txns["committed"] > 2, 60, "a running workload")
        return work

    def stop(self) -> None:
        self.lab.heal()
        for n in range(3):
            self.disks[n].set()
            self.clocks[n].set(0)
        try:
            self.cluster.stop()
        finally:
            self.lab.close()

    # -- faults ----------------------------------------------------------------------------------
    def _leader(self) -> int:
        """A partition's leader (any broker while that partition has none)."""
        leader = int(partition_md(self.cluster, self.rng.choice(["soak", "soak-txn"])).leader)
        return leader if leader in range(3) else self._any()

    def _any(self) -> int:
        return self.rng.randrange(3)

    def _hold(self, lo: float, hi: float) -> None:
        time.sleep(self.rng.uniform(lo, hi))

    def kill9(self) -> None:
        b = self.cluster.broker(self._any())
        b.kill()
        self._hold(1, 3)
        b.start()

    def sigstop(self) -> None:
        proc = self.cluster.broker(self._any()).proc
        assert proc is not None
        os.kill(proc.pid, signal.SIGSTOP)
        try:
            self._hold(0.3, 1.2)
        finally:
            os.kill(proc.pid, signal.SIGCONT)

    def etcd_kill9(self) -> None:
        self.cluster.etcd.kill()
        self._hold(1, 3)
        self.cluster.etcd.start()

    def _net(self, fault: Callable[[], None]) -> None:
        fault()
        try:
            self._hold(3, 5)
        finally:
            self.lab.heal()

    def cut_etcd(self) -> None:
        h = self.cluster.hosts
        leader = self._leader()
        self._net(lambda: self.lab.cut(h[leader], h["etcd"]))

    def cut_follower(self) -> None:
        h, leader = self.cluster.hosts, self._leader()
        follower = self.rng.choice([n for n in range(3) if n != leader])
        self._net(lambda: self.lab.cut(h[follower], h[leader]))

    def one_way_etcd(self) -> None:
        h = self.cluster.hosts
        leader = self._leader()
        self._net(lambda: self.lab.cut(h[leader], h["etcd"], one_way=True))

    def loss(self) -> None:
        host = self.cluster.hosts[self._any()]
        self._net(lambda: self.lab.loss(host, 20))

    def isolate(self) -> None:
        host = self.cluster.hosts[self._leader()]
        self._net(lambda: self.lab.isolate(host))

    def _disk(self, **fault: str | int) -> None:
        disk = self.disks[self._leader()]
        disk.set(**fault)
        try:
            self._hold(2, 3)
        finally:
            disk.set()

    def disk_write_eio(self) -> None:
        self._disk(write="EIO")

    def disk_read_eio(self) -> None:
        self._disk(read="EIO")

    def disk_fsync(self) -> None:
        self._disk(fsync="ENOSPC")

    def clock_jump(self) -> None:
        clock = self.clocks[self._any()]
        clock.set(self.rng.choice([3600, -3600]))
        try:
            self._hold(3, 5)
        finally:
            clock.set(0)

    KINDS = (
        "kill9", "sigstop", "etcd_kill9", "cut_etcd", "cut_follower", "one_way_etcd", "loss", "isolate",
        "disk_write_eio", "disk_read_eio", "disk_fsync", "clock_jump",
    )  # fmt: skip

    def inject(self, work: Workload, kind: str) -> None:
        before = len(work.acked)
        getattr(self, kind)()
        self.faults[kind] += 1
        try:
            eventually(lambda: len(work.acked) > before + 50, 60, f"acknowledgements after {kind}")
        except AssertionError:
            self.stalls.append(f"{kind} #{sum(self.faults.values())}")


def soak(
    root: Path, faults: int, seed: int, kinds: tuple[str, ...] = Soak.KINDS, minutes: float | None = None
) -> dict[str, object]:
    """Run `faults` faults drawn from `kinds` (fewer if `minutes` run out first); the figures and the
    checker's verdict."""
    rng = random.Random(seed)
    s = Soak(root, rng)
    start = time.monotonic()
    try:
        work = s.start()
        try:
            ends = start + minutes * 60 if minutes is not None else float("inf")
            for i in range(faults):
                if time.monotonic() >= ends:
                    break
                s.inject(work, rng.choice(kinds))
                if (i + 1) % 50 == 0:
                    print(f"soak: {i + 1} faults, {len(work.acked)} acked", file=sys.stderr, flush=True)
        finally:
            s.lab.heal()
            work.stop(drain=60)
        try:
            verdict = work.check()
        except AssertionError as e:  # not even readable once every fault had healed: a finding too
            unreadable = str(e)
        else:
            unreadable = ""
    finally:
        s.stop()
    report: dict[str, object] = {
        "faults": dict(s.faults),
        "stalls": s.stalls,
        "seconds": round(time.monotonic() - start),
        "client_errors": dict(work.errors),
    }
    if unreadable:
        return {
            **report,
            "acknowledged": len(work.acked),
            "problems": {"unreadable": [unreadable]},
            "ok": False,
        }
    return {
        **report,
        "acknowledged": verdict.acknowledged,
        "transactions": {"committed": verdict.committed_txns, "aborted": verdict.aborted_txns},
        "consumed": verdict.consumed,
        "problems": {k: v[:10] for k, v in vars(verdict).items() if isinstance(v, list) and v},
        "ok": verdict.ok and not s.stalls,
    }


def _plain(o: object) -> object:
    """Records (bytes) as text in the report."""
    return o.decode(errors="replace") if isinstance(o, bytes) else repr(o)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--faults", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--kinds", default=",".join(Soak.KINDS), help="comma-separated fault kinds")
    ap.add_argument("--minutes", type=float, help="stop injecting after this long, then check")
    a = ap.parse_args()
    # SIGTERM unwinds like Ctrl-C: brokers, etcd and the network namespaces go with the soak.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    kinds = tuple(k for k in a.kinds.split(",") if k)
    unknown = set(kinds) - set(Soak.KINDS)
    if unknown:
        ap.error(f"unknown fault kinds: {', '.join(sorted(unknown))}")
    with tempfile.TemporaryDirectory(prefix="brook-soak-") as root:
        report = soak(Path(root), a.faults, a.seed, kinds, a.minutes)
        errors = report.get("client_errors") or {}
        stuck = any("nothing delivered" in str(k) for k in errors)  # a stuck client: read its brokers
        if not report["ok"] or stuck:  # the brokers' and etcd's logs outlive such a run, for reading
            kept = Path(tempfile.gettempdir()) / f"brook-soak-{a.seed}-logs"
            kept.mkdir(exist_ok=True)
            for log in Path(root).glob("*.log"):
                shutil.copy(log, kept / log.name)
            report["logs"] = str(kept)
    print(json.dumps({"seed": a.seed, **report}, indent=1, default=_plain))
    raise SystemExit(0 if report["ok"] else 1)


if __name__ == "__main__":
    main()
