"""Tool servers: MCP servers, tool rules and the built-in integrations (``mcp_servers:``,
``integrations:``)."""

from __future__ import annotations

from typing import Literal

from pydantic import (
    Field,
    model_validator,
)

from salon.config._common import (
    Endpoint,
    ToolPolicy,
    _Strict,
)

__all__ = [
    "DEFAULT_CITIES",
    "ComfyUIIntegration",
    "GreyNoiseIntegration",
    "IntegrationConfig",
    "IntegrationsConfig",
    "McpServerConfig",
    "NflIntegration",
    "PixelLabIntegration",
    "SearchIntegration",
    "ToolRule",
    "WeatherIntegration",
]


class ToolRule(_Strict):
    """A policy for one tool; with ``arguments`` it applies only when every listed argument
    matches its regular expression (full match on the argument's text)."""

    policy: ToolPolicy
    arguments: dict[str, str] = Field(default_factory=dict)


TOKEN_KEY_ENV = "SALON_TOKEN_KEY"
"""The environment variable whose value seals OAuth tokens in the store (salon.tools.mcp_auth)."""


class McpOAuthConfig(_Strict):
    """OAuth for a streamable-HTTP server (the MCP authorization spec): the operator
    authorizes once with ``salon tools auth SERVER``."""

    client_id: str | None = Field(
        default=None,
        description="a client id registered with the server's authorization server; "
        "unset: Salon registers itself (dynamic client registration)",
    )
    client_secret_env: str | None = Field(
        default=None,
        description="environment variable holding the client_id's secret (sent with HTTP "
        "Basic at the token endpoint); unset: a public client",
    )
    scope: str | None = Field(default=None, description="scopes to ask for, space-separated")
    callback_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="port of the loopback redirect (http://127.0.0.1:PORT/callback); 0: any "
        "free port (with a client_id, the port registered with it)",
    )
    per_user: bool = Field(
        default=False,
        description="each person's calls run with their own tokens (salon tools auth SERVER "
        "--person ID); the bot's (the operator's) only list the tools",
    )
    callback_url: str | None = Field(
        default=None,
        description="where an authorization started from the configurator or for a person "
        "redirects (the web server's /config/oauth/callback as the browser reaches it); "
        "unset: the configurator's own address, and per_user people are not sent links",
    )


class McpServerConfig(_Strict):
    """An MCP server: a command over stdio, or a URL over streamable HTTP."""

    command: str | None = None
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_from: dict[str, str] = Field(
        default_factory=dict, description="server variable -> environment variable (secrets)"
    )
    cwd: str | None = None
    url: Endpoint | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> environment variable (secrets)"
    )
    timeout: float = Field(default=360.0, gt=0, description="seconds for one tool call")
    start_timeout: float = Field(default=30.0, gt=0)
    health_interval: float = Field(
        default=10.0, gt=0, description="seconds between pings that find a dead server early"
    )
    policy: ToolPolicy | None = Field(default=None, description="default for this server's tools")
    tools: dict[str, ToolRule | list[ToolRule]] = Field(default_factory=dict)
    enabled: bool = True
    oauth: McpOAuthConfig | None = Field(
        default=None, description="OAuth (streamable HTTP only); tokens from salon tools auth"
    )
    elicitation: bool = Field(
        default=False,
        description="the server may ask the person a call runs for a question (MCP "
        "elicitation); off: the client does not offer it",
    )

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (streamable HTTP)")
        if self.oauth is not None and self.url is None:
            raise ValueError("`oauth` is for a server with a `url` (streamable HTTP)")
        return self


class IntegrationConfig(_Strict):
    """What every integration (a vendor ability served as an MCP server) shares."""

    enabled: bool = True
    base_url: str | None = Field(
        default=None,
        description="scheme and host for every request (a proxy, or a fake in tests); "
        "unset: the vendor's own",
    )
    timeout: float = Field(
        default=30.0, gt=0, description="seconds one call may run, not counting its wait"
    )
    concurrency: int = Field(default=1, ge=1, le=16, description="requests at once")
    queue_size: int = Field(default=20, ge=0, description="calls that may wait for their turn")
    queue_timeout: float = Field(
        default=120.0, gt=0, description="seconds a call may wait for its turn"
    )
    cache_ttl: float = Field(
        default=1800.0, ge=0, description="seconds a read-only result is reused; 0 = never"
    )
    cache_entries: int = Field(default=256, ge=1)
    cache_bytes: int = Field(default=2_000_000, ge=1)


DEFAULT_CITIES = [
    "Reykjavik",
    "Oslo",
    "Helsinki",
    "Tallinn",
    "Copenhagen",
    "Edinburgh",
    "Wellington",
    "Vancouver",
    "Seattle",
    "Anchorage",
]


class WeatherIntegration(IntegrationConfig):
    """Open-Meteo (no key) by default; AccuWeather when its key is set."""

    provider: Literal["auto", "open-meteo", "accuweather"] = Field(
        default="auto", description="auto: AccuWeather when its key is set, else Open-Meteo"
    )
    accuweather_api_key_env: str | None = None
    units: Literal["metric", "imperial"] = Field(
        default="metric", description="when the model does not say"
    )
    forecast_days: int = Field(default=3, ge=1, le=5)
    cities: list[str] = Field(
        default_factory=lambda: list(DEFAULT_CITIES),
        description="the city list the list_cities tool offers",
    )


class NflIntegration(IntegrationConfig):
    """ESPN's public site API: scores, schedules, headlines."""

    cache_ttl: float = Field(default=120.0, ge=0, description="short: scores change during a game")


class SearchIntegration(IntegrationConfig):
    """SerpAPI's Google results, with Google's AI overview when there is one."""

    api_key_env: str = "SERPAPI_API_KEY"
    results: int = Field(default=5, ge=1, le=10, description="organic results returned")
    language: str = Field(default="en", description="Google's hl parameter")
    country: str = Field(default="us", description="Google's gl parameter")


class GreyNoiseIntegration(IntegrationConfig):
    """IP lookups: the community API by default, the enterprise API with a key."""

    api_key_env: str | None = None
    api: Literal["auto", "community", "enterprise"] = Field(
        default="auto",
        description="auto: the IP lookup when the key is set (community if it refuses the "
        "key), else community",
    )


class ComfyUIIntegration(IntegrationConfig):
    """A ComfyUI server running a workflow template."""

    workflow: str | None = Field(
        default=None,
        description="path of the workflow JSON (API format) with {{prompt}}, {{seed}}, "
        "{{width}}, {{height}} placeholders; relative to the config directory",
    )
    timeout: float = Field(default=360.0, gt=0)
    width: int = Field(default=1024, ge=64, le=4096)
    height: int = Field(default=1024, ge=64, le=4096)
    max_side: int = Field(default=2048, ge=64, le=8192, description="largest width or height")
    max_images: int = Field(default=4, ge=1)
    max_image_bytes: int = Field(default=20_000_000, gt=0)


class PixelLabIntegration(IntegrationConfig):
    """PixelLab pixel art: sprites in several directions, images, rotations, animations."""

    api_key_env: str = "PIXELLAB_API_KEY"
    timeout: float = Field(default=360.0, gt=0, description="six minutes, as sprites take")
    poll_interval: float = Field(
        default=5.0, gt=0, description="seconds between job checks (PixelLab advises 5-10)"
    )
    max_image_bytes: int = Field(default=5_000_000, gt=0)
    kept_images: int = Field(
        default=64, ge=1, description="recent images rotate and animate can refer to"
    )


class IntegrationsConfig(_Strict):
    """The vendor abilities a bot offers as tools; an integration left out is off."""

    weather: WeatherIntegration | None = None
    nfl: NflIntegration | None = None
    search: SearchIntegration | None = None
    greynoise: GreyNoiseIntegration | None = None
    comfyui: ComfyUIIntegration | None = None
    pixellab: PixelLabIntegration | None = None

    def configured(self) -> dict[str, IntegrationConfig]:
        """Every integration present and enabled, by name."""
        found = {name: getattr(self, name) for name in type(self).model_fields}
        return {name: cfg for name, cfg in found.items() if cfg is not None and cfg.enabled}
