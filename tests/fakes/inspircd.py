"""Debian's InspIRCd 3 on 127.0.0.1, as real networks run it: the shipped flood defaults
(fakelag after a penalty of 10, one command a second) and the IRCv3 modules loaded.

``port`` is the one the bot uses, with the shipped ``<connect>`` limits. ``people_port``
serves the test's humans without fakelag, so a test can send a burst as many people would.
Raw I/O logging is on, as on a network that records everything: the server then says so
to every client in a PRIVMSG of its own, and ``raw.log`` shows what each side sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path

import pytest

from tests.fakes.irc import free_port

INSPIRCD = Path("/usr/sbin/inspircd")
MODULES = Path("/usr/lib/inspircd/modules")
SERVER_NAME = "irc.local"

_IRCV3 = [
    "cap",
    "ircv3",
    "ircv3_accounttag",
    "ircv3_batch",
    "ircv3_capnotify",
    "ircv3_echomessage",
    "ircv3_labeledresponse",
    "ircv3_msgid",
    "ircv3_servertime",
    "ircv3_ctctags",
    "services_account",
    "sasl",
]

# The <connect> block as Debian ships it in /etc/inspircd/inspircd.conf, except: one
# address may hold more than 3 connections (a test runs several people from 127.0.0.1),
# and no hostname lookup (nothing resolves on loopback; the lookup only delays 001).
_CONFIG = """\
<server name="{name}" description="Salon test server" network="SalonTest">
<admin name="Salon tests" nick="salon" email="salon@localhost">
<bind address="127.0.0.1" port="{port}" type="clients">
<bind address="127.0.0.1" port="{people_port}" type="clients">
<connect name="people" port="{people_port}" allow="*" timeout="60" threshold="10000"
         commandrate="1000000" fakelag="no" pingfreq="120" hardsendq="262144"
         softsendq="8192" recvq="65536" localmax="50" globalmax="50" resolvehostnames="no">
<connect name="main" allow="*" timeout="60" threshold="10" pingfreq="120" hardsendq="262144"
         softsendq="8192" recvq="8192" localmax="50" globalmax="50" resolvehostnames="no">
<path configdir="{dir}" datadir="{dir}" logdir="{dir}" moduledir="{modules}">
<log method="file" type="*" level="rawio" target="{dir}/raw.log">
<limits maxnick="{nicklen}">
<sasl target="services.salon.test">
{modules_lines}
"""


def require_inspircd() -> None:
    """Skip without InspIRCd, or fail when ``SALON_REQUIRE_IRCD`` says it must be there."""
    if INSPIRCD.exists():
        return
    message = "InspIRCd is not installed (apt-get install inspircd)"
    if os.environ.get("SALON_REQUIRE_IRCD"):
        pytest.fail(message)
    pytest.skip(message)


class InspIRCd:
    """A real InspIRCd process in a temp dir, on free loopback ports."""

    start_timeout = 20.0

    def __init__(self, *, nicklen: int = 30) -> None:
        self.port = free_port()
        self.people_port = free_port()
        self.nicklen = nicklen
        self.dir = Path(tempfile.mkdtemp(prefix="salon-ircd."))
        self.proc: asyncio.subprocess.Process | None = None
        self._output: list[str] = []
        self._drainer: asyncio.Task[None] | None = None

    @property
    def raw_log(self) -> str:
        path = self.dir / "raw.log"
        return path.read_text("utf-8", "replace") if path.exists() else ""

    async def start(self) -> None:
        config = self.dir / "inspircd.conf"
        config.write_text(
            _CONFIG.format(
                name=SERVER_NAME,
                port=self.port,
                people_port=self.people_port,
                dir=self.dir,
                modules=MODULES,
                nicklen=self.nicklen,
                modules_lines="\n".join(f'<module name="{m}">' for m in _IRCV3),
            )
        )
        # InspIRCd refuses to run as root: then it runs as the package's own user.
        user = "irc" if os.geteuid() == 0 else None
        if user is not None:
            shutil.chown(self.dir, user, user)
            shutil.chown(config, user, user)
        self.proc = await asyncio.create_subprocess_exec(
            str(INSPIRCD),
            f"--config={config}",
            "--nofork",
            "--nopid",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            user=user,
            group=user,
            extra_groups=[] if user else None,
        )
        try:
            async with asyncio.timeout(self.start_timeout):
                await self._wait_running()
        except BaseException:
            await self.stop()
            raise

    async def _wait_running(self) -> None:
        assert self.proc is not None
        assert self.proc.stdout is not None
        while raw := await self.proc.stdout.readline():
            line = raw.decode("utf-8", "replace").rstrip()
            self._output.append(line)
            if "InspIRCd is now running" in line:
                # Drain the rest so a full pipe never blocks the server.
                self._drainer = asyncio.create_task(self._drain())
                return
        output = "\n".join(self._output)
        raise RuntimeError(f"InspIRCd did not start:\n{output}")

    async def _drain(self) -> None:
        proc = self.proc
        if proc is not None and proc.stdout is not None:
            with contextlib.suppress(Exception):
                while await proc.stdout.read(65536):
                    pass

    async def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is not None and proc.returncode is None:
            proc.terminate()
            try:
                async with asyncio.timeout(5):
                    await proc.wait()
            except TimeoutError:
                proc.kill()
                await proc.wait()
        if self._drainer is not None:
            await asyncio.gather(self._drainer, return_exceptions=True)
            self._drainer = None

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
