"""A tool server's question on IRC: asked in the channel a field at a time, answered by the
requester's replies (nobody else's)."""

from __future__ import annotations

from dataclasses import replace

from fakes.irc import IrcServer
from salon.llm import FakeProvider, FakeReply
from salon.model import ToolCall
from tests.platforms.test_irc import BOT, Start, _close_people, human, ircd, start_bot
from tests.tools.test_elicitation import asking_server
from tests.tools.test_mcp_http import LoopbackServer, http_spec

__all__ = ["_close_people", "asking_server", "ircd", "start_bot"]  # the fixtures used


async def test_a_servers_question_is_asked_in_the_channel_and_answered_by_the_requester(
    ircd: IrcServer, start_bot: Start, asking_server: LoopbackServer
) -> None:
    spec = replace(http_spec("kit", asking_server.url), elicitation=True)
    provider = FakeProvider([FakeReply(calls=(ToolCall("c1", "book", {}),)), "Booked."])
    await start_bot(provider, extra_servers=[spec])
    alice = await human(ircd)
    bob = await human(ircd, "bob")
    await alice.say("#salon", f"{BOT}: book a table")
    await alice.privmsgs_from(BOT, 1)  # may I run book? (its policy asks first)
    await alice.say("#salon", "yes")
    said = await alice.privmsgs_from(BOT, 3)
    assert said[1:] == [
        "alice: kit asks: Which booking?",
        "alice: Day (Which day)? Answer text, or decline.",
    ], "\n".join(alice.lines[-12:])
    await bob.say("#salon", "sunday")  # not bob's question
    await alice.say("#salon", f"{BOT}: friday")
    said = await alice.privmsgs_from(BOT, 4)
    assert (
        said[3] == "alice: Guests (How many people)? Answer a whole number; skip for 2, or decline."
    )
    await alice.say("#salon", "4")
    await alice.privmsgs_from(BOT, 5)
    await alice.say("#salon", "skip")
    await alice.privmsgs_from(BOT, 6)
    await alice.say("#salon", "no")
    said = await alice.privmsgs_from(BOT, 7)
    assert said[6] == "Booked."
    results = [p for m in provider.requests[1].messages for p in m.parts if hasattr(p, "result")]
    assert [p.result.content for p in results] == [
        'booked {"day":"friday","guests":4,"room":"small","confirm":false}'
    ]
