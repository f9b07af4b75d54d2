"""kopf settings: Brook's own finalizer and annotations, no kopf state in the (pruned) status."""

from __future__ import annotations

import logging
from typing import Any

import kopf

FINALIZER = "brook.dev/finalizer"


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    # The CRDs' status schemas are strict (pruned), so kopf keeps its bookkeeping in annotations.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="brook.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix="brook.dev", key="last-handled-configuration"
    )
    settings.posting.level = logging.WARNING  # Events for problems only, not for every handler run
    settings.peering.standalone = True  # one active replica is chosen by the Lease (see main)
    # A resync timer caught mid-run by a deletion is checked again after this long before the
    # finalizer goes (kopf's default, 60 s, held deleted Clusters for a minute).
    settings.background.cancellation_polling = 1.0
