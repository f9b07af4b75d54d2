"""librdkafka's own test 0119, which shells out to Kafka's kafka-acls.sh, run by the team's conformance
kit against one Brook broker with KAFKA_PATH over the real Kafka 4.4 jars. The rest of those tests
(0052, 0077, 0098, 0109, 0115: ~7 min) run in `scripts/conformance`. 0115 is not here: its synchronous
produce() after the deny ACL fails when the producer's metadata refresh lands in the test's 1 s sleep
(a timing of the test's own, seen once on a machine at load 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import conformance, kafka_dist

pytestmark = pytest.mark.slow


def test_0119_with_kafka_acls_sh(tmp_path: Path) -> None:
    kit = conformance.kit_dir()
    conformance._runner(kit)  # builds the kit's test runner once (~2.5 min on a new machine)
    tools = kafka_dist.install(tmp_path / "kafka")
    with conformance.brook(tmp_path / "brook", 1, True, acl_denying=True) as bootstrap:
        results = conformance.run_batch(kit, bootstrap, ["0119"], "default", 120, tools)
    assert results == {"0119": "PASS"}, results
