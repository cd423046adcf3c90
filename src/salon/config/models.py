"""Typed configuration. Every model forbids unknown keys so a typo is an error, not a no-op.

Secrets never appear here: a key ending in ``_env`` names the environment variable that
holds the value (``api_key_env: OPENAI_API_KEY``).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import Annotated, Any, Literal, Self
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import (
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from salon.config._common import (
    MAX_OUTPUT_TOKENS,
    MAX_WAIT_SECONDS,
    Endpoint,
    ToolPolicy,
    _Strict,
    database_url_problem,
    http_url_problem,
)
from salon.config.links import MAX_LINKS, LinkConfig
from salon.config.memory import MemoryConfig
from salon.config.observability import CacheAlarmConfig, OtelConfig
from salon.config.pipeline import (
    ContextEvaluatorConfig,
    KeywordConfig,
    LimitsConfig,
    LoopBreakerConfig,
    RoomConfig,
    SpeakGateConfig,
    keywords_validator,
)
from salon.config.platforms import (
    DiscordConfig,
    IrcConfig,
    MatrixConfig,
    PlatformsConfig,
    TerminalConfig,
)
from salon.config.providers import (
    ModelSettings,
    ProviderConfig,
    ThinkingConfig,
)
from salon.config.tools import (
    ComfyUIIntegration,
    GreyNoiseIntegration,
    IntegrationConfig,
    IntegrationsConfig,
    McpServerConfig,
    NflIntegration,
    PixelLabIntegration,
    SearchIntegration,
    ToolRule,
    WeatherIntegration,
)
from salon.config.views import (
    RENDER,
    SHAPING,
    VISIBILITY,
    WINDOW,
    Derived,
    RenderSettings,
    Shaping,
    Visibility,
    WindowSettings,
)
from salon.model import Policy

__all__ = [
    "MAX_OUTPUT_TOKENS",
    "MAX_WAIT_SECONDS",
    "BotConfig",
    "CatchUpConfig",
    "ComfyUIIntegration",
    "DiscordConfig",
    "GreyNoiseIntegration",
    "IntegrationConfig",
    "IntegrationsConfig",
    "IrcConfig",
    "LinkConfig",
    "MatrixConfig",
    "McpServerConfig",
    "MemoryConfig",
    "ModelSettings",
    "NflIntegration",
    "OtelConfig",
    "OutputsConfig",
    "PixelLabIntegration",
    "PlatformsConfig",
    "Price",
    "ProviderConfig",
    "SearchIntegration",
    "TerminalConfig",
    "ThinkingConfig",
    "ToolPolicy",
    "ToolRule",
    "TracesConfig",
    "WeatherIntegration",
    "WebConfig",
    "database_url_problem",
    "http_url_problem",
]


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
    save_text: bool = Field(
        default=False,
        description="an answer whose tools made files is saved beside them as "
        "<requester>-answer.txt",
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
    cache_alarm: CacheAlarmConfig = Field(default_factory=CacheAlarmConfig)


class CatchUpConfig(_Strict):
    """What the bot reads back after a gap (its start, a new gateway session, a
    reconnect): see docs/CONFIGURATION.md, "Delivery"."""

    max_age: float = Field(
        default=3600.0,
        ge=0,
        description="seconds: a message missed in a gap is answered while younger than this; "
        "older ones are only context; 0 turns catch-up and owed answers off",
    )
    max_channels: int = Field(
        default=100, ge=0, le=1000, description="channels read back after a gap, at most"
    )
    max_messages: int = Field(
        default=50, ge=1, le=100, description="messages read back per channel, the newest"
    )
    recent_days: float = Field(
        default=7.0,
        gt=0,
        description="channels the bot answered in within this many days are read back "
        "(with direct messages and monitored channels)",
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
    serve_outputs: bool = Field(
        default=False,
        description="serve <data_dir>/outputs/ read-only at /outputs/ (for outputs.url), "
        "to anyone who reaches the server",
    )


class BotConfig(_Strict):
    """The effective config of one bot: ``shared.yaml`` with ``bots/<name>.yaml`` on top."""

    name: Annotated[str, RENDER] = Field(
        min_length=1, description="inner name: how the bot appears to the model"
    )
    provider: str = Field(
        min_length=1,
        description="a key of `providers`; may be left out when `model` is `<provider>/<model>`",
    )
    model: str | None = None
    system_prompt: Annotated[str, RENDER] = ""
    max_tokens: Annotated[int, RENDER] = Field(default=1024, gt=0, le=MAX_OUTPUT_TOKENS)
    temperature: Annotated[float | None, RENDER] = Field(default=None, ge=0, le=2)
    stop_sequences: Annotated[list[str], RENDER] = Field(default_factory=list)
    thinking: Annotated[ThinkingConfig, RENDER] = Field(default_factory=ThinkingConfig)

    mode: Literal["chat", "prefill"] = Field(
        default="chat", description="chat turns, or the room as a transcript the model continues"
    )
    prefill_system: Annotated[str, RENDER] = "The system is in CLI simulation mode."
    prefill_user: Annotated[str, RENDER] = "<cmd>cat untitled.txt</cmd>"
    context_prefix: Annotated[str, RENDER] = Field(
        default="", description="prefill: text before the transcript"
    )
    recent_participant_count: Annotated[int, RENDER] = Field(default=10, ge=0)
    bot_run_join: Annotated[Literal["paragraph", "space"], RENDER] = Field(
        default="paragraph", description="what joins a bot's consecutive messages in context"
    )
    irc_logs: int = Field(
        default=0, ge=0, le=1000, description="logged lines (with joins, parts) in <irc_logs>"
    )
    line_format: Annotated[Literal["name", "irc"], RENDER] = Field(
        default="name",
        description="chat mode: others' lines as `Name: text` or `[time] <Name> text`",
    )

    prompt_caching: Annotated[bool, RENDER] = Field(
        default=True, description="Anthropic cache breakpoints"
    )
    rolling_threshold: Annotated[int, WINDOW] = Field(default=50, ge=1)
    rolling_budget: Annotated[Literal["floor", "average"], WINDOW] = Field(
        default="floor",
        description="what the recency budgets are to a rolling window: the least it keeps "
        "after a roll, or the size it holds on average (a roll cuts below them)",
    )
    hard_max_characters: Annotated[int, WINDOW] = Field(default=500_000, gt=0)
    cache_breakpoint_offset: Annotated[int, WINDOW] = Field(default=5, ge=0)

    recency_window_messages: Annotated[int, WINDOW] = Field(default=400, gt=0)
    recency_window_characters: Annotated[int, WINDOW] = Field(default=100_000, gt=0)
    recency_window_age: Annotated[float | None, WINDOW] = Field(
        default=None,
        gt=0,
        le=MAX_WAIT_SECONDS,
        description="seconds: no message older than this in the context; unset: any age",
    )
    ignore_dot_messages: Annotated[bool, VISIBILITY] = True
    hiding_reactions: Annotated[list[str], VISIBILITY] = Field(
        default_factory=lambda: ["\U0001fae5"],  # dotted-line face
        description="a message carrying one of these reactions is invisible to the bot",
    )

    reply_on_name: bool = False
    reply_to_trigger: bool = Field(
        default=False, description="an answer's first message is a reply to what asked"
    )
    reply_on_random: int = Field(default=0, ge=0, description="answer 1 in N messages; 0 = off")
    allow_bot_interactions: bool = False
    other_bots_in_context: Annotated[bool, SHAPING] = Field(
        default=True, description="other bots' messages in the context (one asking stays)"
    )
    context_history: Annotated[bool, SHAPING] = Field(
        default=True, description="false: the context is the message that asked, alone"
    )
    context_sources: Annotated[bool, SHAPING] = Field(
        default=False, description="mark each message with [reply], [channel], [thread], [dm]"
    )
    reply_chain_budget: Literal["extra", "shared"] = Field(
        default="extra",
        description="extra: the reply chain's messages older than the window come on top of "
        "the recency budgets; shared: the chain takes the budgets first, the window the rest",
    )
    reply_chain_marks: Literal["outside", "all"] = Field(
        default="outside",
        description="which messages of the reply chain are marked as such ([reply]): those "
        "outside the window, or all of them",
    )
    max_bot_reply_chain_depth: int = Field(
        default=3, ge=1, description="consecutive bot messages after which bots stop answering"
    )
    history_max_nesting: int = Field(
        default=5, ge=0, description="how deep .history messages inside spliced history go"
    )
    links: list[LinkConfig] = Field(
        default_factory=list,
        max_length=MAX_LINKS,
        description="other channels whose recent messages this context shows (salon.agent.links)",
    )

    timezone: Annotated[str, RENDER] = Field(
        default="UTC", description="for schedules given without one"
    )
    misfire_grace: float = Field(
        default=3600.0, ge=0, description="seconds a missed schedule may still fire late"
    )
    schedule_min_interval: float = Field(
        default=60.0, ge=60, description="seconds a cron schedule's occurrences are apart, at least"
    )
    schedule_max_recurring: int = Field(
        default=5, ge=0, description="active cron schedules one person may have"
    )
    monitor_context_messages: Annotated[int, WINDOW] = Field(default=100, gt=0)
    monitor_context_age: Annotated[float, WINDOW] = Field(
        default=3600.0, gt=0, description="seconds"
    )

    max_concurrent_activations: int = Field(default=32, ge=1)
    event_queue_size: int = Field(default=1000, ge=1)
    event_batch_max: int = Field(default=100, ge=1)
    error_replies: bool = Field(default=True, description="answer a failed activation in-channel")
    error_message: str | None = Field(
        default=None, description="that answer's text; `{reason}` is replaced by the reason"
    )

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
    catch_up: CatchUpConfig = Field(default_factory=CatchUpConfig)
    shutdown_grace: float = Field(
        default=60.0,
        ge=0,
        le=3600,
        description="seconds answers in progress get to finish at a stop; what is cut "
        "is answered at the next start",
    )
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    otel: OtelConfig | None = Field(
        default=None, description="export traces and metrics to OpenTelemetry (otel extra)"
    )
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
    planner_temperature: float | None = Field(
        default=None, ge=0, le=2, description="the plan's temperature; unset: `temperature`"
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
    tool_result_context_chars: int | None = Field(
        default=None, ge=1, description="a past call's result in later contexts, cut; unset: whole"
    )

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
    room: RoomConfig = Field(default_factory=RoomConfig)

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

    @field_validator("log_level", mode="before")
    @classmethod
    def _debug_flag(cls, value: object) -> object:
        """A flag reads as a level, so Bob Bot's ``DEBUG_LOGGING=true`` can be mapped."""
        flag = str(value).lower() if isinstance(value, bool | str) else None
        return {"true": "DEBUG", "false": "INFO"}.get(flag or "", value)

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

    def provider_config(self) -> ProviderConfig:
        return self.providers[self.provider]

    def model_name(self) -> str:
        model = self.model or self.provider_config().model
        if not model:  # the loader rejects this, so reaching it is a bug
            raise ValueError(f"bot {self.name!r} has no model")
        return model

    # The parts' own records (salon.config.views), made once per effective config from the
    # fields marked for them.
    @cached_property
    def visibility(self) -> Visibility:
        return _VISIBILITY(self)

    @cached_property
    def window(self) -> WindowSettings:
        return _WINDOW(self)

    @cached_property
    def shaping(self) -> Shaping:
        return _SHAPING(self)

    @cached_property
    def render(self) -> RenderSettings:
        return _RENDER(self)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update`` applied; the parts' records are made afresh from it."""
        copied = super().model_copy(update=update, deep=deep)
        for name in _VIEWS:
            copied.__dict__.pop(name, None)
        return copied


_VISIBILITY = Derived(Visibility, BotConfig)
_WINDOW = Derived(WindowSettings, BotConfig)
_SHAPING = Derived(Shaping, BotConfig)
_RENDER = Derived(RenderSettings, BotConfig)
_VIEWS = tuple(name for name, kind in vars(BotConfig).items() if isinstance(kind, cached_property))
