"""``salon tools``: list, call and serve a bot's tools, for debugging and for other clients."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from salon.app import BotApp
from salon.config import BotConfig, Secrets
from salon.config.targets import channel_key
from salon.llm.base import BaseProvider, LLMRequest, ProviderTraits, StreamEvent
from salon.model import ChannelRef, Participant, ToolCall
from salon.printable import printable
from salon.store.sql import SQLStore
from salon.tools.builtin import OPERATOR, MemoryBook, ScheduleBook, build_builtin_server
from salon.tools.caller import Caller
from salon.tools.native import ToolSet
from salon.tools.policy import decide

if TYPE_CHECKING:
    from salon.tools.mcp_serve import HttpListen

logger = logging.getLogger(__name__)

__all__ = ["ServeOptions", "call_tool", "list_tools", "serve_builtin", "serve_integration"]


def _print(text: str, file: TextIO | None = None) -> None:
    """Printed with the control characters of servers', tools' and errors' text shown."""
    print(printable(text), file=file)


@dataclass(frozen=True)
class ServeOptions:
    """How ``salon tools serve`` offers its server: stdio, or streamable HTTP."""

    http: str | None = None  # HOST:PORT; None: stdio
    token_env: str | None = None  # the environment variable holding the bearer token
    allow_hosts: tuple[str, ...] = ()  # further names a Host header may give

    def listen(self) -> HttpListen | None:
        """Where to listen (None for stdio); ValueError with the line to show."""
        if self.http is None:
            if self.token_env is not None or self.allow_hosts:
                raise ValueError("--token-env and --allow-host go with --http HOST:PORT")
            return None
        from salon.tools.mcp_serve import HttpListen, parse_listen  # MCP only when served

        host, port = parse_listen(self.http)
        token = None
        if self.token_env is not None:
            token = (os.environ.get(self.token_env) or "").strip()
            if not token:
                raise ValueError(f"--token-env {self.token_env}: the variable is not set")
        return HttpListen(host, port, token or None, self.allow_hosts)


async def _serve(tools: ToolSet, listen: HttpListen | None) -> None:
    from salon.tools.mcp_serve import serve_http, to_mcp_server  # MCP only for the outside client

    server = to_mcp_server(tools)
    if listen is None:
        await server.run_stdio_async()
        return

    def said(url: str) -> None:
        guarded = "a bearer token" if listen.token else "no token"
        print(f"salon tools serve: MCP at {url} ({guarded})", file=sys.stderr, flush=True)

    await serve_http(server, listen, said)


class _NoProvider(BaseProvider):
    """Tool commands never ask a model."""

    name = "none"
    traits = ProviderTraits()

    def stream(self, request: LLMRequest) -> AsyncIterator[StreamEvent]:
        raise RuntimeError("salon tools does not call a model")

    async def aclose(self) -> None:
        return None


def _app(key: str, config: BotConfig, root: Path, secrets: Secrets) -> BotApp:
    return BotApp(key=key, config=config, root=root, secrets=secrets, provider=_NoProvider())


async def list_tools(key: str, config: BotConfig, root: Path, secrets: Secrets) -> int:
    async with _app(key, config, root, secrets) as app:
        for name, reason in app.hub.failed_servers().items():
            _print(f"server {name}: UNAVAILABLE: {reason}")
        for spec in sorted(app.hub.specs(), key=lambda s: (s.server, s.name)):
            policy = decide(spec, {}, config)
            summary = (spec.description.strip().splitlines() or [""])[0]
            _print(f"{spec.name}  [{spec.server}, {policy}]  {summary}")
            _print(f"    arguments: {json.dumps(spec.input_schema.get('properties', {}))}")
    return 0


async def call_tool(
    key: str,
    config: BotConfig,
    root: Path,
    secrets: Secrets,
    *,
    name: str,
    arguments: str,
    channel: str,
) -> int:
    try:
        parsed = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        _print(f"error: arguments are not JSON: {exc}", file=sys.stderr)
        return 2
    if not isinstance(parsed, dict):
        _print("error: arguments must be a JSON object", file=sys.stderr)
        return 2
    try:
        channel = channel_key(config, channel)
    except ValueError as exc:
        _print(f"error: {exc}", file=sys.stderr)
        return 2
    async with _app(key, config, root, secrets) as app:
        caller = Caller(ChannelRef.from_key(channel), Participant(OPERATOR, "operator"))
        result = await app.hub.call(ToolCall("cli", name, parsed), caller=caller)
    _print(result.content)
    for attachment in result.attachments:
        _print(f"[file {attachment.filename}, {attachment.content_type}, {attachment.size} bytes]")
    return 1 if result.is_error else 0


def _listen(options: ServeOptions) -> HttpListen | int | None:
    try:
        return options.listen()
    except ValueError as exc:
        _print(f"error: {exc}", file=sys.stderr)
        return 2


async def serve_builtin(key: str, store: SQLStore, options: ServeOptions) -> int:
    """Salon's built-in tools over stdio or HTTP; chat-log tools take an explicit ``channel``."""
    listen = _listen(options)
    if isinstance(listen, int):
        return listen
    await store.open()
    try:

        async def nobody(_channel: str) -> list[str]:
            return []

        await _serve(build_builtin_server(key, store.chatlog, nobody), listen)
    finally:
        await store.close()
    return 0


async def serve_integration(
    config: BotConfig, root: Path, secrets: Secrets, name: str, options: ServeOptions
) -> int:
    """One integration over stdio or HTTP, with the bot's settings for it (or the defaults)."""
    from salon.integrations import IntegrationUnavailable, server_for  # only when served

    listen = _listen(options)
    if isinstance(listen, int):
        return listen
    try:
        server = server_for(config, name, secrets, root)
    except IntegrationUnavailable as exc:
        _print(f"error: {exc}", file=sys.stderr)
        return 2
    await _serve(server, listen)
    return 0


async def offline_tool_names(key: str, bot: BotConfig, secrets: Secrets, root: Path) -> set[str]:
    """Names of the tools Salon serves itself (built-ins, integrations), without starting
    anything: what ``salon check`` compares keywords with."""
    from salon.integrations import IntegrationUnavailable, build_integration_server

    names: set[str] = set()
    servers = []
    if bot.builtin_tools:

        async def nobody(_channel: str) -> list[str]:
            return []

        unopened = SQLStore("sqlite+aiosqlite:///:memory:")
        book = ScheduleBook(
            unopened.schedules, timezone="UTC", now=lambda: datetime.now(UTC), changed=_nothing
        )
        memory = None
        if bot.memory.enabled:
            memory = MemoryBook(
                unopened.notes, settings=lambda: bot.memory, authorized_roles=lambda: ()
            )
        servers.append(build_builtin_server(key, unopened.chatlog, nobody, book, memory=memory))
    for name, config in bot.integrations.configured().items():
        try:
            servers.append(build_integration_server(name, config, lookup=secrets.get, root=root))
        except IntegrationUnavailable:
            continue  # reported by check_integrations
    for server in servers:
        names.update(server.tools)
    return names


def _nothing() -> None:
    return None


async def auth_server(
    key: str,
    config: BotConfig,
    store: SQLStore,
    secrets: Secrets,
    server: str,
    *,
    revoke: bool = False,
    out: Callable[[str], None] | None = None,
    person: str | None = None,
) -> int:
    """``salon tools auth SERVER``: authorize Salon once at an OAuth MCP server (the link
    printed, the redirect taken on 127.0.0.1); ``--revoke``: forget its tokens (all of
    them, or only ``person``'s: a per_user server's)."""
    from salon.tools.link import describe
    from salon.tools.mcp_auth import KEY_ENV, SealedStorage, Sealer, authorize, tokens_kind
    from salon.tools.servers import client_info

    out = out or _print
    settings = config.mcp_servers.get(server)
    if settings is None or settings.oauth is None or settings.url is None:
        out(f"error: {server} is not an MCP server with oauth in this bot's config")
        return 2
    if person is not None and not settings.oauth.per_user:
        out(f"error: {server} is not per_user: its tokens are the bot's (leave out --person)")
        return 2
    # Only this person's tokens, or everything (the registration, every person's too).
    kind = tokens_kind(person) if person is not None else None
    await store.open()
    try:
        if person is not None:  # their registration goes with their tokens
            await store.tokens.forget(key, server, f"client@{person}")
        if revoke:
            dropped = await store.tokens.forget(key, server, kind)
            out(f"{server}: tokens forgotten" if dropped else f"{server}: no tokens were kept")
            return 0
        secret = secrets.get(KEY_ENV)
        if not secret:
            out(f"error: set {KEY_ENV} (a long random string: the key the tokens are kept under)")
            return 2
        await store.tokens.forget(key, server, kind)  # a new authorization replaces the old
        oauth = settings.oauth
        storage = SealedStorage(
            store.tokens, key, server, Sealer(secret), client_info(oauth, secrets), person=person
        )

        async def show(link: str) -> None:
            out(f"Open this link to authorize Salon at {server}:\n{link}")

        try:
            await authorize(
                server,
                str(settings.url),
                storage,
                scope=oauth.scope,
                port=oauth.callback_port,
                show=show,
            )
        except Exception as exc:  # one line for the operator; the details in the log
            logger.debug("authorizing %s failed", server, exc_info=True)
            out(f"error: {server} was not authorized: {describe(exc)}")
            return 1
        out(f"{server}: authorized; the tokens are kept (sealed) in the store")
        return 0
    finally:
        await store.close()
