"""Start a local Brook for development and print where clients connect."""

from __future__ import annotations

import tempfile
from pathlib import Path

from brook.broker.settings import BrokerSettings
from brook.server.listener import KafkaServer
from brook.server.runner import run


def dev_up(data_dir: Path | None, port: int, event_loop: str = "asyncio") -> None:
    directory = data_dir or Path(tempfile.mkdtemp(prefix="brook-dev-"))
    settings = BrokerSettings(
        node_id=0, host="127.0.0.1", port=port, data_dir=directory, event_loop=event_loop
    )

    def ready(server: KafkaServer) -> None:
        print(f"data: {directory}", flush=True)
        print(f"bootstrap: 127.0.0.1:{server.port}", flush=True)

    run(settings, ready)
