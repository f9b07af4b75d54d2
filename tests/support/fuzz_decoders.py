"""Coverage-guided fuzzing (atheris, libFuzzer) of the request decoders a broker runs on every frame:
parse_request's header, then the decoder for the API and version it names (Produce's and Fetch's own,
kafka-python's generated ones for the rest). Anything but CodecError or KafkaError is a crash: atheris
stops and writes the input to crash-<sha1>, which becomes a regression test.

    python -m tests.support.fuzz_decoders -max_total_time=600 CORPUS_DIR   (scripts/fuzz runs it)

The corpus starts from the wire fuzzer's seeds: every request kafka-python encodes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from brook.protocol import (
        CodecError,
        KafkaError,
        decode_fetch_request,
        decode_produce_request,
        decode_request,
        parse_request,
    )
    from brook.protocol.versions import ApiKey


def one_input(data: bytes) -> None:
    try:
        hdr = parse_request(bytearray(data))
        if hdr.api_key == ApiKey.PRODUCE:
            decode_produce_request(hdr.api_version, hdr.body)
        elif hdr.api_key == ApiKey.FETCH:
            decode_fetch_request(hdr.api_version, hdr.body)
        else:
            decode_request(hdr.api_key, hdr.api_version, hdr.body)
    except (CodecError, KafkaError):
        pass


def main() -> None:
    corpus = next((Path(a) for a in sys.argv[1:] if not a.startswith("-")), None)
    if corpus is not None and not any(corpus.glob("*")):
        from tests.support.wire_fuzz import seeds

        corpus.mkdir(parents=True, exist_ok=True)
        for i, seed in enumerate(seeds()):
            (corpus / f"seed-{i:04d}").write_bytes(seed)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
