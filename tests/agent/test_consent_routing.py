"""Where the link that connects a person's account (a per_user OAuth server's consent
flow) goes: to them alone, in a direct message, with one line in the channel; on a platform
without direct messages the channel says what the operator runs instead, and carries no
link. The OAuth side is tests/platforms/test_discord_oauth_consent.py."""

from __future__ import annotations

from typing import Any

from salon.agent.conversation.toolrunner import ToolRunner
from salon.model import Participant, ToolCall, ToolResult, ToolSpec
from salon.platforms.base import Capability
from salon.platforms.memory import MemoryPlatform
from salon.store.sql import SQLStore
from salon.tools.caller import Caller
from salon.tools.link import Consent, Elicit
from tests.conftest import bot_config

LINK = "https://auth.example/authorize?state=s3cret"
INSTEAD = "the operator connects it with salon tools auth tracker --person memory:alice"
ALICE = Participant("alice", "Alice")


class Unconnected:
    """A tool server on which nobody has connected an account: each call sends the link."""

    def __init__(self) -> None:
        self.spec = ToolSpec("whoami", "tracker", "whoami", "who you are", {"type": "object"})
        self.sent: list[bool] = []

    def specs(self) -> list[ToolSpec]:
        return [self.spec]

    def get(self, name: str) -> ToolSpec | None:
        return self.spec if name == "whoami" else None

    async def call(
        self,
        call: ToolCall,
        *,
        caller: Caller | None = None,
        progress: Any = None,
        elicit: Elicit | None = None,
        consent: Consent | None = None,
    ) -> ToolResult:
        assert consent is not None
        self.sent.append(await consent("tracker", LINK, INSTEAD))
        return ToolResult(call.id, "not authorized yet", is_error=True)


class NoDirectMessages(MemoryPlatform):
    capabilities = frozenset(Capability) - {Capability.DIRECT_MESSAGES}


async def run(platform: MemoryPlatform, store: SQLStore) -> Unconnected:
    tools = Unconnected()
    config = bot_config(default_tool_policy="allow", tool_output_visible=False)
    runner = ToolRunner(bot="salon", config=config, tools=tools, store=store, log=None)
    await runner.run(platform, platform.channel(), ALICE, [ToolCall("c1", "whoami", {})], None)
    return tools


async def test_the_link_goes_to_the_person_alone_and_the_channel_hears_where(
    store: SQLStore,
) -> None:
    platform = MemoryPlatform(bot_name="Salon")
    tools = await run(platform, store)
    assert tools.sent == [True]
    ((to, text),) = platform.direct
    assert to == ALICE
    assert LINK in text
    said = [m.text for m in platform.sent]
    assert said == ["Alice: I sent you a link in a DM to connect your tracker account."]


async def test_without_direct_messages_the_channel_says_what_the_operator_runs(
    store: SQLStore,
) -> None:
    platform = NoDirectMessages(bot_name="Salon")
    tools = await run(platform, store)
    assert tools.sent == [False]
    assert platform.direct == []
    said = [m.text for m in platform.sent]
    assert said == [f"Alice: tracker needs your own account; {INSTEAD}."]
    assert all("https://" not in line for line in said)
