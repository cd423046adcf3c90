"""Typed configuration. Every model forbids unknown keys so a typo is an error, not a no-op.

Secrets never appear here: a key ending in ``_env`` names the environment variable that
holds the value (``api_key_env: OPENAI_API_KEY``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from salon.model import Policy

__all__ = [
    "BotConfig",
    "DiscordConfig",
    "IrcConfig",
    "McpServerConfig",
    "ModelSettings",
    "PlatformsConfig",
    "ProviderConfig",
    "TerminalConfig",
    "ToolPolicy",
    "ToolRule",
]

ToolPolicy = Policy


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ModelSettings(_Strict):
    """Request fields for one model of a provider, on top of the provider's own."""

    extra_body: dict[str, Any] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(default_factory=dict)


class ProviderConfig(_Strict):
    """One LLM endpoint. ``openai`` covers any OpenAI-compatible server; ``bedrock`` is
    Anthropic's models on AWS Bedrock, through the anthropic SDK's Bedrock client; ``google``
    is the Gemini API through the google-genai SDK."""

    type: Literal["openai", "anthropic", "bedrock", "google"]
    model: str | None = Field(default=None, description="default model for bots using this")
    base_url: str | None = None
    base_url_env: str | None = Field(
        default=None, description="environment variable that overrides base_url when set"
    )
    api_key_env: str | None = None
    aws_region: str | None = Field(default=None, description="bedrock: e.g. us-east-1")
    aws_access_key_env: str | None = None
    aws_secret_key_env: str | None = None
    aws_session_token_env: str | None = None
    aws_profile: str | None = Field(default=None, description="bedrock: a profile of ~/.aws")
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
    retries: int = Field(default=2, ge=0, le=20)
    backoff_initial: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=30.0, ge=0)
    timeout: float = Field(default=120.0, gt=0)


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
    url: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)
    headers_env: dict[str, str] = Field(
        default_factory=dict, description="header name -> environment variable (secrets)"
    )
    timeout: float = Field(default=360.0, gt=0, description="seconds for one tool call")
    start_timeout: float = Field(default=30.0, gt=0)
    policy: ToolPolicy | None = Field(default=None, description="default for this server's tools")
    tools: dict[str, ToolRule | list[ToolRule]] = Field(default_factory=dict)
    enabled: bool = True

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of `command` (stdio) or `url` (streamable HTTP)")
        return self


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
    discord_backoff_max: float = Field(default=30.0, ge=0)
    send_retries: int = Field(default=3, ge=0)


class PlatformsConfig(_Strict):
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
    irc: IrcConfig | None = None
    discord: DiscordConfig | None = None


class BotConfig(_Strict):
    """The effective config of one bot: ``shared.yaml`` with ``bots/<name>.yaml`` on top."""

    name: str = Field(min_length=1, description="inner name: how the bot appears to the model")
    provider: str = Field(
        min_length=1,
        description="a key of `providers`; may be left out when `model` is `<provider>/<model>`",
    )
    model: str | None = None
    system_prompt: str = ""
    max_tokens: int = Field(default=1024, gt=0)
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
    monitor_context_messages: int = Field(default=100, gt=0)
    monitor_context_age: float = Field(default=3600.0, gt=0, description="seconds")

    max_concurrent_activations: int = Field(default=4, ge=1)
    event_queue_size: int = Field(default=1000, ge=1)
    event_batch_max: int = Field(default=100, ge=1)
    error_replies: bool = Field(default=True, description="answer a failed activation in-channel")

    data_dir: str = "data"
    database_url: str | None = None
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    restart_backoff_initial: float = Field(default=1.0, ge=0)
    restart_backoff_max: float = Field(default=60.0, ge=0)

    mcp_servers: dict[str, McpServerConfig] = Field(default_factory=dict)
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
