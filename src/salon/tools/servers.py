"""ServerSpecs from config: stdio and streamable-HTTP MCP servers, and the built-in set.

The MCP SDK is imported when a configured server is first connected, never for a bot
that has none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from salon.config import BotConfig, McpServerConfig, Secrets
from salon.tools.builtin import HIDDEN_ARGUMENTS
from salon.tools.hub import MessageHandler, ServerSpec
from salon.tools.native import ToolSet
from salon.tools.oauth_desk import OAuthDesk, PersonConsent, client_info

if TYPE_CHECKING:
    import httpx2
    from mcp import Client, StdioServerParameters

    from salon.tools.link import ConsentDesk
    from salon.tools.mcp_auth import TokenKeeper

__all__ = ["BUILTIN_SERVER", "builtin_spec", "client_info", "configured_specs"]

BUILTIN_SERVER = "salon"


def _stdio(config: McpServerConfig, secrets: Secrets) -> StdioServerParameters:
    from mcp import StdioServerParameters

    env = dict(config.env)
    for key, env_name in config.env_from.items():
        env[key] = secrets.get(env_name) or ""
    assert config.command is not None  # the config model guarantees one transport
    return StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)


def configured_specs(
    bot: BotConfig, secrets: Secrets, tokens: TokenKeeper | None = None, key: str = ""
) -> list[ServerSpec]:
    """``tokens`` (and the bot's ``key``): where an OAuth server's tokens are kept."""
    specs: list[ServerSpec] = []
    desk: OAuthDesk | None = None  # the bot's people's authorizations, one for its servers
    for name, server in bot.mcp_servers.items():
        if not server.enabled:
            continue
        consent: ConsentDesk | None = None
        if tokens is not None and _sends_links(server):
            desk = desk or OAuthDesk(tokens, {**secrets.plain, **secrets.values})
            consent = PersonConsent(desk, key, name, server)
        specs.append(
            ServerSpec(
                name=name,
                connect=_make_connect(
                    server, secrets, _authorizer(name, server, secrets, tokens, key)
                ),
                timeout=server.timeout,
                start_timeout=server.start_timeout,
                health_interval=server.health_interval,
                elicitation=server.elicitation,
                connect_as=_per_person(name, server, secrets, tokens, key),
                consent=consent,
            )
        )
    return specs


def _sends_links(server: McpServerConfig) -> bool:
    """A per_user server with a ``callback_url``: a person without tokens is sent the link
    that connects their account (the consent flow in a direct message)."""
    oauth = server.oauth
    return oauth is not None and oauth.per_user and oauth.callback_url is not None


def _per_person(
    name: str, server: McpServerConfig, secrets: Secrets, tokens: TokenKeeper | None, key: str
) -> Callable[[str, MessageHandler], Client] | None:
    """A per_user OAuth server's connections as a person, with that person's tokens."""
    if server.oauth is None or not server.oauth.per_user:
        return None

    def connect_as(person: str, on_message: MessageHandler) -> Client:
        auth = _authorizer(name, server, secrets, tokens, key, person=person)
        return _make_connect(server, secrets, auth)(on_message)

    return connect_as


def _authorizer(
    name: str,
    server: McpServerConfig,
    secrets: Secrets,
    tokens: TokenKeeper | None,
    key: str,
    *,
    person: str | None = None,
) -> Callable[[], httpx2.Auth] | None:
    """How each connection to an OAuth server gets its auth (from the stored tokens: the
    bot's, or ``person``'s)."""
    if server.oauth is None:
        return None
    settings, url = server.oauth, server.url or ""

    def auth() -> httpx2.Auth:
        from salon.errors import ToolError
        from salon.tools.mcp_auth import KEY_ENV, SealedStorage, Sealer, oauth

        secret = secrets.get(KEY_ENV)
        if not secret or tokens is None:
            raise ToolError(f"MCP server {name} uses OAuth: set {KEY_ENV} (the tokens' key)")
        client = client_info(settings, secrets)
        storage = SealedStorage(tokens, key, name, Sealer(secret), client, person=person)
        return oauth(name, url, storage, scope=settings.scope, person=person)

    return auth


def _make_connect(
    server: McpServerConfig, secrets: Secrets, auth: Callable[[], httpx2.Auth] | None = None
) -> Callable[[MessageHandler], Client]:
    if server.command is not None:

        def connect_stdio(on_message: MessageHandler) -> Client:
            from salon.tools.mcp_link import open_stdio

            return open_stdio(_stdio(server, secrets), on_message)

        return connect_stdio
    headers = dict(server.headers)
    for key, env_name in server.headers_env.items():
        headers[key] = secrets.get(env_name) or ""
    url = server.url or ""

    def connect_http(on_message: MessageHandler) -> Client:
        from salon.tools.mcp_link import open_http

        return open_http(url, headers, on_message, auth() if auth is not None else None)

    return connect_http


def builtin_spec(tools: ToolSet) -> ServerSpec:
    return ServerSpec(
        name=BUILTIN_SERVER,
        tools=tools,
        timeout=60.0,
        start_timeout=10.0,
        hidden_arguments=HIDDEN_ARGUMENTS,
    )
