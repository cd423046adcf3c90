"""What every handler of the web server shares: the store, the config directory, the
settings, the keys from the environment, and the responses it sends."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.responses import Response

from salon.config import ConfigSet, Redactor, WebConfig, load_config_dir
from salon.config.integrations import integration_secrets
from salon.config.interpolation import looks_secret
from salon.config.secrets import required_secrets
from salon.errors import ConfigError
from salon.model import clean_text
from salon.store.sql import SQLStore
from salon.web.links import CONFIG_LINK_SECONDS
from salon.web.sessions import Sessions

__all__ = ["Fleet", "Lockout", "Web", "secret_values"]

logger = logging.getLogger(__name__)

MAX_FAILED_LOGINS = 10  # per minute and client
MAX_FAILED_LOGINS_OVERALL = 200  # per minute, all clients together
LOGIN_WINDOW = 60.0
MAX_USED_LINKS = 1000  # configurator links taken and not yet expired (a few a day, really)

# The browser may load nothing but this server's own files, and no page may be framed.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # Same-origin forms then carry an Origin the server can check; nothing leaks elsewhere.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}


def config_files(root: Path) -> list[Path]:
    """The YAML files of a config directory, in the order the loader layers them."""
    return [
        *([root / "shared.yaml"] if (root / "shared.yaml").is_file() else []),
        *sorted((root / "guilds").glob("*.yaml")),
        *sorted((root / "bots").glob("*.yaml")),
    ]


class Fleet:
    """The bots of the config directory: the last version that loaded, reloaded when a
    file changes (a broken edit keeps the last good one, as the bots themselves do)."""

    def __init__(self, configs: ConfigSet) -> None:
        self.root = configs.root
        self.configs = configs
        self._seen = self._signature()

    def _signature(self) -> tuple[tuple[str, int, int], ...]:
        found = []
        for path in config_files(self.root):
            try:
                stat = path.stat()
            except OSError:
                continue
            found.append((str(path), stat.st_mtime_ns, stat.st_size))
        return tuple(found)

    async def current(self) -> ConfigSet:
        seen = self._signature()
        if seen != self._seen:
            self._seen = seen
            try:
                self.configs = await asyncio.to_thread(load_config_dir, self.root)
            except ConfigError as exc:
                logger.warning("config directory does not load; keeping the last good: %s", exc)
        return self.configs


def secret_values(configs: ConfigSet, environ: Mapping[str, str]) -> list[str]:
    """Every secret any bot of the directory may use that is set here: for redaction."""
    names: set[str] = set()
    for key in configs.bots:  # ${NAME} in a value: a secret when named like one
        names.update(n for n in configs.variables(key) if looks_secret(n))
    for bot in configs.bots.values():
        names.update(env for _, env in required_secrets(bot))
        names.update(env for _, env in integration_secrets(bot))
        names.update((bot.web.activity_key_env, bot.web.trigger_token_env))
        for provider in bot.providers.values():
            names.update(
                getattr(provider, key) or ""
                for key in ("api_key_env", "aws_secret_key_env", "aws_session_token_env")
            )
    return [environ[n] for n in sorted(names) if n and environ.get(n)]


def _client_key(address: str) -> str:
    """One client: its IPv4 address, or its IPv6 /64 (one host may hold a whole /64)."""
    try:
        parsed = ipaddress.ip_address(address)
    except ValueError:
        return address[:100]
    if isinstance(parsed, ipaddress.IPv6Address):
        if parsed.ipv4_mapped is not None:
            return str(parsed.ipv4_mapped)
        return str(ipaddress.ip_network(f"{parsed}/64", strict=False))
    return str(parsed)


class Lockout:
    """Sign-ins with a wrong key over the last minute: past ``MAX_FAILED_LOGINS`` a client
    waits; past ``MAX_FAILED_LOGINS_OVERALL`` from everyone (a guesser with many addresses),
    everyone does. Bounded: a client is remembered only while its failures are recent, and
    failures stop being counted once the ceiling pauses sign-in."""

    def __init__(self, now: Callable[[], float]) -> None:
        self.now = now
        self.overall: deque[float] = deque(maxlen=MAX_FAILED_LOGINS_OVERALL)
        self.clients: dict[str, deque[float]] = {}

    def _recent(self, times: deque[float] | None) -> int:
        since = self.now() - LOGIN_WINDOW
        return sum(1 for t in times or () if t > since)

    def paused(self, client: str) -> bool:
        if self._recent(self.overall) >= MAX_FAILED_LOGINS_OVERALL:
            return True
        return self._recent(self.clients.get(_client_key(client))) >= MAX_FAILED_LOGINS

    def failed(self, client: str) -> None:
        now = self.now()
        self.overall.append(now)
        for old in [k for k, t in self.clients.items() if t[-1] <= now - LOGIN_WINDOW]:
            del self.clients[old]
        key = _client_key(client)
        self.clients.setdefault(key, deque(maxlen=MAX_FAILED_LOGINS)).append(now)


@dataclass
class Web:
    store: SQLStore
    fleet: Fleet
    settings: WebConfig
    environ: Mapping[str, str]
    now: Callable[[], float] = time.time
    redact: Redactor = field(default_factory=Redactor)
    # Sign-ins with a wrong key lately, per client: past a few a minute, sign-in pauses.
    logins: Lockout = field(init=False)
    # The sessions signed in, as the store keeps them (read at most every few seconds).
    sessions: Sessions = field(init=False)
    # The nonces of configurator links taken, with their expiry: each signs in once.
    used_links: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0

    def __post_init__(self) -> None:
        self.logins = Lockout(self._clock)
        self.sessions = Sessions(self.store.sessions, self._clock)
        self.redact = self.redact.merged(secret_values(self.fleet.configs, self.environ))
        self.started_at = self.started_at or self.now()

    def _clock(self) -> float:
        """``now`` as it is when asked (a test may replace it after this is made)."""
        return self.now()

    def take_link(self, nonce: str, expires: int) -> str | None:
        """Mark a configurator link used; why it cannot sign in, or None when it can."""
        now = self.now()
        # A link made before this server started may have been taken by the one before it.
        if expires - CONFIG_LINK_SECONDS < self.started_at - 1:
            return "This link was made before the web server started: make a new one"
        for old in [n for n, until in self.used_links.items() if until <= now]:
            del self.used_links[old]
        if nonce in self.used_links:
            return "This link was already used: make a new one"
        if len(self.used_links) >= MAX_USED_LINKS:
            return "Too many links were used lately: try again in a few minutes"
        self.used_links[nonce] = expires
        return None

    @property
    def root(self) -> Path:
        return self.fleet.root

    def activity_key(self) -> str | None:
        return self.environ.get(self.settings.activity_key_env) or None

    def trigger_token(self) -> str | None:
        return self.environ.get(self.settings.trigger_token_env) or None

    def html(
        self, text: str, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        """A page, with every known secret value taken out."""
        return Response(
            self.redact(text),
            status_code=status,
            media_type="text/html; charset=utf-8",
            headers={**HEADERS, **(headers or {})},
        )

    def json(
        self, data: Any, status: int = 200, headers: Mapping[str, str] | None = None
    ) -> Response:
        # clean_text: a lone surrogate echoed from a request would not encode.
        body = self.redact(clean_text(json.dumps(data, ensure_ascii=False, default=str)))
        return Response(
            body,
            status_code=status,
            media_type="application/json",
            headers={**HEADERS, **(headers or {})},
        )

    def text(self, text: str, status: int = 200, media_type: str = "text/plain") -> Response:
        return Response(
            self.redact(text), status_code=status, media_type=media_type, headers=HEADERS
        )
