"""Hosts of their own: each process of a test cluster in its own network namespace.

A `NetLab` makes a bridge in the root namespace and, per host, a namespace joined to it by a veth pair.
The test (the clients) stays in the root namespace and reaches every host through the bridge's
address; every host reaches every other through the bridge. All traffic stays inside the namespaces
and the bridge this run made.

Faults are nftables rules inside a host's namespace (a table of its own, flushed by `heal`): `cut`
drops what a host sends to and receives from another (both ways, or one way), `cut_clients` the same
for the test's own address, and `loss` drops a share of everything a host sends. This kernel has no
`netem` qdisc (CONFIG_NET_SCH_NETEM is off), so there is no added latency here: tests/support/
delay_proxy.py delays one connection in user space instead.

Names carry the pid of the run (`bk<pid>...`), so parallel runs do not collide, and a lab removes
what a dead run left behind before it makes its own; `close()` (fixtures call it in `finally`, and
atexit as a last resort) kills the processes still in its namespaces, then deletes them and the
bridge.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from brook.dev.etcd import EtcdProcess

_TABLE = "brookfault"


def sh(*cmd: str, ns: str | None = None, check: bool = True, stdin: str | None = None) -> str:
    full = ["ip", "netns", "exec", ns, *cmd] if ns else list(cmd)
    out = subprocess.run(full, input=stdin, capture_output=True, text=True, timeout=20)
    if check and out.returncode != 0:
        raise RuntimeError(f"{' '.join(full)}: {out.stderr.strip()}")
    return out.stdout


@dataclass
class Host:
    name: str  # the namespace
    addr: str

    @property
    def exec_prefix(self) -> list[str]:
        """Run a command in this host: `ip netns exec` execs it, so the pid is the command's own."""
        return ["ip", "netns", "exec", self.name]


class NetLab:
    def __init__(self) -> None:
        _sweep_dead_runs()
        self.tag = f"bk{os.getpid()}"
        self.bridge = f"{self.tag}br"[:15]
        self.subnet = _free_subnet()
        self.client_addr = f"{self.subnet}.1"  # the root namespace, on the bridge
        self.hosts: dict[str, Host] = {}
        self._closed = False
        sh("ip", "link", "add", self.bridge, "type", "bridge")
        try:
            sh("ip", "addr", "add", f"{self.client_addr}/24", "dev", self.bridge)
            sh("ip", "link", "set", self.bridge, "up")
        except BaseException:
            self.close()
            raise
        atexit.register(self.close)

    def host(self, label: str) -> Host:
        """A new namespace `<tag>-<label>` with an address on the bridge."""
        n = len(self.hosts)
        ns = f"{self.tag}-{label}"
        h = Host(ns, f"{self.subnet}.{10 + n}")
        veth, peer = f"{self.tag}v{n}"[:15], f"{self.tag}p{n}"[:15]
        self.hosts[label] = h  # before the commands: close() removes a half-made host too
        sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", peer)
        sh("ip", "link", "set", veth, "master", self.bridge, "up")
        sh("ip", "link", "set", peer, "netns", ns)
        sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "set", peer, "name", "eth0", ns=ns)
        sh("ip", "addr", "add", f"{h.addr}/24", "dev", "eth0", ns=ns)
        sh("ip", "link", "set", "eth0", "up", ns=ns)
        sh("nft", "-f", "-", ns=ns, stdin=_RULESET)
        return h

    # -- faults ------------------------------------------------------------------------------------
    def cut(self, a: Host, b: Host, *, one_way: bool = False) -> None:
        """Drop what `a` sends to `b`; unless `one_way`, also what `a` receives from `b`."""
        self._drop(a, b.addr, one_way)

    def isolate(self, a: Host) -> None:
        """Cut `a` from every other host (etcd, the other brokers), not from the clients."""
        for h in self.hosts.values():
            if h is not a:
                self.cut(a, h)

    def cut_clients(self, a: Host, *, one_way: bool = False) -> None:
        """Cut `a` from the test's own clients (the root namespace)."""
        self._drop(a, self.client_addr, one_way)

    def _drop(self, a: Host, dst: str, one_way: bool) -> None:
        sh("nft", "add", "rule", "inet", _TABLE, "out", "ip", "daddr", dst, "drop", ns=a.name)
        if not one_way:
            sh("nft", "add", "rule", "inet", _TABLE, "in", "ip", "saddr", dst, "drop", ns=a.name)

    def loss(self, a: Host, percent: int) -> None:
        """Drop `percent` % of the packets `a` sends (to anyone)."""
        rule = ["numgen", "random", "mod", "100", "<", str(percent), "drop"]
        sh("nft", "add", "rule", "inet", _TABLE, "out", "oifname", "eth0", *rule, ns=a.name)

    def heal(self, a: Host | None = None) -> None:
        """Remove the faults of `a` (of every host when None)."""
        for h in [a] if a is not None else list(self.hosts.values()):
            for chain in ("in", "out"):
                sh("nft", "flush", "chain", "inet", _TABLE, chain, ns=h.name, check=False)

    # -- cleanup -----------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for h in self.hosts.values():
            _remove_namespace(h.name)
        sh("ip", "link", "del", self.bridge, check=False)


_RULESET = f"""
table inet {_TABLE} {{
    chain in {{ type filter hook input priority 0; policy accept; }}
    chain out {{ type filter hook output priority 0; policy accept; }}
}}
"""


def _remove_namespace(ns: str) -> None:
    """Kill what still runs in `ns` (a test that failed half-way), then delete it (its veth goes too)."""
    for pid in sh("ip", "netns", "pids", ns, check=False).split():
        with contextlib.suppress(ProcessLookupError, ValueError):
            os.kill(int(pid), 9)
    sh("ip", "netns", "del", ns, check=False)


def _sweep_dead_runs() -> None:
    """Namespaces and bridges of runs whose process is gone (killed before its cleanup ran)."""
    for line in sh("ip", "netns", "list").splitlines():
        m = re.match(r"bk(\d+)-\S+", line)
        if m and not Path(f"/proc/{m.group(1)}").exists():
            _remove_namespace(line.split()[0])
    for m in re.finditer(r"^\d+: (bk(\d+)br)[:@]", sh("ip", "-o", "link", "show"), re.M):
        if not Path(f"/proc/{m.group(2)}").exists():
            sh("ip", "link", "del", m.group(1), check=False)


def _free_subnet() -> str:
    """A /24 no interface here uses, from the pid (so two runs at once pick different ones)."""
    used = sh("ip", "-o", "-4", "addr", "show")
    for i in range(256):
        n = (os.getpid() + i) % 250 + 1
        subnet = f"10.213.{n}"
        if f" {subnet}." not in used:
            return subnet
    raise RuntimeError("no free 10.213.x.0/24 subnet for the test hosts")


class NsEtcd(EtcdProcess):
    """The test cluster's etcd on a host of its own (short raft timings, as tests/support/cluster.py)."""

    def __init__(self, host: Host, data_dir: Path) -> None:
        super().__init__(data_dir, client_port=2379, peer_port=2380, unsafe_no_fsync=True,
                         heartbeat_ms=100, election_ms=500)  # fmt: skip
        self.host = host

    @property
    def endpoint(self) -> str:
        return f"{self.host.addr}:{self.client_port}"

    def command(self) -> list[str]:
        return [*self.host.exec_prefix, *(a.replace("127.0.0.1", self.host.addr) for a in super().command())]
