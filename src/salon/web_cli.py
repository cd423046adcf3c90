"""Serving the web server from the command line: beside ``salon run``'s supervisor, or
alone (``salon web``). Kept out of ``salon.cli`` so that a bot process, which never
serves it, does not import the web server's packages."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
from collections.abc import AsyncIterator, Mapping

from salon.app import load_bot, store_for
from salon.config import ConfigSet, Redactor, WebConfig, load_config_dir
from salon.errors import CannotServe, SalonError
from salon.sockets import bind
from salon.supervisor import Supervisor
from salon.tools.oauth_desk import OAuthDesk
from salon.web.app import build_app, web_settings
from salon.web.context import secret_values
from salon.web.controls import Action
from salon.web.links import CONFIG_LINK_SECONDS, config_token
from salon.web.server import serving

__all__ = ["FleetControl", "WebSite", "config_link", "site_for"]

logger = logging.getLogger("salon")


def site_for(configs: ConfigSet, redactor: Redactor, *, alone: bool = False) -> WebSite | None:
    """The fleet's web server as the config sets it: the first bot (by name) with a ``web:``
    section, else None (``alone``: ``salon web`` serves the first bot's defaults)."""
    chosen = web_settings(configs)
    if chosen is None and not alone:
        return None
    key, settings = chosen or (sorted(configs.bots)[0], configs.bots[sorted(configs.bots)[0]].web)
    return WebSite(configs, key, settings, redactor)


def _fleet_settings(configs: ConfigSet) -> WebConfig:
    chosen = web_settings(configs)
    return chosen[1] if chosen else configs.bots[sorted(configs.bots)[0]].web


def _loopback_host(bound: str) -> str:
    """The loopback address to open for a server bound to ``bound``."""
    try:
        address = ipaddress.ip_address(bound)
    except ValueError:
        return "127.0.0.1"
    if address.is_loopback or address.is_unspecified:
        loopback = "::1" if address.version == 6 else "127.0.0.1"
        return f"[{loopback}]" if address.version == 6 else loopback
    return "127.0.0.1"


def config_link(configs: ConfigSet, environ: Mapping[str, str], port: int | None = None) -> str:
    """A link to the configurator that signs in once, within ``CONFIG_LINK_SECONDS``
    (``salon config-link``); ValueError saying what to set when the key is not set."""
    settings = _fleet_settings(configs)
    key = environ.get(settings.activity_key_env)
    if not key:
        raise ValueError(
            f"{settings.activity_key_env} is not set: the configurator's links are signed "
            "with the activity key (set it here and where the web server runs)"
        )
    port = settings.port if port is None else port
    return f"http://{_loopback_host(settings.host)}:{port}/config?token={config_token(key)}"


LINK_NOTE = (
    f"valid {CONFIG_LINK_SECONDS // 60} minutes, once, from this machine "
    "(the configurator answers loopback clients only)"
)


PROBE_SECONDS = 60.0


class FleetControl:
    """The configurator's controls (``salon.web.controls.FleetControl``) in the process that
    serves it: the provider test, as ``salon check --live`` does it, with the config as it
    is on disk now; start/stop/restart through ``salon run``'s supervisor, which runs the
    bots in this same process (none under ``salon web``: its buttons say so)."""

    def __init__(
        self,
        configs: ConfigSet,
        supervisor: Supervisor | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self.root = configs.root
        self.supervisor = supervisor
        self.environ = os.environ if environ is None else environ

    def runs_bots(self) -> bool:
        return self.supervisor is not None

    def state(self, bot: str) -> str:
        if self.supervisor is None:
            return "run by another process (see /health)"
        return self.supervisor.state(bot)

    async def act(self, bot: str, action: Action) -> str:
        if self.supervisor is None:
            return "this web server does not run the bots"
        if bot not in self.supervisor.names():
            return f"bot {bot} is not run by this salon run"
        if action == "stop":
            return await self.supervisor.stop_bot(bot)
        if action == "start":
            return await self.supervisor.start_bot(bot)
        return await self.supervisor.restart_bot(bot)

    async def probe(self, bot: str) -> str:
        from salon.llm.probe import probe  # the SDKs only when a test is asked for

        try:
            configs = await asyncio.to_thread(load_config_dir, self.root)
            _, config, secrets = load_bot(configs, bot, self.environ)
            async with asyncio.timeout(PROBE_SECONDS):
                result = await probe(config, config.provider, secrets)
        except SalonError as exc:
            return f"live: bot {bot}: FAILED: {str(exc).splitlines()[0]}"
        except TimeoutError:
            return f"live: bot {bot}: FAILED: no answer in {PROBE_SECONDS:.0f} s"
        if result is None:
            return f"live: provider {config.provider}: skipped (no model)"
        return result.describe()


class WebSite:
    """The fleet's web server: the store of the bot whose ``web:`` section configures it."""

    def __init__(self, configs: ConfigSet, key: str, settings: WebConfig, redactor: Redactor):
        self.configs = configs
        self.key = key
        self.settings = settings
        self.redactor = redactor.merged(secret_values(configs, os.environ))

    @contextlib.asynccontextmanager
    async def serving(
        self,
        host: str | None = None,
        port: int | None = None,
        *,
        supervisor: Supervisor | None = None,
    ) -> AsyncIterator[None]:
        """``supervisor``: ``salon run``'s, for the configurator's start/stop/restart."""
        host = host or self.settings.host
        port = self.settings.port if port is None else port
        try:
            sock = bind(host, port)
        except OSError as exc:
            reason = exc.strerror or str(exc)
            raise CannotServe(f"the web server cannot listen on {host}:{port}: {reason}") from exc
        config = self.configs.bots[self.key]
        store = store_for(self.configs.root, config, redact=self.redactor)
        await store.open()
        try:
            app = build_app(
                store=store,
                configs=self.configs,
                settings=self.settings,
                redact=self.redactor,
                control=FleetControl(self.configs, supervisor),
                oauth_desk=OAuthDesk(store.tokens, os.environ),
            )
            async with serving(app, sock) as server:
                logger.info("web server on %s (store of bot %s)", server.url, self.key)
                yield
        finally:
            await store.close()
