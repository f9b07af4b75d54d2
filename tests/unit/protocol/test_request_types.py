"""services/brook/protocol/requests.py (the handlers' typed requests) is what scripts/gen-request-types
writes from the message classes in use: a kafka-python upgrade or a new shipped spec regenerates it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_the_typed_requests_are_generated_from_the_message_classes() -> None:
    r = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen-request-types"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr


def test_every_decoded_request_field_is_typed() -> None:
    """Each request class's fields are in its Protocol (so mypy knows every name a handler reads)."""
    from brook.protocol import requests
    from brook.protocol.messages import _REQUESTS

    for cls in _REQUESTS.values():
        proto = getattr(requests, cls.__name__)
        assert set(proto.__annotations__) == set(cls._struct.fields), cls.__name__
