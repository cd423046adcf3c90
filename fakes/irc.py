"""miniircd on 127.0.0.1, and a raw IRC client that plays the human."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
import struct
import sys
from pathlib import Path
from typing import Literal

MINIIRCD = Path(sys.executable).parent / "miniircd"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class IrcServer:
    """A real miniircd process; ``restart`` stops it and starts it on the same port."""

    def __init__(self) -> None:
        self.port = free_port()
        self.proc: asyncio.subprocess.Process | None = None

    async def start(self) -> None:
        args = [sys.executable, "-u", str(MINIIRCD), "--listen", "127.0.0.1"]
        args += ["--ports", str(self.port), "--verbose"]
        if os.geteuid() == 0:
            args += ["--setuid", "nobody"]
        self.proc = await asyncio.create_subprocess_exec(*args, stdout=asyncio.subprocess.PIPE)
        assert self.proc.stdout is not None
        async with asyncio.timeout(10):
            while b"Listening on port" not in await self.proc.stdout.readline():
                pass

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
        self.proc = None

    async def restart(self) -> None:
        await self.stop()
        await self.start()


class Human:
    """A person on IRC: a plain socket speaking the protocol, lines kept for assertions."""

    def __init__(
        self, nick: str, port: int, *, user: str | None = None, caps: tuple[str, ...] = ()
    ) -> None:
        self.nick = nick
        self.caps = caps  # IRCv3 capabilities to ask for (lines then may start with @tags)
        self.user = user or nick  # the USER name: with the host, who this connection is
        self.port = port
        self.lines: list[str] = []
        self._new = asyncio.Condition()
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection("127.0.0.1", self.port)
        self._task = asyncio.create_task(self._read())
        if self.caps:
            await self.send(f"CAP REQ :{' '.join(self.caps)}")
        await self.send(f"NICK {self.nick}")
        await self.send(f"USER {self.user} 0 * :{self.nick}")
        if self.caps:
            await self.expect(r" CAP \S+ ACK ")
            await self.send("CAP END")
        await self.expect(r" 001 ")

    async def _read(self) -> None:
        assert self._reader is not None
        while raw := await self._reader.readline():
            line = raw.decode("utf-8", "replace").rstrip("\r\n")
            if line.startswith("PING"):
                await self.send("PONG" + line[4:])
            async with self._new:
                self.lines.append(line)
                self._new.notify_all()

    async def send(self, line: str) -> None:
        await self.send_bytes(line.encode())

    async def send_bytes(self, line: bytes) -> None:
        """One raw line, whatever its bytes (IRC carries bytes, not text)."""
        assert self._writer is not None
        self._writer.write(line + b"\r\n")
        await self._writer.drain()

    async def say(self, target: str, text: str) -> None:
        await self.send(f"PRIVMSG {target} :{text}")

    async def join(self, channel: str) -> None:
        await self.send(f"JOIN {channel}")
        await self.expect(rf" 366 {re.escape(self.nick)} {re.escape(channel)} ")

    async def expect(self, pattern: str, *, after: int = 0, within: float = 15.0) -> str:
        """Wait for a line matching ``pattern`` (searching from line index ``after``)."""
        regex = re.compile(pattern)

        def found() -> str | None:
            return next((ln for ln in self.lines[after:] if regex.search(ln)), None)

        async with asyncio.timeout(within), self._new:
            await self._new.wait_for(lambda: found() is not None)
        line = found()
        assert line is not None
        return line

    async def privmsgs_from(self, nick: str, count: int, *, after: int = 0) -> list[str]:
        pattern = re.compile(rf"^:{re.escape(nick)}!\S+ PRIVMSG \S+ :(.*)$")

        def texts() -> list[str]:
            return [m[1] for ln in self.lines[after:] if (m := pattern.match(ln))]

        async with asyncio.timeout(15), self._new:
            await self._new.wait_for(lambda: len(texts()) >= count)
        return texts()

    async def close(self) -> None:
        writer, self._writer = self._writer, None
        if writer is not None:
            with contextlib.suppress(Exception):
                writer.write(b"QUIT :bye\r\n")
                await writer.drain()
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class StubServer:
    """A scripted server on 127.0.0.1 for what miniircd cannot show. ``silent``: accepts and
    reads, never answers (a stuck ircd). ``resetting``: welcomes the client and, when it asks
    to join, drops the connection with a TCP reset (a crash, a broken network path).
    ``accounts``: offers IRCv3 ``account-tag``, welcomes after CAP END, confirms joins; the
    test then sends lines as the server would relay them (``relay``)."""

    def __init__(self, mode: Literal["silent", "resetting", "accounts"] = "silent") -> None:
        self.port = free_port()
        self.mode = mode
        self.accepted = 0
        self.joined = asyncio.Event()
        self._changed = asyncio.Condition()
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.append(writer)
        async with self._changed:
            self.accepted += 1
            self._changed.notify_all()
        while line := await reader.readline():
            if self.mode != "silent" and not self._answer(line.rstrip(b"\r\n"), writer):
                return

    def _answer(self, line: bytes, writer: asyncio.StreamWriter) -> bool:
        """Answer one client line; False once the connection is gone."""
        welcome = b":stub 001 salonbot :Welcome\r\n:stub 422 salonbot :No MOTD\r\n"
        if line.startswith(b"CAP LS") and self.mode == "accounts":
            writer.write(b":stub CAP * LS :account-tag\r\n")
        elif line.startswith(b"CAP REQ") and self.mode == "accounts":
            writer.write(b":stub CAP * ACK :account-tag\r\n")
        elif line == b"CAP END" or (line.startswith(b"USER ") and self.mode != "accounts"):
            writer.write(welcome)  # with CAP, registration waits for its end
        elif line.startswith(b"JOIN ") and self.mode == "resetting":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()  # linger 0: the close is a reset, not a FIN
            return False
        elif line.startswith(b"JOIN "):
            channel = line.split()[1]
            writer.write(b":salonbot!salon@stub JOIN %s\r\n" % channel)
            writer.write(b":stub 366 salonbot %s :End of NAMES list\r\n" % channel)
            self.joined.set()
        return True

    async def relay(self, line: str) -> None:
        """Send a line to every client, as the server relays what someone wrote."""
        for writer in self._writers:
            writer.write(line.encode() + b"\r\n")
            await writer.drain()

    async def wait_accepted(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.accepted >= count)

    async def stop(self) -> None:
        for writer in self._writers:
            writer.close()
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
