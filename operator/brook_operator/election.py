"""Leader election over a coordination.k8s.io/v1 Lease (pure decisions; `leader.py` does the I/O).

Several operator replicas may run; only the Lease holder reconciles. The holder renews the Lease every
few seconds; another replica takes over once `renewTime + leaseDurationSeconds` has passed. Writes are
guarded by the Lease's resourceVersion, so two replicas cannot both take an expired Lease.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

MICROTIME = "%Y-%m-%dT%H:%M:%S.%fZ"


def format_time(t: datetime) -> str:
    return t.astimezone(UTC).strftime(MICROTIME)


def parse_time(s: str | None) -> datetime | None:
    if not s:
        return None
    for fmt in (MICROTIME, "%Y-%m-%dT%H:%M:%SZ"):
        try:
            return datetime.strptime(s, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    return None


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    holder: str | None
    duration_seconds: int
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int = 0

    @classmethod
    def from_spec(cls, spec: dict[str, Any] | None) -> LeaseRecord:
        s = spec or {}
        return cls(
            holder=s.get("holderIdentity") or None,
            duration_seconds=int(s.get("leaseDurationSeconds") or 0),
            acquire_time=parse_time(s.get("acquireTime")),
            renew_time=parse_time(s.get("renewTime")),
            transitions=int(s.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "leaseTransitions": self.transitions,
        }
        if self.acquire_time is not None:
            spec["acquireTime"] = format_time(self.acquire_time)
        if self.renew_time is not None:
            spec["renewTime"] = format_time(self.renew_time)
        return spec

    def expired(self, now: datetime) -> bool:
        if self.holder is None or self.renew_time is None:
            return True
        return self.renew_time + timedelta(seconds=self.duration_seconds) <= now


@dataclass(frozen=True, slots=True)
class LeaseDecision:
    action: Literal["create", "update", "wait"]
    record: LeaseRecord | None  # what to write (None: nothing)
    leader: bool  # whether `me` leads if the write succeeds


def decide(current: LeaseRecord | None, me: str, now: datetime, duration_seconds: int) -> LeaseDecision:
    """What replica `me` does with the Lease it read (None: the Lease does not exist)."""
    if current is None:
        return LeaseDecision("create", LeaseRecord(me, duration_seconds, now, now, 0), True)
    if current.holder == me:
        renewed = LeaseRecord(me, duration_seconds, current.acquire_time or now, now, current.transitions)
        return LeaseDecision("update", renewed, True)
    if current.expired(now):
        taken = LeaseRecord(me, duration_seconds, now, now, current.transitions + 1)
        return LeaseDecision("update", taken, True)
    return LeaseDecision("wait", None, False)


def release(current: LeaseRecord, me: str, now: datetime) -> LeaseRecord | None:
    """The record that hands the Lease over at once on a clean stop (None: not ours to release)."""
    if current.holder != me:
        return None
    return LeaseRecord(None, current.duration_seconds, current.acquire_time, now, current.transitions)
