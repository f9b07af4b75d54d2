"""The example pipeline of spark-on-k8s/ end to end on generated page views, then the batch report."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.spark.helpers import create_topic, kafka_connector_jars, latest_counts, load_job, require_spark
from tests.support.broker import BrokerProcess

require_spark()
pytestmark = pytest.mark.slow


def test_page_view_counts_end_to_end_and_report(spark: Any, brook: BrokerProcess, tmp_path: Path) -> None:
    gen, pipeline, report = (
        load_job(n) for n in ("generate_page_views", "page_view_counts", "page_view_report")
    )
    create_topic(brook.bootstrap, "page-views", 3)
    create_topic(brook.bootstrap, "page-view-counts", 3, {"cleanup.policy": "compact"})
    ck = str(tmp_path / "ck")

    def run() -> None:
        q = pipeline.build_query(
            spark, brook.bootstrap, checkpoint=ck, trigger="available-now", max_offsets_per_trigger=4000
        ).start()
        q.awaitTermination(180)
        assert q.exception() is None, q.exception()

    expected = gen.generate(brook.bootstrap, "page-views", count=6000, seed=7)
    run()
    assert latest_counts(brook.bootstrap) == dict(expected)

    # More views in the same windows; a restart from the checkpoint updates the counts.
    start = min(ms for _, ms in expected)
    more = gen.generate(brook.bootstrap, "page-views", count=3000, seed=8, start_ms=start)
    run()
    total: Counter[tuple[str, int]] = expected + more
    assert latest_counts(brook.bootstrap) == dict(total)

    rows = report.report(spark, brook.bootstrap)
    per_page: Counter[str] = Counter()
    for (page, _), n in total.items():
        per_page[page] += n
    assert {r["page"]: r["views"] for r in rows} == dict(per_page)
    assert [r["views"] for r in rows] == sorted((r["views"] for r in rows), reverse=True)
    assert sum(r["views"] for r in rows) == 9000
    # The same report through Spark's own connector (manifests/page-view-report-kafka.yaml).
    if kafka_connector_jars() is not None:
        assert report.report(spark, brook.bootstrap, fmt="kafka") == rows
