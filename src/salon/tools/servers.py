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

if TYPE_CHECKING:
    from mcp import Client, StdioServerParameters

__all__ = ["BUILTIN_SERVER", "builtin_spec", "configured_specs"]

BUILTIN_SERVER = "salon"


def _stdio(config: McpServerConfig, secrets: Secrets) -> StdioServerParameters:
    from mcp import StdioServerParameters

    env = dict(config.env)
    for key, env_name in config.env_from.items():
        env[key] = secrets.get(env_name) or ""
    assert config.command is not None  # the config model guarantees one transport
    return StdioServerParameters(command=config.command, args=config.args, env=env, cwd=config.cwd)


def configured_specs(bot: BotConfig, secrets: Secrets) -> list[ServerSpec]:
    specs: list[ServerSpec] = []
    for name, server in bot.mcp_servers.items():
        if not server.enabled:
            continue
        specs.append(
            ServerSpec(
                name=name,
                connect=_make_connect(server, secrets),
                timeout=server.timeout,
                start_timeout=server.start_timeout,
                health_interval=server.health_interval,
                elicitation=server.elicitation,
            )
        )
    return specs


def _make_connect(server: McpServerConfig, secrets: Secrets) -> Callable[[MessageHandler], Client]:
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

        return open_http(url, headers, on_message)

    return connect_http


def builtin_spec(tools: ToolSet) -> ServerSpec:
    return ServerSpec(
        name=BUILTIN_SERVER,
        tools=tools,
        timeout=60.0,
        start_timeout=10.0,
        hidden_arguments=HIDDEN_ARGUMENTS,
    )
