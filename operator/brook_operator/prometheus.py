"""The one module that queries Prometheus (its HTTP API, instant queries over /api/v1/query).

Failures are one of three exceptions, each with the condition reason the autoscaler reports:
PrometheusUnreachable (no answer: connection refused, DNS, timeout), QueryFailed (Prometheus answered
with an error, or something that is not Prometheus answered) and MetricNotFound (the query is fine but
no series matches: Prometheus does not scrape the cluster's brokers, or under other labels).

`broker_load` reads what the autoscaler needs per Kafka broker id: producer bytes in per second and
partition replicas hosted. Brook's series carry no broker label (each broker is a scrape target);
`brook_broker_info{broker}` of the same target gives the id.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp

PROMETHEUS_UNREACHABLE = "PrometheusUnreachable"
QUERY_FAILED = "QueryFailed"
METRIC_NOT_FOUND = "MetricNotFound"

# Which series are this Cluster's brokers: labels Prometheus attaches to the scrape target. The default
# fits a ServiceMonitor and the usual `prometheus.io/scrape` pod relabeling (namespace, pod).
DEFAULT_SELECTOR = 'namespace="{namespace}",pod=~"{name}-broker-[0-9]+"'
DEFAULT_RATE_WINDOW = "1m"


class PrometheusError(Exception):
    reason = QUERY_FAILED

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PrometheusUnreachable(PrometheusError):
    reason = PROMETHEUS_UNREACHABLE


class QueryFailed(PrometheusError):
    reason = QUERY_FAILED


class MetricNotFound(PrometheusError):
    reason = METRIC_NOT_FOUND


@dataclass(frozen=True, slots=True)
class Sample:
    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class BrokerLoad:
    brokers: tuple[int, ...]  # broker ids Prometheus scrapes (brook_broker_info)
    bytes_in: dict[int, float] | None = None  # broker id → producer bytes/s (0 for idle brokers)
    partitions: dict[int, float] | None = None  # broker id → partition replicas hosted
    queries: tuple[str, ...] = ()


def selector_for(template: str, name: str, namespace: str) -> str:
    return template.format(name=name, namespace=namespace)


def _vector(metric: str, selector: str) -> str:
    return f"{metric}{{{selector}}}" if selector else metric


def info_query(selector: str) -> str:
    return _vector("brook_broker_info", selector)


def bytes_in_query(selector: str, window: str = DEFAULT_RATE_WINDOW) -> str:
    """Producer bytes/s per Kafka broker id: rate of brook_broker_bytes_in_total, summed over topics."""
    return (
        f"sum by (broker) (rate({_vector('brook_broker_bytes_in_total', selector)}[{window}])"
        f" * on (instance, job) group_left (broker) {info_query(selector)})"
    )


def partitions_query(selector: str) -> str:
    """Partition replicas hosted per Kafka broker id (Kafka's PartitionCount)."""
    return (
        f"sum by (broker) ({_vector('brook_partitions', selector)}"
        f" * on (instance, job) group_left (broker) {info_query(selector)})"
    )


class Prometheus:
    def __init__(self, url: str, *, timeout: float = 5.0, session: aiohttp.ClientSession | None = None):
        self.url = url.rstrip("/")
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session = session

    async def query(self, promql: str) -> list[Sample]:
        """An instant query's vector (may be empty)."""
        endpoint = f"{self.url}/api/v1/query"
        own = self._session is None
        session = self._session or aiohttp.ClientSession(timeout=self._timeout)
        try:
            async with session.get(endpoint, params={"query": promql}, timeout=self._timeout) as resp:
                status = resp.status
                try:
                    doc: Any = await resp.json(content_type=None)
                except ValueError:
                    doc = None
        except (aiohttp.ClientError, TimeoutError, OSError) as e:
            raise PrometheusUnreachable(
                f"cannot reach Prometheus at {self.url}: {e or type(e).__name__}"
            ) from e
        finally:
            if own:
                await session.close()
        return parse_response(self.url, promql, status, doc)


def parse_response(url: str, promql: str, status: int, doc: Any) -> list[Sample]:
    """The samples of an /api/v1/query answer; QueryFailed for anything but a success with a vector."""
    if not isinstance(doc, dict) or "status" not in doc:
        raise QueryFailed(
            f"{url}/api/v1/query answered HTTP {status} without a Prometheus API response "
            "(is prometheusUrl the base URL of a Prometheus server?)"
        )
    if doc.get("status") != "success":
        raise QueryFailed(
            f"Prometheus refused '{promql}' (HTTP {status}): {doc.get('errorType', 'error')}: "
            f"{doc.get('error', '')}"
        )
    data = doc.get("data") or {}
    if data.get("resultType") != "vector":
        raise QueryFailed(f"'{promql}' returned {data.get('resultType')!r}, not an instant vector")
    out = []
    for r in data.get("result") or []:
        try:
            value = float(r["value"][1])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise QueryFailed(f"'{promql}' returned a malformed sample {r!r}") from e
        if math.isnan(value):
            continue
        out.append(Sample(dict(r.get("metric") or {}), value))
    return out


def _by_broker(samples: list[Sample], promql: str) -> dict[int, float]:
    out: dict[int, float] = {}
    for s in samples:
        raw = s.labels.get("broker", "")
        if not raw.lstrip("-").isdigit():
            raise QueryFailed(
                f"'{promql}' returned a series without a numeric broker label: {dict(s.labels)}"
            )
        out[int(raw)] = out.get(int(raw), 0.0) + s.value
    return out


async def broker_load(
    prom: Prometheus,
    selector: str,
    *,
    bytes_in: bool,
    partitions: bool,
    window: str = DEFAULT_RATE_WINDOW,
) -> BrokerLoad:
    """The load of the brokers `selector` matches, per Kafka broker id.

    MetricNotFound when Prometheus has no brook_broker_info for the selector (it does not scrape these
    brokers) or no brook_partitions. A scraped broker without produce traffic has no
    brook_broker_bytes_in_total series yet: its bytes in are 0.
    """
    q_info = info_query(selector)
    info = await prom.query(q_info)
    if not info:
        raise MetricNotFound(
            f"no series for {q_info}: Prometheus at {prom.url} does not scrape this cluster's brokers "
            "(check its scrape configuration, or the operator's BROOK_OPERATOR_AUTOSCALE_SELECTOR)"
        )
    brokers = tuple(sorted(_by_broker(info, q_info)))
    queries = [q_info]
    bytes_values: dict[int, float] | None = None
    partition_values: dict[int, float] | None = None
    if bytes_in:
        q = bytes_in_query(selector, window)
        queries.append(q)
        found = _by_broker(await prom.query(q), q)
        bytes_values = {b: found.get(b, 0.0) for b in sorted(set(brokers) | set(found))}
    if partitions:
        q = partitions_query(selector)
        queries.append(q)
        found = _by_broker(await prom.query(q), q)
        if not found:
            raise MetricNotFound(f"no series for {q}: the scraped targets do not export brook_partitions")
        partition_values = {b: found.get(b, 0.0) for b in sorted(set(brokers) | set(found))}
    return BrokerLoad(brokers, bytes_values, partition_values, tuple(queries))
