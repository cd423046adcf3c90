"""Vendor abilities as native tool sets: weather, nfl, search, greynoise, comfyui, pixellab.

Each integration is a ``ToolSet`` with typed tools, MCP annotations (lookups read-only,
generations not), its own FIFO queue, timeout and cache, and its vendor's HTTP client
(httpx2, pointed at ``base_url`` when set). The hub calls them in-process, directly
(``integration_specs``); ``salon tools serve --only NAME`` wraps one into an MCP server
over stdio.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from salon.config import (
    BotConfig,
    ComfyUIIntegration,
    GreyNoiseIntegration,
    IntegrationConfig,
    NflIntegration,
    PixelLabIntegration,
    SearchIntegration,
    Secrets,
    WeatherIntegration,
)
from salon.config.integrations import unavailable_reason
from salon.integrations._discipline import Clock
from salon.integrations._http import VendorError
from salon.integrations._server import Builder, Lookup
from salon.integrations.comfyui import build_comfyui_server
from salon.integrations.greynoise import build_greynoise_server
from salon.integrations.nfl import build_nfl_server
from salon.integrations.pixellab import build_pixellab_server
from salon.integrations.search import build_search_server
from salon.integrations.weather import build_weather_server
from salon.tools.hub import ServerSpec
from salon.tools.native import ToolSet

__all__ = [
    "INTEGRATIONS",
    "IntegrationUnavailable",
    "VendorError",
    "build_integration_server",
    "integration_specs",
    "server_for",
]

logger = logging.getLogger(__name__)

_BUILDERS: dict[str, tuple[type[IntegrationConfig], Builder]] = {
    "weather": (WeatherIntegration, build_weather_server),
    "nfl": (NflIntegration, build_nfl_server),
    "search": (SearchIntegration, build_search_server),
    "greynoise": (GreyNoiseIntegration, build_greynoise_server),
    "comfyui": (ComfyUIIntegration, build_comfyui_server),
    "pixellab": (PixelLabIntegration, build_pixellab_server),
}
INTEGRATIONS = tuple(_BUILDERS)
_SPEC_MARGIN = 10.0  # seconds past queue wait + execution before the hub gives up


class IntegrationUnavailable(Exception):
    """An integration cannot run with this config; the text says what to set."""


def _config_for(bot: BotConfig, name: str) -> IntegrationConfig:
    """The bot's settings for ``name``, or the defaults when the bot has none."""
    configured: IntegrationConfig | None = getattr(bot.integrations, name, None)
    return configured if configured is not None else _BUILDERS[name][0]()


def build_integration_server(
    name: str,
    config: IntegrationConfig,
    *,
    lookup: Lookup,
    root: Path,
    clock: Clock = time.monotonic,
) -> ToolSet:
    """One integration's tool set; IntegrationUnavailable says what is missing."""
    if name not in _BUILDERS:
        raise IntegrationUnavailable(f"no integration {name!r} (known: {', '.join(INTEGRATIONS)})")
    reason = unavailable_reason(name, config, lookup, root)
    if reason is not None:
        raise IntegrationUnavailable(f"{name}: {reason}")
    try:
        return _BUILDERS[name][1](config, lookup=lookup, root=root, clock=clock)
    except ValueError as exc:  # e.g. a workflow file changed since the check
        raise IntegrationUnavailable(f"{name}: {exc}") from None


def server_for(bot: BotConfig, name: str, secrets: Secrets, root: Path) -> ToolSet:
    """``salon tools serve --only NAME``: the bot's settings, or the defaults."""
    if name not in _BUILDERS:
        raise IntegrationUnavailable(f"no integration {name!r} (known: {', '.join(INTEGRATIONS)})")
    return build_integration_server(name, _config_for(bot, name), lookup=secrets.get, root=root)


def _spec(name: str, tools: ToolSet, config: IntegrationConfig) -> ServerSpec:
    # The hub's own limit must outlast a call's wait in the queue plus its run.
    timeout = config.queue_timeout + config.timeout + _SPEC_MARGIN
    return ServerSpec(name=name, tools=tools, timeout=timeout, start_timeout=10.0)


def integration_specs(
    bot: BotConfig, secrets: Secrets, *, root: Path, clock: Clock = time.monotonic
) -> list[ServerSpec]:
    """The enabled integrations that can work; each left out is logged with the reason."""
    specs = []
    for name, config in bot.integrations.configured().items():
        try:
            server = build_integration_server(
                name, config, lookup=secrets.get, root=root, clock=clock
            )
        except IntegrationUnavailable as exc:
            logger.warning("integration %s is not offered: %s", name, exc)
            continue
        specs.append(_spec(name, server, config))
    return specs
