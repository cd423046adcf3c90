"""ToolHub: every tool server of a bot behind one registry.

A server is either a native tool set (Salon's built-ins and integrations, called directly
in-process) or an MCP server (``salon.tools.mcp_link``, loaded only when a bot has one).
Each is owned by one task; an MCP server's task connects, lists its tools, follows list
changes, and reconnects with backoff after a failure. A call that finds its server dead or
hung returns an error result (the model can carry on) and asks the owner task to restart it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from salon.errors import ToolError
from salon.model import UNPARSED_ARGUMENTS, ToolCall, ToolResult
from salon.tools.base import Progress, ToolSpec
from salon.tools.caller import Caller
from salon.tools.link import (
    CallContext,
    Consent,
    Elicit,
    Link,
    MessageHandler,
    ServerGone,
    ServerSpec,
    describe,
    without_hidden,
)
from salon.tools.native import InvalidArguments, NativeTool, ToolSet
from salon.tools.outputs import OutputDir
from salon.tools.results import native_result

__all__ = [
    "CallContext",
    "Caller",
    "Consent",
    "Elicit",
    "MessageHandler",
    "Progress",
    "ServerGone",
    "ServerSpec",
    "ToolHub",
    "describe",
    "without_hidden",
]

logger = logging.getLogger(__name__)


class _NativeLink:
    """A native tool set: opened for the hub's lifetime, called directly."""

    def __init__(self, spec: ServerSpec, tools: ToolSet) -> None:
        self.spec = spec
        self.toolset = tools
        self.tools = [_native_spec(spec, tool) for tool in tools.tools.values()]
        self.ready = asyncio.Event()
        self.first_attempt = asyncio.Event()
        self.last_error: str | None = None

    async def run(self) -> None:
        try:
            async with self.toolset.open():
                self.ready.set()
                self.first_attempt.set()
                await asyncio.Event().wait()  # until the hub stops
        except Exception as exc:  # a set that cannot open its clients offers nothing
            self.last_error = describe(exc)
            logger.warning("tool set %s failed to open: %s", self.spec.name, self.last_error)
        finally:
            self.ready.clear()
            self.first_attempt.set()

    async def wait_connections(self, count: int) -> None:
        if count > 1:
            raise ValueError(f"{self.spec.name} is native: it never reconnects")
        await self.ready.wait()

    def check(self, spec: ToolSpec, arguments: dict[str, Any]) -> str | None:
        return None  # the tool's own arguments model checks them

    async def call(
        self, call_id: str, remote_name: str, arguments: dict[str, Any], context: CallContext
    ) -> ToolResult:
        if not self.ready.is_set():
            reason = self.last_error or "not started"
            raise ToolError(f"tool set {self.spec.name} is unavailable: {reason}")
        timeout = self.spec.timeout
        try:
            async with asyncio.timeout(timeout):
                # Always a caller: what the model wrote for one is never read.
                caller = context.caller or Caller()
                raw = await self.toolset.call(remote_name, arguments, context.progress, caller)
        except TimeoutError:
            raise ToolError(f"{remote_name} timed out after {timeout:g}s") from None
        except InvalidArguments as exc:
            raise ToolError(f"invalid arguments for {remote_name}: {exc}") from None
        return await native_result(call_id, raw, outputs=context.outputs, owner=context.owner)


def _native_spec(server: ServerSpec, tool: NativeTool) -> ToolSpec:
    notes = tool.annotations
    hidden = server.hidden_arguments | frozenset(tool.caller_arguments)  # the served caller
    return ToolSpec(
        name=tool.name,
        server=server.name,
        remote_name=tool.name,
        description=tool.description,
        input_schema=without_hidden(tool.input_schema, hidden),
        read_only=notes.read_only if notes else None,
        destructive=notes.destructive if notes else None,
    )


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
        self._tasks: list[asyncio.Task[None]] = []
        self._registry: dict[str, ToolSpec] = {}
        self.changed: Callable[[], None] | None = None
        self._servers: dict[str, Link] = {}
        for spec in servers:
            self._servers[spec.name] = _link(spec, self._rebuild, (backoff_initial, backoff_max))
        self._rebuild()  # native sets offer their tools from the start

    async def start(self) -> None:
        """Start every server; return once each is up or has failed its first attempt."""
        for name, server in self._servers.items():
            self._tasks.append(asyncio.create_task(server.run(), name=f"tools-{name}"))
        for name, server in self._servers.items():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.first_attempt.wait(), server.spec.start_timeout)
            if not server.ready.is_set():
                reason = server.last_error or "did not start in time"
                logger.error(
                    "tool server %s is not available: %s (continuing without it)", name, reason
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

    def _rebuild(self) -> None:
        counts: dict[str, int] = {}
        for server in self._servers.values():
            for tool in server.tools:
                counts[tool.name] = counts.get(tool.name, 0) + 1
        registry: dict[str, ToolSpec] = {}
        for server in self._servers.values():
            for tool in server.tools:
                exposed = tool.name if counts[tool.name] == 1 else f"{server.spec.name}_{tool.name}"
                registry[exposed] = tool if exposed == tool.name else replace(tool, name=exposed)
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
        caller: Caller | None = None,
        progress: Progress | None = None,
        elicit: Elicit | None = None,
        consent: Consent | None = None,
    ) -> ToolResult:
        """Run one call for ``caller``; every failure becomes an error result the model
        can read. ``progress`` receives the server's progress reports while the call runs;
        a server that asks a question (MCP elicitation) asks it through ``elicit``; a
        per_user server the person has not connected their account to sends them the link
        through ``consent``."""
        result = await self._call(call, caller, progress, elicit, consent)
        return replace(result, content=self._redact(result.content))

    async def _call(
        self,
        call: ToolCall,
        caller: Caller | None,
        progress: Progress | None,
        elicit: Elicit | None,
        consent: Consent | None = None,
    ) -> ToolResult:
        spec = self._registry.get(call.name)
        if spec is None:
            known = ", ".join(sorted(self._registry)) or "none"
            return ToolResult(call.id, f"unknown tool {call.name!r}; tools: {known}", True)
        if UNPARSED_ARGUMENTS in call.arguments:
            raw = str(call.arguments[UNPARSED_ARGUMENTS])[:500]
            text = f"invalid arguments for {spec.name}: not a JSON object: {raw}"
            return ToolResult(call.id, text, is_error=True)
        server = self._servers[spec.server]
        problem = server.check(spec, call.arguments)
        if problem is not None:
            return ToolResult(call.id, problem, is_error=True)
        arguments = _arguments(server.spec, call.arguments, caller)
        context = _context(caller, progress, self.outputs, elicit, consent)
        try:
            return await self._run(server, call, spec, arguments, context)
        except OSError as exc:  # a full disk must not cost the answer
            logger.exception("could not keep the files %s made", call.name)
            text = f"{call.name} made files, but they could not be kept: {exc.strerror or exc}"
            return ToolResult(call.id, text, is_error=True)

    async def _run(
        self,
        server: Link,
        call: ToolCall,
        spec: ToolSpec,
        arguments: dict[str, Any],
        context: CallContext,
    ) -> ToolResult:
        try:
            return await server.call(call.id, spec.remote_name, arguments, context)
        except ServerGone as exc:
            if not spec.read_only:  # it may have done its work: never run it twice
                return ToolResult(call.id, f"{exc} (it may or may not have run)", is_error=True)
            try:  # a lookup: ask the restarted server once more
                return await server.call(call.id, spec.remote_name, arguments, context)
            except ToolError as again:
                return ToolResult(call.id, str(again), is_error=True)
        except ToolError as exc:
            return ToolResult(call.id, str(exc), is_error=True)


def _arguments(spec: ServerSpec, given: Mapping[str, Any], caller: Caller | None) -> dict[str, Any]:
    """The model's arguments without what Salon fills in (the model cannot pass its own);
    an MCP server gets Salon's filled in from the caller (a native tool, the caller)."""
    hidden = spec.hidden_arguments
    arguments = {k: v for k, v in given.items() if k not in hidden}
    if spec.tools is None and caller is not None:
        arguments |= {k: v for k, v in caller.arguments().items() if k in hidden}
    return arguments


def _context(
    caller: Caller | None,
    progress: Progress | None,
    outputs: OutputDir | None,
    elicit: Elicit | None,
    consent: Consent | None,
) -> CallContext:
    who = caller or Caller()
    asker = f"{who.requester.id}@{who.channel_key}"
    owner = who.requester.name
    return CallContext(progress, outputs, owner, elicit, asker, _person(who), consent, caller)


def _person(caller: Caller) -> str:
    """Who a call runs for, as per-person tokens are kept: the platform and the strongest
    identity it vouches for (an IRC nick can be taken by someone else; its account not)."""
    who = caller.requester.identity or caller.requester.id
    return f"{caller.platform}:{who}" if who else ""


def _link(spec: ServerSpec, on_change: Callable[[], None], backoff: tuple[float, float]) -> Link:
    if spec.tools is not None:
        return _NativeLink(spec, spec.tools)
    from salon.tools.mcp_link import McpServerLink  # the MCP SDK loads with the first server

    return McpServerLink(spec, on_change, backoff)
