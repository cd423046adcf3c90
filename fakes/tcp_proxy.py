"""A TCP relay on loopback in front of a real server, which the test can take down and bring
back: down, it closes every relayed connection and stops listening, so a client sees what a
stopped server gives (its open connections reset, new ones refused: ``[Errno 111] Connect
call failed``); up again, it listens on the same port and relays to the server as before."""

from __future__ import annotations

import asyncio
import contextlib


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._server: asyncio.Server | None = None
        self._ends: set[asyncio.StreamWriter] = set()  # both ends of every relayed connection
        self._relays: set[asyncio.Task[None]] = set()
        self.port = 0

    async def __aenter__(self) -> TcpProxy:
        await self.up()
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.down()

    async def up(self) -> None:
        """Listen (on the port of the first start), relaying each connection to the server."""
        if self._server is not None:
            return
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def down(self) -> None:
        """Refuse new connections and reset the relayed ones, as a server that stopped."""
        server, self._server = self._server, None
        if server is not None:
            server.close()
            await server.wait_closed()
        for end in list(self._ends):
            end.transport.abort()  # a reset, as a killed server's socket gives
        async with asyncio.timeout(10):
            await asyncio.gather(*self._relays, return_exceptions=True)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        relay = asyncio.current_task()
        assert relay is not None
        self._relays.add(relay)
        ends = [writer]
        self._ends.add(writer)
        try:
            try:
                far_reader, far_writer = await asyncio.open_connection(*self._target)
            except OSError:
                return
            ends.append(far_writer)
            self._ends.add(far_writer)
            await asyncio.gather(_pipe(reader, far_writer), _pipe(far_reader, writer))
        finally:
            self._relays.discard(relay)
            for end in ends:
                self._ends.discard(end)
                end.transport.abort()


async def _pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
    """Copy until the source ends or either side is reset."""
    with contextlib.suppress(OSError):
        while data := await source.read(65536):
            sink.write(data)
            await sink.drain()
        sink.write_eof()
