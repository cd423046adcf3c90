"""Debian's InspIRCd 3 on 127.0.0.1, as real networks run it: the shipped flood defaults
(fakelag after a penalty of 10, one command a second) and the IRCv3 modules loaded.

``port`` is the one the bot uses, with the shipped ``<connect>`` limits. ``people_port``
serves the test's humans without fakelag, so a test can send a burst as many people would.
Raw I/O logging is on, as on a network that records everything: the server then says so
to every client in a PRIVMSG of its own, and ``raw.log`` shows what each side sent.
With ``services``, Debian's Atheme is linked to it (NickServ, SaslServ): InspIRCd offers
SASL only then.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from fakes.irc import free_port

INSPIRCD = Path("/usr/sbin/inspircd")
ATHEME = Path("/usr/bin/atheme-services")
MODULES = Path("/usr/lib/inspircd/modules")
SERVER_NAME = "irc.local"
SERVICES_NAME = "services.salon.test"

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
<sasl target="{services}">
{modules_lines}
"""

# Services linked to the server, for SASL: InspIRCd offers it only with them.
_SERVICES_LINK = """\
<module name="spanningtree">
<bind address="127.0.0.1" port="{link_port}" type="servers">
<link name="{services}" ipaddr="127.0.0.1" port="{link_port}" allowmask="127.0.0.0/8"
      sendpass="{password}" recvpass="{password}">
<uline server="{services}" silent="yes">
"""

# TLS for clients, asking for their certificate (SASL EXTERNAL), which sslinfo tells
# services about.
_TLS = """\
<module name="ssl_gnutls">
<module name="sslinfo">
<sslprofile name="Clients" provider="gnutls" certfile="{dir}/server.pem"
            keyfile="{dir}/server.key" hash="sha256" requestclientcert="yes">
<bind address="127.0.0.1" port="{tls_port}" type="clients" sslprofile="Clients">
"""


def self_signed(name: str, cert: Path, key: Path) -> str:
    """Write a self-signed certificate and its key as PEM; return its SHA-256 fingerprint
    in hex, as InspIRCd reports it to services."""
    private = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=2))
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return certificate.fingerprint(hashes.SHA256()).hex()


# Atheme as Debian ships it, with the few services SASL needs; accounts are registered
# at once (no e-mail confirmation).
_ATHEME = """\
loadmodule "modules/protocol/inspircd";
loadmodule "modules/backend/opensex";
loadmodule "modules/crypto/pbkdf2v2";
loadmodule "modules/nickserv/main";
loadmodule "modules/nickserv/register";
loadmodule "modules/nickserv/identify";
loadmodule "modules/nickserv/cert";
loadmodule "modules/saslserv/main";
loadmodule "modules/saslserv/plain";
loadmodule "modules/saslserv/external";
pbkdf2v2 {{ }};
serverinfo {{
    name = "{services}"; desc = "Salon test services"; numeric = "00A"; recontime = 1;
    netname = "SalonTest"; hidehostsuffix = "users.salon.test"; adminname = "Salon tests";
    adminemail = "salon@localhost"; registeremail = "salon@localhost"; mta = "/bin/true";
    loglevel = {{ error; info; network; }}; maxlogins = 5; maxusers = 5; mdlimit = 30;
    emaillimit = 10; emailtime = 300; auth = none; casemapping = rfc1459;
}};
uplink "{name}" {{ host = "127.0.0.1"; password = "{password}"; port = {link_port}; }};
nickserv {{ nick = "NickServ"; user = "NickServ"; host = "{services}"; real = "Nicks";
    maxnicks = 5; expire = 30; }};
saslserv {{ nick = "SaslServ"; user = "SaslServ"; host = "{services}"; real = "SASL"; }};
general {{ commit_interval = 5; language = "en"; ratelimit_uses = 100; ratelimit_period = 1; }};
"""


def require_inspircd(*, services: bool = False) -> None:
    """Skip without InspIRCd (and Atheme for ``services``), or fail when
    ``SALON_REQUIRE_IRCD`` says they must be there."""
    if INSPIRCD.exists() and (ATHEME.exists() or not services):
        return
    message = "InspIRCd is not installed (apt-get install inspircd atheme-services)"
    if os.environ.get("SALON_REQUIRE_IRCD"):
        pytest.fail(message)
    pytest.skip(message)


class _PortTaken(RuntimeError):
    """InspIRCd runs, but one of its listeners could not bind."""


class InspIRCd:
    """A real InspIRCd process in a temp dir, on free loopback ports."""

    start_timeout = 20.0

    def __init__(self, *, nicklen: int = 30, services: bool = False) -> None:
        self._services = services
        self._choose_ports()
        self.nicklen = nicklen
        self.dir = Path(tempfile.mkdtemp(prefix="salon-ircd."))
        self.proc: asyncio.subprocess.Process | None = None
        self.services: asyncio.subprocess.Process | None = None
        self._user = "irc" if os.geteuid() == 0 else None  # both refuse to run as root
        self._output: list[str] = []
        self._drainers: list[asyncio.Task[None]] = []

    @property
    def raw_log(self) -> str:
        path = self.dir / "raw.log"
        return path.read_text("utf-8", "replace") if path.exists() else ""

    def _write(self, name: str, text: str) -> Path:
        path = self.dir / name
        path.write_text(text)
        if self._user is not None:
            shutil.chown(path, self._user, self._user)
        return path

    def _choose_ports(self) -> None:
        self.port = free_port()
        self.people_port = free_port()
        self.link_port = free_port() if self._services else None
        self.tls_port = free_port()  # TLS, with client certificates

    async def start(self) -> None:
        """Start it (and Atheme); a port taken between its choice and InspIRCd's bind (by
        any connection's ephemeral port) gets new ports and another try, as a person
        would pick another port."""
        for attempt in range(3):
            try:
                await self._start()
                return
            except _PortTaken:
                if attempt == 2:
                    raise
                self._output.clear()
                self._choose_ports()

    async def _start(self) -> None:
        password = "link-" + os.urandom(8).hex()
        names = {"name": SERVER_NAME, "services": SERVICES_NAME}
        text = _CONFIG.format(
            **names,
            port=self.port,
            people_port=self.people_port,
            dir=self.dir,
            modules=MODULES,
            nicklen=self.nicklen,
            modules_lines="\n".join(f'<module name="{m}">' for m in _IRCV3),
        )
        text += _TLS.format(dir=self.dir, tls_port=self.tls_port)
        if self.link_port is not None:
            text += _SERVICES_LINK.format(**names, link_port=self.link_port, password=password)
        if self._user is not None:
            shutil.chown(self.dir, self._user, self._user)
        config = self._write("inspircd.conf", text)
        self_signed(SERVER_NAME, self.dir / "server.pem", self.dir / "server.key")
        if self._user is not None:
            for name in ("server.pem", "server.key"):
                shutil.chown(self.dir / name, self._user, self._user)
        try:
            async with asyncio.timeout(self.start_timeout):
                self.proc = await self._run(
                    "InspIRCd is now running", INSPIRCD, f"--config={config}", "--nofork", "--nopid"
                )
                if any("Address already in use" in line for line in self._output):
                    raise _PortTaken("\n".join(self._output))
                if self.link_port is not None:
                    atheme = _ATHEME.format(**names, link_port=self.link_port, password=password)
                    services = self._write("atheme.conf", atheme)
                    self.services = await self._run(
                        "finished synching with uplink",
                        ATHEME,
                        "-n",
                        "-c",
                        str(services),
                        "-D",
                        str(self.dir),
                        "-l",
                        str(self.dir / "atheme.log"),
                        "-p",
                        str(self.dir / "atheme.pid"),
                    )
        except BaseException:
            await self.stop()
            raise

    async def _run(self, ready: str, program: Path, *args: str) -> asyncio.subprocess.Process:
        """Start ``program`` and wait for the line that says it is ready."""
        proc = await asyncio.create_subprocess_exec(
            str(program),
            *args,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            user=self._user,
            group=self._user,
            extra_groups=[] if self._user else None,
        )
        assert proc.stdout is not None
        while raw := await proc.stdout.readline():
            line = raw.decode("utf-8", "replace").rstrip()
            self._output.append(line)
            if ready in line:
                # Drain the rest so a full pipe never blocks it.
                self._drainers.append(asyncio.create_task(self._drain(proc)))
                return proc
        proc.kill()
        await proc.wait()
        output = "\n".join(self._output)
        raise RuntimeError(f"{program.name} did not start:\n{output}")

    async def _drain(self, proc: asyncio.subprocess.Process) -> None:
        if proc.stdout is not None:
            with contextlib.suppress(Exception):
                while await proc.stdout.read(65536):
                    pass

    async def stop(self) -> None:
        for proc in (self.services, self.proc):
            if proc is not None and proc.returncode is None:
                proc.terminate()
                try:
                    async with asyncio.timeout(5):
                        await proc.wait()
                except TimeoutError:
                    proc.kill()
                    await proc.wait()
        self.services = self.proc = None
        await asyncio.gather(*self._drainers, return_exceptions=True)
        self._drainers.clear()

    def cleanup(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
