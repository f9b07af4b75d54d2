"""Client quotas as Kafka keeps them: byte rates for produce and fetch and a request-time percentage, per
user and client id (with <default> entities), enforced by throttling (KIP-13, KIP-124, KIP-219).

Which quota applies to a (user, client id) is Kafka's precedence, most specific first:
user+client, user+<default> client, user, <default> user+client, <default> user+<default> client,
<default> user, client, <default> client. All clients that resolve to the same quota entity share one
rate (a user-level quota is the user's, whichever client ids it uses).

The rate is measured as Kafka's SampledStat does: `quota.window.num` windows of
`quota.window.size.seconds`, the elapsed time never taken as less than num-1 full windows. A request
that takes the rate above the bound is answered with throttle_time_ms = (rate - bound) / bound x the
measured window, and the connection reads nothing more for that long (KIP-219's muting).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote, unquote

PRODUCE, FETCH, REQUEST = "producer_byte_rate", "consumer_byte_rate", "request_percentage"
# Every key AlterClientQuotas accepts, by the entity types it applies to (Kafka's QuotaConfig).
CLIENT_KEYS = frozenset({PRODUCE, FETCH, REQUEST, "controller_mutation_rate"})
IP_KEYS = frozenset({"connection_creation_rate"})
ENTITY_TYPES = ("user", "client-id", "ip")
DEFAULT = "<default>"

# An entity: (type, name) pairs in ENTITY_TYPES order; name None is the <default> entity of that type.
Entity = tuple[tuple[str, str | None], ...]


@dataclass(slots=True)
class QuotaSettings:
    window_num: int = 11  # quota.window.num
    window_size_s: float = 1.0  # quota.window.size.seconds


def entity_key(entity: Entity) -> str:
    """The stored name of an entity, e.g. "user=alice,client-id=<default>" (names percent-encoded)."""
    return ",".join(f"{t}={DEFAULT if n is None else quote(n, safe='')}" for t, n in entity)


def parse_entity_key(key: str) -> Entity:
    out: list[tuple[str, str | None]] = []
    for part in key.split(","):
        t, _, n = part.partition("=")
        if t not in ENTITY_TYPES:
            raise ValueError(f"unknown quota entity type {t!r}")
        out.append((t, None if n == DEFAULT else unquote(n)))
    return tuple(sorted(out, key=lambda c: ENTITY_TYPES.index(c[0])))


def check_entity(entity: Entity, keys: set[str]) -> str | None:
    """Why an entity or a set of keys cannot be altered (Kafka's INVALID_REQUEST), or None."""
    types = [t for t, _ in entity]
    if not types or len(set(types)) != len(types) or any(t not in ENTITY_TYPES for t in types):
        return f"invalid quota entity {types}: use user, client-id (or both) or ip"
    if "ip" in types and len(types) > 1:
        return "an ip quota entity cannot be combined with user or client-id"
    allowed = IP_KEYS if "ip" in types else CLIENT_KEYS
    bad = sorted(keys - allowed)
    if bad:
        return f"quota keys {bad} do not apply to {'ip' if 'ip' in types else 'user/client-id'} entities"
    return None


def _candidates(user: str, client_id: str) -> list[Entity]:
    u, c = ("user", user), ("client-id", client_id)
    du, dc = ("user", None), ("client-id", None)
    return [(u, c), (u, dc), (u,), (du, c), (du, dc), (du,), (c,), (dc,)]


class _Rate:
    """Kafka's sampled rate: values per second over the last `num` windows."""

    __slots__ = ("_num", "_samples", "_size")

    def __init__(self, num: int, size_s: float) -> None:
        self._num, self._size = num, size_s
        self._samples: deque[list[float]] = deque()  # [window start, total]

    def record(self, value: float, now: float) -> None:
        s = self._samples
        if not s or now - s[-1][0] >= self._size:
            s.append([now, 0.0])
        s[-1][1] += value
        while s and now - s[0][0] >= self._num * self._size:
            s.popleft()

    def last(self) -> float:
        """When the newest window started (-inf: never recorded)."""
        return self._samples[-1][0] if self._samples else float("-inf")

    def measure(self, now: float) -> tuple[float, float]:
        """(rate per second, the window it was measured over in seconds)."""
        if not self._samples:
            return 0.0, self._size * (self._num - 1)
        elapsed = now - self._samples[0][0]
        full, least = int(elapsed // self._size), self._num - 1
        if full < least:
            elapsed += (least - full) * self._size
        return sum(v for _, v in self._samples) / elapsed, elapsed


# A client's rate unused this long is dropped (Kafka expires its quota sensors after an hour), and the
# resolution cache starts over past this many (user, client-id) pairs: clients that come and go (a new
# client id per process) would otherwise grow both for good.
INACTIVE_S = 3600.0
_PRUNE_EVERY_S = 60.0
_RESOLVED_MAX = 10_000


class ClientQuotas:
    def __init__(self, settings: QuotaSettings | None = None) -> None:
        self.settings = settings or QuotaSettings()
        self._configs: dict[Entity, dict[str, float]] = {}
        self._kinds: set[str] = set()
        self._rates: dict[tuple[str, Entity], _Rate] = {}
        self._resolved: dict[tuple[str, str, str], tuple[Entity, float] | None] = {}
        self._pruned = float("-inf")

    def set_configs(self, stored: Mapping[str, Mapping[str, str]]) -> None:
        """All quota entities' configs (stored name -> {key: value}); forgets resolutions, keeps rates."""
        configs: dict[Entity, dict[str, float]] = {}
        for key, values in stored.items():
            try:
                configs[parse_entity_key(key)] = {k: float(v) for k, v in values.items()}
            except ValueError:
                continue  # written by a newer version: not ours to enforce
        self._configs = configs
        self._kinds = {k for values in configs.values() for k in values}
        self._resolved = {}

    @property
    def configs(self) -> dict[Entity, dict[str, float]]:
        return self._configs

    def has(self, kind: str) -> bool:
        """Whether any entity has a quota of this kind (else charging it is skipped)."""
        return kind in self._kinds

    def _bound(self, kind: str, user: str, client_id: str) -> tuple[Entity, float] | None:
        key = (kind, user, client_id)
        if key not in self._resolved:
            found = None
            for entity in _candidates(user, client_id):
                value = self._configs.get(entity, {}).get(kind)
                if value is not None:
                    found = (entity, value)
                    break
            self._resolved[key] = found
        return self._resolved[key]

    def record(self, kind: str, user: str, client_id: str, value: float, now: float) -> int:
        """Count `value` (bytes, or request milliseconds for REQUEST) and return the throttle in ms."""
        if not self._configs:
            return 0
        if now - self._pruned >= _PRUNE_EVERY_S:
            self._prune(now)
        bound = self._bound(kind, user, client_id)
        if bound is None:
            return 0
        entity, quota = bound
        if kind == REQUEST:
            quota = quota * 10  # n percent of one thread: n/100 * 1000 ms per second
        # A <default> quota is each user's / client's own, not one shared by all of them (Kafka's quota
        # metric tags): the rate is kept under the actual names at the level the quota was found.
        key = (kind, tuple((t, user if t == "user" else client_id) for t, _ in entity))
        rate = self._rates.get(key)
        if rate is None:
            rate = self._rates[key] = _Rate(self.settings.window_num, self.settings.window_size_s)
        rate.record(value, now)
        observed, window = rate.measure(now)
        if quota <= 0 or observed <= quota:
            return 0
        return round((observed - quota) / quota * window * 1000)

    def _prune(self, now: float) -> None:
        self._pruned = now
        self._rates = {k: r for k, r in self._rates.items() if now - r.last() < INACTIVE_S}
        if len(self._resolved) > _RESOLVED_MAX:
            self._resolved = {}

    def tracked(self) -> int:
        """How many rates are kept (entities with a quota that recorded within the last hour)."""
        return len(self._rates)
