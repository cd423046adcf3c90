"""ToolHub: every MCP server of a bot behind one registry.

Each server is owned by one task that connects, lists its tools, follows list changes, and
reconnects with backoff after a failure. A call that finds its server dead or hung returns
an error result (the model can carry on) and asks the owner task to restart the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import jsonschema
import mcp_types
from mcp import Client
from mcp.client.session import IncomingMessage, MessageHandlerFnT
from mcp.shared.exceptions import MCPError

from salon.errors import ToolError
from salon.model import UNPARSED_ARGUMENTS, ToolCall, ToolResult
from salon.tools.base import Progress, ToolSpec
from salon.tools.outputs import OutputDir
from salon.tools.results import to_result

__all__ = ["MessageHandler", "Progress", "ServerGone", "ServerSpec", "ToolHub"]

MessageHandler = MessageHandlerFnT

logger = logging.getLogger(__name__)

_RESTARTING_CODES = frozenset({mcp_types.CONNECTION_CLOSED, mcp_types.REQUEST_TIMEOUT})


@dataclass(frozen=True)
class ServerSpec:
    """How to reach one MCP server.

    ``connect(on_message)`` makes a fresh, unentered ``Client`` that passes server
    notifications to ``on_message`` (how pre-2026 servers announce tool-list changes).
    """

    name: str
    connect: Callable[[MessageHandler], Client]
    timeout: float = 360.0
    start_timeout: float = 30.0
    hidden_arguments: frozenset[str] = frozenset()  # filled in by Salon, not the model
    health_interval: float = 10.0  # seconds between pings of an idle server


class ServerGone(ToolError):
    """The server's connection broke during a call: it is being restarted."""


class _Server:
    """One server's connection, owned by the task running ``run``."""

    def __init__(
        self, spec: ServerSpec, on_change: Callable[[], None], backoff: tuple[float, float]
    ):
        self.spec = spec
        self.client: Client | None = None
        self.tools: list[mcp_types.Tool] = []
        self.ready = asyncio.Event()
        self.first_attempt = asyncio.Event()
        self.last_error: str | None = None
        self.failures = 0
        self.connections = 0  # successful connections so far (a restart makes one more)
        self._connected = asyncio.Condition()
        self._restart = asyncio.Event()
        self._stale = asyncio.Event()
        self._on_change = on_change
        self._backoff = backoff

    async def run(self) -> None:
        delay = self._backoff[0]
        while True:
            self._restart.clear()
            try:
                async with self.spec.connect(self._on_message) as client:
                    await self._load_tools(client)
                    self.client, self.last_error, self.failures = client, None, 0
                    self.ready.set()
                    self.first_attempt.set()
                    async with self._connected:
                        self.connections += 1
                        self._connected.notify_all()
                    delay = self._backoff[0]
                    logger.info("MCP server %s: %d tools", self.spec.name, len(self.tools))
                    await self._serve(client)
            except Exception as exc:  # a server's failure must never take the hub down
                self.failures += 1
                self.last_error = _describe(exc)
                if self.failures == 1 or self.failures % 10 == 0:  # a dead server, not a flood
                    logger.warning(
                        "MCP server %s failed (%d in a row): %s",
                        self.spec.name,
                        self.failures,
                        self.last_error,
                    )
            finally:
                self.client = None
                self.ready.clear()
                self.first_attempt.set()
            await asyncio.sleep(delay)
            delay = min(max(delay * 2, 0.05), self._backoff[1])

    async def wait_connections(self, count: int) -> None:
        async with self._connected:
            await self._connected.wait_for(lambda: self.connections >= count)

    async def _serve(self, client: Client) -> None:
        helpers = [
            asyncio.create_task(self._follow_changes(client)),
            asyncio.create_task(self._reload_when_stale(client)),
            asyncio.create_task(self._watch(client)),
        ]
        try:
            await self._restart.wait()
            logger.warning("MCP server %s: restarting", self.spec.name)
        finally:
            for task in helpers:
                task.cancel()
            await asyncio.gather(*helpers, return_exceptions=True)

    async def _watch(self, client: Client) -> None:
        """Ping the server while it is idle: one that died or hung is restarted now, before
        a call needs it, not when that call fails."""
        interval = self.spec.health_interval
        while True:
            await asyncio.sleep(interval)
            try:
                async with asyncio.timeout(min(interval, 10.0)):
                    await client.send_ping()
            except Exception as exc:  # any failure to answer is the same news
                self.last_error = f"stopped answering: {_describe(exc)}"
                logger.warning("MCP server %s %s; restarting it", self.spec.name, self.last_error)
                self.restart()
                return

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._stale.set()

    async def _reload_when_stale(self, client: Client) -> None:
        while True:
            await self._stale.wait()
            self._stale.clear()
            try:
                await self.reload(client)
            except (MCPError, OSError) as exc:
                logger.warning("MCP server %s: could not reload tools: %s", self.spec.name, exc)

    async def _follow_changes(self, client: Client) -> None:
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    await self.reload(client)
        except Exception as exc:  # older servers notify through the message handler instead
            logger.debug("MCP server %s: no change subscription (%s)", self.spec.name, exc)

    async def reload(self, client: Client | None = None) -> None:
        client = client or self.client
        if client is not None:
            await self._load_tools(client)
            self._on_change()

    async def _load_tools(self, client: Client) -> None:
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        for _ in range(100):  # a server that pages forever must not hang us
            page = await client.list_tools(cursor=cursor, cache_mode="refresh")
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = tools
        self._on_change()

    def restart(self) -> None:
        """Drop the connection now; calls wait for the owner task to bring up a new one."""
        self.client = None
        self.ready.clear()
        self._restart.set()

    async def call(
        self, remote_name: str, arguments: dict[str, Any], progress: Progress | None = None
    ) -> mcp_types.CallToolResult:
        if not self.ready.is_set():
            try:
                await asyncio.wait_for(self.ready.wait(), self.spec.start_timeout)
            except TimeoutError:
                reason = self.last_error or "not started"
                raise ToolError(f"MCP server {self.spec.name} is unavailable: {reason}") from None
        client = self.client
        if client is None:
            raise ToolError(f"MCP server {self.spec.name} is unavailable")
        timeout = self.spec.timeout
        try:
            async with asyncio.timeout(timeout + 5):
                return await client.call_tool(
                    remote_name,
                    arguments,
                    read_timeout_seconds=timeout,
                    progress_callback=progress,
                )
        except TimeoutError:
            self.restart()
            raise ToolError(
                f"{remote_name} timed out after {timeout:g}s; restarting server"
            ) from None
        except MCPError as exc:
            if exc.code in _RESTARTING_CODES:
                self.restart()
                raise ServerGone(f"{remote_name} failed: {exc.message}; restarting server") from exc
            raise ToolError(f"{remote_name} failed: {exc.message}") from exc
        except (OSError, RuntimeError) as exc:
            self.restart()
            raise ServerGone(f"{remote_name} failed: {_describe(exc)}; restarting server") from exc


class ToolHub:
    """All tools of all servers in one registry, with schema checks before every call."""

    def __init__(
        self,
        servers: Sequence[ServerSpec],
        *,
        backoff_initial: float = 0.5,
        backoff_max: float = 30.0,
        redact: Callable[[str], str] | None = None,
        outputs: OutputDir | None = None,
    ) -> None:
        """``redact`` is applied to every result and error text: no configured secret a
        server hands back (one Salon passed it through its environment, say) goes on.
        Files in results (images) are saved in ``outputs`` when it is given."""
        self._redact = redact or (lambda text: text)
        self.outputs = outputs
        self._servers = {
            s.name: _Server(s, self._rebuild, (backoff_initial, backoff_max)) for s in servers
        }
        self._tasks: list[asyncio.Task[None]] = []
        self._registry: dict[str, ToolSpec] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        self.changed: Callable[[], None] | None = None

    async def start(self) -> None:
        """Start every server; return once each is up or has failed its first attempt."""
        for name, server in self._servers.items():
            self._tasks.append(asyncio.create_task(server.run(), name=f"mcp-{name}"))
        for name, server in self._servers.items():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.first_attempt.wait(), server.spec.start_timeout)
            if not server.ready.is_set():
                reason = server.last_error or "did not start in time"
                logger.error(
                    "MCP server %s is not available: %s (continuing without it)", name, reason
                )

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    async def __aenter__(self) -> ToolHub:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def failed_servers(self) -> dict[str, str]:
        return {
            name: server.last_error or "not started"
            for name, server in self._servers.items()
            if not server.ready.is_set()
        }

    def specs(self) -> list[ToolSpec]:
        return list(self._registry.values())

    def get(self, name: str) -> ToolSpec | None:
        return self._registry.get(name)

    def _validator(self, spec: ToolSpec) -> jsonschema.protocols.Validator:
        validator = self._validators.get(spec.name)
        if validator is None or validator.schema is not spec.input_schema:
            cls = jsonschema.validators.validator_for(
                spec.input_schema, jsonschema.Draft202012Validator
            )
            validator = cls(spec.input_schema)
            self._validators[spec.name] = validator
        return validator

    def _rebuild(self) -> None:
        counts: dict[str, int] = {}
        for server in self._servers.values():
            for tool in server.tools:
                counts[tool.name] = counts.get(tool.name, 0) + 1
        registry: dict[str, ToolSpec] = {}
        for server in self._servers.values():
            for tool in server.tools:
                exposed = tool.name if counts[tool.name] == 1 else f"{server.spec.name}_{tool.name}"
                registry[exposed] = _spec(exposed, server.spec, tool)
        self._registry = registry
        if self.changed is not None:
            self.changed()

    async def wait_connections(self, server: str, count: int) -> None:
        """Wait until ``server`` has connected ``count`` times (a restart is one more)."""
        await self._servers[server].wait_connections(count)

    async def call(
        self,
        call: ToolCall,
        *,
        hidden: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> ToolResult:
        """Run one call; every failure becomes an error result the model can read.
        ``progress`` receives the server's progress reports while the call runs."""
        result = await self._call(call, hidden, progress)
        return replace(result, content=self._redact(result.content))

    async def _call(
        self, call: ToolCall, hidden: Mapping[str, Any] | None, progress: Progress | None
    ) -> ToolResult:
        spec = self._registry.get(call.name)
        if spec is None:
            known = ", ".join(sorted(self._registry)) or "none"
            return ToolResult(call.id, f"unknown tool {call.name!r}; tools: {known}", True)
        problem = _invalid_arguments(spec, call.arguments, self._validator(spec))
        if problem is not None:
            return ToolResult(call.id, problem, is_error=True)
        server = self._servers[spec.server]
        # What Salon fills in is Salon's alone: the model cannot pass its own.
        arguments = {
            k: v for k, v in call.arguments.items() if k not in server.spec.hidden_arguments
        }
        for key, value in (hidden or {}).items():
            if key in server.spec.hidden_arguments:
                arguments[key] = value
        try:
            raw = await server.call(spec.remote_name, arguments, progress)
        except ServerGone as exc:
            if not spec.read_only:  # it may have done its work: never run it twice
                return ToolResult(call.id, f"{exc} (it may or may not have run)", is_error=True)
            try:  # a lookup: ask the restarted server once more
                raw = await server.call(spec.remote_name, arguments, progress)
            except ToolError as again:
                return ToolResult(call.id, str(again), is_error=True)
        except ToolError as exc:
            return ToolResult(call.id, str(exc), is_error=True)
        owner = str((hidden or {}).get("requester_name") or "")
        try:
            return await to_result(call.id, raw, outputs=self.outputs, owner=owner)
        except OSError as exc:  # a full disk must not cost the answer
            logger.exception("could not keep the files %s made", call.name)
            text = f"{call.name} made files, but they could not be kept: {exc.strerror or exc}"
            return ToolResult(call.id, text, is_error=True)


def _spec(exposed: str, server: ServerSpec, tool: mcp_types.Tool) -> ToolSpec:
    schema = dict(tool.input_schema or {"type": "object", "properties": {}})
    if server.hidden_arguments:
        properties = {
            k: v
            for k, v in (schema.get("properties") or {}).items()
            if k not in server.hidden_arguments
        }
        required = [r for r in schema.get("required", []) if r not in server.hidden_arguments]
        schema = {**schema, "properties": properties, "required": required}
    notes = tool.annotations
    return ToolSpec(
        name=exposed,
        server=server.name,
        remote_name=tool.name,
        description=tool.description or "",
        input_schema=schema,
        read_only=notes.read_only_hint if notes else None,
        destructive=notes.destructive_hint if notes else None,
    )


def _invalid_arguments(
    spec: ToolSpec, arguments: dict[str, Any], validator: jsonschema.protocols.Validator
) -> str | None:
    if UNPARSED_ARGUMENTS in arguments:
        raw = str(arguments[UNPARSED_ARGUMENTS])[:500]
        return f"invalid arguments for {spec.name}: not a JSON object: {raw}"
    try:
        errors = sorted(validator.iter_errors(arguments), key=lambda e: list(e.path))
    except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType):
        return None  # the server's schema is broken: let the server judge the arguments
    if not errors:
        return None
    lines = [f"{'.'.join(map(str, e.path)) or '(arguments)'}: {e.message}" for e in errors[:5]]
    return f"invalid arguments for {spec.name}: " + "; ".join(lines)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if not str(exc) else str(exc)
