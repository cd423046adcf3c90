"""MCP servers that die: noticed while idle, restarted; a call cut by it fails clearly or,
for a lookup, is asked again; results carry no secret; hidden arguments stay Salon's."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import replace

import pytest
from mcp import Client, StdioServerParameters

from fakes import mcp_server
from salon.config import Redactor
from salon.model import Participant, ToolCall
from salon.tools import mcp_link
from salon.tools.caller import Caller
from salon.tools.hub import MessageHandler, ServerSpec, ToolHub
from tests.tools.conftest import REPO, in_process, stdio_kit

SECRET = "mcp-s3cret-value-42"


def call(tool: str, **arguments: object) -> ToolCall:
    return ToolCall("c1", tool, dict(arguments))


async def server_pid(hub: ToolHub) -> int:
    return int((await hub.call(call("pid"))).content)


async def exited(pid: int) -> None:
    """Until the process has ended: its pidfd turns readable then (nothing is reaped)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already ended and reaped (by the SDK's transport)
        return
    loop = asyncio.get_running_loop()
    ended: asyncio.Future[None] = loop.create_future()
    loop.add_reader(fd, lambda: ended.done() or ended.set_result(None))
    try:
        await asyncio.wait_for(ended, 10)
    finally:
        loop.remove_reader(fd)
        os.close(fd)


def kit_then(params: StdioServerParameters) -> ServerSpec:
    """Our test server at the first start, ``params`` at every start after."""
    first = stdio_kit().connect
    assert first is not None
    starts = 0

    def connect(on_message: MessageHandler) -> Client:
        nonlocal starts
        starts += 1
        if starts == 1:
            return first(on_message)
        return Client(params, message_handler=on_message, cache=None)

    # A health check that never comes: only the call can find the server dead.
    return ServerSpec("kit", connect, start_timeout=3, health_interval=3600)


async def test_a_server_that_dies_while_idle_is_restarted_before_the_next_call() -> None:
    kit = replace(stdio_kit(), health_interval=0.2)
    async with ToolHub([kit], backoff_initial=0.05) as hub:
        os.kill(await server_pid(hub), signal.SIGKILL)
        await asyncio.wait_for(hub.wait_connections("kit", 2), 20)  # no call needed
        result = await hub.call(call("echo", text="back"))
    assert (result.content, result.is_error) == ("back", False)


@pytest.fixture
def no_fresh_window(monkeypatch: pytest.MonkeyPatch) -> None:
    """A call right after an answer skips the ping (``mcp_link._FRESH``); these tests kill the
    server just after one, as if it had been idle for long."""
    monkeypatch.setattr(mcp_link, "_FRESH", 0.0)


@pytest.mark.usefixtures("no_fresh_window")
async def test_a_call_to_a_server_that_died_while_idle_runs_on_a_new_one() -> None:
    kit = replace(stdio_kit(), health_interval=3600)  # no check finds it dead first
    async with ToolHub([kit], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        os.kill(pid, signal.SIGKILL)
        await exited(pid)
        result = await hub.call(call("pid"))  # it has side effects as far as Salon knows
    assert not result.is_error, result.content
    assert int(result.content) != pid


@pytest.mark.usefixtures("no_fresh_window")
async def test_a_call_to_a_dead_server_that_does_not_come_back_says_it_was_not_run() -> None:
    broken = StdioServerParameters(command="/nonexistent/mcp-server")
    async with ToolHub([kit_then(broken)], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        os.kill(pid, signal.SIGKILL)
        await exited(pid)
        result = await hub.call(call("pid"))
    assert result.is_error
    assert "was not run" in result.content
    assert "had stopped" in result.content
    assert "may or may not" not in result.content


async def test_a_call_cut_by_the_servers_death_fails_clearly_and_the_next_one_works() -> None:
    started = asyncio.Event()

    async def progress(done: float, total: float | None, message: str | None) -> None:
        started.set()

    async with ToolHub([stdio_kit()], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        work = asyncio.create_task(hub.call(call("work", seconds=30), progress=progress))
        await asyncio.wait_for(started.wait(), 10)  # the server has the call
        os.kill(pid, signal.SIGKILL)
        cut = await asyncio.wait_for(work, 20)
        after = await hub.call(call("echo", text="still here"))
    assert cut.is_error
    assert "restarting server" in cut.content
    assert "may or may not have run" in cut.content  # it has side effects: not run twice
    assert (after.content, after.is_error) == ("still here", False)


async def test_a_lookup_cut_by_the_servers_death_is_asked_again() -> None:
    async with ToolHub([stdio_kit()], backoff_initial=0.05) as hub:
        pid = await server_pid(hub)
        lookup = asyncio.create_task(hub.call(call("lookup_slowly", seconds=1)))
        os.kill(pid, signal.SIGKILL)
        result = await asyncio.wait_for(lookup, 30)
    assert (result.content, result.is_error) == ("looked up in 1.0", False)


async def test_a_secret_the_server_hands_back_is_redacted_at_the_hub() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "fakes.mcp_server"],
        cwd=str(REPO),
        env={"SERVICE_TOKEN": SECRET, "PATH": os.environ.get("PATH", "")},
    )

    def connect(on_message: MessageHandler) -> Client:
        return Client(params, message_handler=on_message, cache=None)

    spec = ServerSpec("kit", connect, start_timeout=20)
    async with ToolHub([spec], redact=Redactor(frozenset({SECRET}))) as hub:
        result = await hub.call(call("env", name="SERVICE_TOKEN"))
    assert result.content == "***"


async def test_the_model_cannot_fill_in_what_salon_fills_in() -> None:
    spec = replace(in_process(mcp_server.build()), hidden_arguments=frozenset({"requester_id"}))
    async with ToolHub([spec]) as hub:
        forged = await hub.call(call("whoami", requester_id="admin"))
        alice = Caller(requester=Participant("alice", "Alice"))
        filled = await hub.call(call("whoami"), caller=alice)
    assert forged.content == "asked by nobody"
    assert filled.content == "asked by alice"
