"""The Prometheus client against a stand-in HTTP server: queries sent, answers read, errors named."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest
from aiohttp import web

from brook_operator import prometheus as prom
from tests.support.ports import free_port

SEL = 'namespace="kafka",pod=~"demo-broker-[0-9]+"'


def vector(*series: tuple[dict[str, str], float]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "vector",
            "result": [{"metric": m, "value": [1.0, str(v)]} for m, v in series],
        },
    }


Handler = Callable[[str], tuple[int, Any]]


def serve(handler: Handler, coro: Callable[[str], Any]) -> tuple[Any, list[str]]:
    """Run `coro(url)` against a server answering /api/v1/query with `handler(query)`."""
    seen: list[str] = []

    async def query(request: web.Request) -> web.Response:
        q = request.query["query"]
        seen.append(q)
        status, body = handler(q)
        if isinstance(body, str):
            return web.Response(status=status, text=body, content_type="text/html")
        return web.Response(status=status, text=json.dumps(body), content_type="application/json")

    async def main() -> Any:
        app = web.Application()
        app.router.add_get("/prefix/api/v1/query", query)
        runner = web.AppRunner(app)
        await runner.setup()
        port = free_port()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            return await coro(f"http://127.0.0.1:{port}/prefix/")
        finally:
            await runner.cleanup()

    return asyncio.run(main()), seen


def load(url: str, **kw: Any) -> Any:
    return prom.broker_load(prom.Prometheus(url, timeout=2), SEL, window="30s", **kw)


def test_queries_select_the_cluster_and_join_the_broker_id() -> None:
    assert prom.selector_for(prom.DEFAULT_SELECTOR, "demo", "kafka") == SEL
    assert prom.info_query(SEL) == f"brook_broker_info{{{SEL}}}"
    assert prom.bytes_in_query(SEL, "30s") == (
        f"sum by (broker) (rate(brook_broker_bytes_in_total{{{SEL}}}[30s])"
        f" * on (instance, job) group_left (broker) brook_broker_info{{{SEL}}})"
    )
    assert prom.partitions_query("") == (
        "sum by (broker) (brook_partitions * on (instance, job) group_left (broker) brook_broker_info)"
    )


def test_broker_load_per_broker_id_with_idle_brokers_at_zero() -> None:
    def handler(q: str) -> tuple[int, Any]:
        if q.startswith("brook_broker_info"):
            return 200, vector(*(({"broker": str(b), "instance": f"i{b}"}, 1) for b in range(3)))
        if "bytes_in" in q:
            return 200, vector(({"broker": "0"}, 1500.5), ({"broker": "2"}, 10))
        return 200, vector(({"broker": "0"}, 12), ({"broker": "1"}, 12), ({"broker": "2"}, 11))

    got, seen = serve(handler, lambda url: load(url, bytes_in=True, partitions=True))
    assert got.brokers == (0, 1, 2)
    assert got.bytes_in == {0: 1500.5, 1: 0.0, 2: 10.0}
    assert got.partitions == {0: 12.0, 1: 12.0, 2: 11.0}
    assert seen == [prom.info_query(SEL), prom.bytes_in_query(SEL, "30s"), prom.partitions_query(SEL)]
    assert got.queries == tuple(seen)


def test_only_the_configured_targets_are_queried() -> None:
    def handler(q: str) -> tuple[int, Any]:
        return 200, vector(({"broker": "0"}, 1))

    got, seen = serve(handler, lambda url: load(url, bytes_in=False, partitions=True))
    assert got.bytes_in is None and got.partitions == {0: 1.0} and len(seen) == 2


def test_no_scraped_broker_is_metric_not_found() -> None:
    with pytest.raises(prom.MetricNotFound) as e:
        serve(lambda q: (200, vector()), lambda url: load(url, bytes_in=True, partitions=False))
    assert e.value.reason == "MetricNotFound"
    assert "no series for brook_broker_info{" in e.value.message
    assert "does not scrape this cluster's brokers" in e.value.message


def test_missing_partition_count_is_metric_not_found() -> None:
    def handler(q: str) -> tuple[int, Any]:
        return 200, vector(({"broker": "0"}, 1)) if q.startswith("brook_broker_info") else vector()

    with pytest.raises(prom.MetricNotFound, match="brook_partitions"):
        serve(handler, lambda url: load(url, bytes_in=False, partitions=True))


def test_refused_query_is_query_failed() -> None:
    body = {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}
    with pytest.raises(prom.QueryFailed) as e:
        serve(lambda q: (400, body), lambda url: load(url, bytes_in=True, partitions=False))
    assert e.value.reason == "QueryFailed"
    assert "(HTTP 400): bad_data: parse error at char 5" in e.value.message


def test_something_else_than_prometheus_is_query_failed() -> None:
    with pytest.raises(prom.QueryFailed, match="without a Prometheus API response"):
        serve(lambda q: (200, "<html>Grafana</html>"), lambda url: load(url, bytes_in=True, partitions=False))
    matrix = {"status": "success", "data": {"resultType": "matrix", "result": []}}
    with pytest.raises(prom.QueryFailed, match="not an instant vector"):
        serve(lambda q: (200, matrix), lambda url: load(url, bytes_in=True, partitions=False))
    no_label = vector(({"instance": "x"}, 1))
    with pytest.raises(prom.QueryFailed, match="without a numeric broker label"):
        serve(lambda q: (200, no_label), lambda url: load(url, bytes_in=True, partitions=False))


def test_nobody_listening_is_prometheus_unreachable() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(prom.PrometheusUnreachable) as e:
        asyncio.run(load(url, bytes_in=True, partitions=False))
    assert e.value.reason == "PrometheusUnreachable"
    assert e.value.message.startswith(f"cannot reach Prometheus at {url}")


def test_a_silent_server_is_prometheus_unreachable() -> None:
    async def main() -> None:
        async def hang(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await asyncio.sleep(5)
            writer.close()

        server = await asyncio.start_server(hang, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        try:
            await prom.broker_load(
                prom.Prometheus(f"http://127.0.0.1:{port}", timeout=0.3), SEL, bytes_in=True, partitions=False
            )
        finally:
            server.close()

    with pytest.raises(prom.PrometheusUnreachable):
        asyncio.run(main())


def test_nan_samples_are_skipped() -> None:
    doc = vector(({"broker": "0"}, 1.0))
    doc["data"]["result"].append({"metric": {"broker": "1"}, "value": [1.0, "NaN"]})
    assert prom.parse_response("u", "q", 200, doc) == [prom.Sample({"broker": "0"}, 1.0)]
