"""PeerConnection (a follower's link to its leader) against a scripted server on 127.0.0.1: responses
in pieces of any size, large ones received into their own buffers, and every way the link can break
reported as ConnectionError."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Awaitable, Callable

import pytest

from brook.protocol.versions import ApiKey
from brook.replication.peer import PeerConnection

API, VERSION = ApiKey.METADATA, 1  # not flexible: the response header is the correlation id alone

Script = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_request(reader: asyncio.StreamReader) -> int:
    size = struct.unpack(">i", await reader.readexactly(4))[0]
    frame = await reader.readexactly(size)
    return int(struct.unpack(">i", frame[4:8])[0])  # correlation id


def _response(cid: int, body: bytes) -> bytes:
    return struct.pack(">ii", 4 + len(body), cid) + body


def _run(script: Script, client: Callable[[PeerConnection], Awaitable[None]], timeout_s: float = 5) -> None:
    async def main() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await script(reader, writer)
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        conn = PeerConnection("127.0.0.1", port, "test", timeout_s=timeout_s)
        try:
            async with asyncio.timeout(30):
                await client(conn)
        finally:
            conn.close()
            server.close()
            await server.wait_closed()

    asyncio.run(main())


def test_responses_small_and_large_sent_in_pieces_come_back_whole() -> None:
    bodies = [b"small", b"x" * (5 * 1024 * 1024 + 3), b"", b"tail"]

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for body in bodies:
            data = _response(await _read_request(reader), body)
            for i in range(0, len(data), 777_777):  # odd pieces: frame boundaries fall anywhere
                writer.write(data[i : i + 777_777])
                await writer.drain()
                await asyncio.sleep(0)

    async def client(conn: PeerConnection) -> None:
        for body in bodies:
            assert bytes(await conn.request(API, VERSION, b"")) == body
        assert conn.connected

    _run(script, client)


@pytest.mark.parametrize("cut", [0, 3, 10])  # before, inside the size, inside the body
def test_a_connection_closed_before_the_whole_response_is_a_connection_error(cut: int) -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(_response(await _read_request(reader), b"0123456789")[:cut])
        await writer.drain()

    async def client(conn: PeerConnection) -> None:
        with pytest.raises(ConnectionError, match="lost connection"):
            await conn.request(API, VERSION, b"")
        assert not conn.connected

    _run(script, client)


def test_a_wrong_correlation_id_closes_the_connection_and_the_next_request_reconnects() -> None:
    calls = 0

    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal calls
        calls += 1
        cid = await _read_request(reader)
        writer.write(_response(cid + 1 if calls == 1 else cid, b"ok"))
        await writer.drain()
        await reader.read()  # until the client closes

    async def client(conn: PeerConnection) -> None:
        with pytest.raises(ConnectionError, match="correlation id"):
            await conn.request(API, VERSION, b"")
        assert bytes(await conn.request(API, VERSION, b"")) == b"ok"
        assert calls == 2

    _run(script, client)


def test_a_negative_frame_size_is_a_connection_error() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(struct.pack(">i", -5) + b"junk")
        await writer.drain()
        await reader.read()

    async def client(conn: PeerConnection) -> None:
        with pytest.raises(ConnectionError, match="broken frame"):
            await conn.request(API, VERSION, b"")

    _run(script, client)


def test_no_answer_within_the_timeout_is_a_connection_error() -> None:
    async def script(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await reader.read()

    async def client(conn: PeerConnection) -> None:
        with pytest.raises(ConnectionError, match="TimeoutError"):
            await conn.request(API, VERSION, b"")

    _run(script, client, timeout_s=0.3)
