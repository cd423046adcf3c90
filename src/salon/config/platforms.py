"""Platforms: the terminal, IRC, Discord, Matrix and Slack (``platforms:``)."""

from __future__ import annotations

from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    Field,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from salon.config._common import (
    Endpoint,
    _Strict,
)

__all__ = [
    "DiscordConfig",
    "DiscordMentions",
    "ImageInput",
    "IrcConfig",
    "MatrixConfig",
    "PlatformsConfig",
    "SlackConfig",
    "TerminalConfig",
]


class TerminalConfig(_Strict):
    """``salon chat``: every line typed addresses the bot."""

    user_name: str = "you"


class ImageInput(_Strict):
    """Images of messages as the model's input, the same keys on every platform whose
    messages carry images (Discord, Matrix, Slack): the newest ``max_images`` of the
    context, each of at most ``max_image_bytes``, unless ``include_images`` is off."""

    include_images: bool = Field(default=True, description="images as the model's input")
    max_images: int = Field(default=5, ge=0, description="the newest images of the context")
    max_image_bytes: int = Field(default=5_000_000, gt=0)

    @property
    def image_budget(self) -> int:
        """How many images of one context the model may see (none when they are off)."""
        return self.max_images if self.include_images else 0


PLAIN_IRC_PORT = 6667  # IRC's plain-text port: TLS is on by default on any other


class IrcConfig(_Strict):
    """One IRC network. The bot answers when addressed (``Nick: ...``, ``Nick, ...`` or its
    nick anywhere), to a command (``.terrarium question``) and in private messages."""

    server: str
    port: int = Field(default=6697, gt=0, lt=65536)
    tls: bool = Field(default=True, description="default: off on port 6667, else on")
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
    dot_commands: bool = Field(
        default=False, description="answer .ping and .help here, without the model"
    )
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

    @model_validator(mode="before")
    @classmethod
    def _plain_on_6667(cls, data: Any) -> Any:
        """Port 6667 without a word about TLS means plain text, as on every network."""
        plain = isinstance(data, dict) and "tls" not in data
        if plain and str(data.get("port", "")).strip() == str(PLAIN_IRC_PORT):
            return {**data, "tls": False}
        return data

    @field_validator("channels", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        """``#a,#b`` as IRC's JOIN takes them (a channel's name holds no comma)."""
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

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


class DiscordConfig(ImageInput):
    """A Discord bot account. The token is read from ``token_env``."""

    token_env: str = "DISCORD_TOKEN"
    monitored_channels: list[str] = Field(
        default_factory=list, description="channel ids answered without a mention"
    )
    max_text_attachment_kb: int = Field(default=100, ge=0)
    reply_chain_max_depth: int = Field(default=30, ge=0)
    reply_chain_image_max_depth: int = Field(
        default=5,
        ge=0,
        le=50,
        description="reply-chain messages (the nearest first) scanned for images; 0: none",
    )
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


class MatrixConfig(ImageInput):
    """A Matrix bot account. It logs in with the access token in ``access_token_env``, or
    with the password in ``password_env`` (the device's token is then kept in the data
    directory, ``matrix-session.json``, and used at the next start)."""

    homeserver: Endpoint = Field(description="the client-server API, e.g. https://matrix.org")
    user_id: str = Field(pattern=r"^@[^:]+:.+$", description="the bot's MXID, @salon:example.org")
    access_token_env: str | None = "MATRIX_ACCESS_TOKEN"
    password_env: str | None = None
    device_name: str = "Salon"
    rooms: list[str] = Field(default_factory=list, description="room ids joined at start")
    monitored_rooms: list[str] = Field(
        default_factory=list, description="room ids answered without a mention"
    )
    invite_from_users: list[str] = Field(
        default_factory=list, description="MXIDs whose invites the bot accepts"
    )
    invite_from_servers: list[str] = Field(
        default_factory=list, description="server names whose users' invites it accepts"
    )
    approval_power_level: int = Field(
        default=50, description="the power level that may approve a tool call by reaction"
    )
    operators: list[str] = Field(
        default_factory=list, description="MXIDs who may approve under ask_admin"
    )
    reply_chain_max_depth: int = Field(default=30, ge=0)
    sync_timeout: float = Field(default=30.0, gt=0, le=300, description="long-poll, seconds")
    rate_limit_wait_max: float = Field(
        default=60.0, ge=0, description="seconds of M_LIMIT_EXCEEDED waited out per request"
    )
    send_retries: int = Field(default=3, ge=0, description="on network errors, same txn id")


class SlackConfig(ImageInput):
    """A Slack app in Socket Mode (no public URL): the bot token (``xoxb-``) for the Web
    API and the app-level token (``xapp-``, scope ``connections:write``) for the socket.
    With ``mode: http`` Slack POSTs to a Request URL instead (the Events API): Salon listens
    on ``listen`` at ``path`` and checks each request against the app's signing secret."""

    bot_token_env: str = "SLACK_BOT_TOKEN"
    app_token_env: str = Field(default="SLACK_APP_TOKEN", description="Socket Mode's only")
    mode: Literal["socket", "http"] = Field(
        default="socket", description="socket: Socket Mode; http: the Events API over HTTP"
    )
    signing_secret_env: str = Field(
        default="SLACK_SIGNING_SECRET", description="the app's signing secret (http mode)"
    )
    listen: str = Field(
        default="127.0.0.1:3000",
        description="host:port the Request URL's server listens on (http mode); a reverse "
        "proxy with TLS brings Slack's requests there",
    )
    path: str = Field(default="/slack/events", description="the Request URL's path (http mode)")
    monitored_channels: list[str] = Field(
        default_factory=list, description="channel ids answered without a mention"
    )
    history_cache_channels: int = Field(default=200, ge=1)
    progress_interval: float = Field(
        default=2.0, gt=0, le=60, description="seconds between edits of a progress message"
    )
    rate_limit_wait_max: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description="seconds a 429's Retry-After may ask Salon to wait before it gives up",
    )
    api_base_url: Endpoint | None = Field(
        default=None, description="Slack's Web API; unset: https://slack.com/api/"
    )

    @field_validator("listen")
    @classmethod
    def _listen_is_host_port(cls, listen: str) -> str:
        _host_port(listen)
        return listen

    @field_validator("path")
    @classmethod
    def _a_path(cls, path: str) -> str:
        if not path.startswith("/") or any(c in path for c in "?# "):
            raise PydanticCustomError("url_path", "must start with / (e.g. /slack/events)")
        return path

    @property
    def address(self) -> tuple[str, int]:
        """``listen`` as (host, port); an IPv6 host without its brackets."""
        return _host_port(self.listen)


def _host_port(listen: str) -> tuple[str, int]:
    """``host:port`` (``[::1]:3000`` for IPv6); a port of 0 takes any free one."""
    host, sep, port = listen.rpartition(":")
    host = host.removeprefix("[").removesuffix("]") if host.startswith("[") else host
    bare_v6 = ":" in host and not listen.startswith("[")
    if not sep or not host or bare_v6 or not port.isdigit():
        raise PydanticCustomError("host_port", "must be host:port, e.g. 127.0.0.1:3000")
    if int(port) > 65535:
        raise PydanticCustomError("host_port", "must be host:port with a port up to 65535")
    return host, int(port)


class PlatformsConfig(_Strict):
    terminal: TerminalConfig = Field(default_factory=TerminalConfig)
    irc: IrcConfig | None = None
    discord: DiscordConfig | None = None
    matrix: MatrixConfig | None = None
    slack: SlackConfig | None = None

    def networks(self) -> list[str]:
        """The platforms besides the terminal that these settings put the bot on."""
        names = type(self).model_fields
        return [n for n in names if n != "terminal" and getattr(self, n) is not None]
