"""Coverage-guided fuzzing (atheris, libFuzzer) of what a broker runs on every frame.

--decoders (default): parse_request's header, then the decoder for the API and version it names
(Produce's and Fetch's own, kafka-python's generated ones for the rest).
--request-path: the same frames through dispatch() to the handlers of a single-node broker running in
this process (its data in a temporary directory), as a connection would hand them over.

Anything but a refusal (CodecError, KafkaError, CloseConnection) is a crash: atheris stops and writes
the input to crash-<sha1>, which becomes a regression test. A handler still waiting after 50 ms (a long
poll, a join waiting for its group) is cancelled, as a closing connection would cancel it.

    python -m tests.support.fuzz_decoders [--request-path] -max_total_time=600 CORPUS_DIR

The corpus starts from the wire fuzzer's seeds: every request kafka-python encodes. scripts/fuzz runs
both modes.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import tempfile
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from brook.broker.broker import Broker
    from brook.protocol import (
        CodecError,
        KafkaError,
        decode_fetch_request,
        decode_produce_request,
        parse_request,
    )
    from brook.protocol.messages import decode_request
    from brook.protocol.versions import ApiKey
    from brook.server.dispatch import CloseConnection, dispatch
    from brook.settings.broker import BrokerSettings

REFUSALS = (CodecError, KafkaError, CloseConnection)


def decode_one(data: bytes) -> None:
    try:
        hdr = parse_request(bytearray(data))
        if hdr.api_key == ApiKey.PRODUCE:
            decode_produce_request(hdr.api_version, hdr.body)
        elif hdr.api_key == ApiKey.FETCH:
            decode_fetch_request(hdr.api_version, hdr.body)
        else:
            decode_request(hdr.api_key, hdr.api_version, hdr.body)
    except REFUSALS:
        pass


class RequestPath:
    """A single-node broker in this process; each input is one request handed to dispatch()."""

    def __init__(self, data_dir: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(BrokerSettings(data_dir=data_dir, metrics_port=-1))
        self.loop.run_until_complete(self.broker.start())

    def one(self, data: bytes) -> None:
        self.loop.run_until_complete(self._handle(data))

    async def _handle(self, data: bytes) -> None:
        try:
            hdr = parse_request(bytearray(data))
        except REFUSALS:
            return
        task = asyncio.ensure_future(dispatch(self.broker, hdr))
        done, _ = await asyncio.wait([task], timeout=0.05)
        if not done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, *REFUSALS):
                await task
            return
        with contextlib.suppress(*REFUSALS):
            task.result()


def main() -> None:
    argv = [a for a in sys.argv if a != "--request-path"]
    corpus = next((Path(a) for a in argv[1:] if not a.startswith("-")), None)
    if corpus is not None and not any(corpus.glob("*")):
        from tests.support.wire_fuzz import seeds

        corpus.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seeds()):
            (corpus / f"seed-{i:04d}").write_bytes(seed)
    with tempfile.TemporaryDirectory(prefix="brook-fuzz-broker-") as tmp:
        target = RequestPath(Path(tmp)).one if "--request-path" in sys.argv else decode_one
        atheris.Setup(argv, target)
        atheris.Fuzz()


if __name__ == "__main__":
    main()
