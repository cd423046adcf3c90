"""Who a native tool call runs for, as the tool runner hands it over: the requester's
roles exactly as the platform gave them (a role name may hold a comma), their identity,
and where the call was made."""

from __future__ import annotations

from datetime import UTC, datetime

from salon.agent.conversation.toolrunner import ToolRunner
from salon.config.memory import MemoryConfig
from salon.model import ChannelRef, Participant, ToolCall
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.builtin import MemoryBook, ScheduleBook, build_builtin_server
from salon.tools.hub import ToolHub
from salon.tools.servers import builtin_spec
from tests.conftest import bot_config

ROLES = ("Mods, Team", "admin")
ALICE = Participant("alice", "Alice", roles=ROLES, identity="alice!a@example.org")


async def called_by_alice(
    store: SQLStore,
    call: ToolCall,
    *,
    schedules: ScheduleBook | None = None,
    memory: MemoryBook | None = None,
) -> ChannelRef:
    """``call`` to the built-in tools, run for Alice in a guild channel (message ``m1``),
    through the tool runner; the channel. The call must succeed."""

    async def nobody(_channel: str) -> list[str]:
        return []

    tools = build_builtin_server("salon", store.chatlog, nobody, schedules, memory=memory)
    platform = MemoryPlatform(bot_name="Salon")
    channel = platform.channel("general", guild_id="900")
    config = bot_config(default_tool_policy="allow", tool_output_visible=False)
    async with ToolHub([builtin_spec(tools)]) as hub:
        runner = ToolRunner(bot="salon", config=config, tools=hub, store=store, log=None)
        outcome = await runner.run(platform, channel, ALICE, [call], "m1")
    assert not outcome.results[0].is_error, outcome.results[0].content
    return channel


async def test_a_native_tool_sees_the_callers_roles_exactly(store: SQLStore) -> None:
    seen: list[tuple[str, str, Participant]] = []

    def check_target(here: str, target: str, requester: Participant) -> str | None:
        seen.append((here, target, requester))
        return None

    book = ScheduleBook(
        store.schedules,
        timezone="UTC",
        now=lambda: datetime.now(UTC),
        changed=lambda: None,
        check_target=check_target,
    )
    call = ToolCall("c1", "schedule_create", {"when": "2099-01-01T09:00", "prompt": "hello"})
    channel = await called_by_alice(store, call, schedules=book)
    ((here, target, requester),) = seen
    assert (here, target) == (channel.key, channel.key)
    assert requester.roles == ROLES
    assert (requester.id, requester.name, requester.identity) == (
        "alice",
        "Alice",
        "alice!a@example.org",
    )


async def test_an_authorized_role_with_a_comma_in_its_name_keeps_a_server_note(
    store: SQLStore,
) -> None:
    memory = MemoryConfig(enabled=True)
    book = MemoryBook(
        store.notes, settings=lambda: memory, authorized_roles=lambda: ("Mods, Team",)
    )
    call = ToolCall("c1", "remember", {"text": "deploys on Fridays", "scope": "guild"})
    await called_by_alice(store, call, memory=book)
    (note,) = await store.notes.list_notes("salon")
    assert (note.scope.key, note.trusted) == ("900", True)
    assert note.provenance.message_id == "m1"
