"""A tool call's reach: what it read with its askers' rights, kept with it in the tool log
(sealed calls too, across a restart), and the fixed placeholder that stands for it."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from salon.agent.activation import joint
from salon.context.records import placeholder
from salon.model import ChannelRef, Participant, Reach, ToolCall, ToolResult
from salon.tools import servers
from salon.tools.log import ToolLog, ToolRecord, record_from, record_line
from salon.tools.reach import BUILTIN_SERVER, derived, reach_of

T0 = datetime(2026, 11, 22, 9, 59, 30, tzinfo=UTC)
HERE = ChannelRef("discord", "10", name="general", guild_id="1")
ALICE, BOB = (
    Participant("200", "Alice", roles=("mods", "x")),
    Participant("201", "Bob", roles=("x",)),
)


def lookup(where: str = "12", *, error: bool = False) -> tuple[ToolCall, ToolResult]:
    call = ToolCall("c1", "get_recent_messages", {"in_channel": where, "limit": 5})
    return call, ToolResult("c1", "[..] <Carol> the launch slips", is_error=error)


def test_reading_another_channel_reaches_it_and_is_shown_by_its_name() -> None:
    call, result = lookup()
    reach = reach_of(
        "get_recent_messages",
        call,
        result,
        channel=HERE,
        askers=[ALICE],
        names={"discord:12": "#staff"},
    )
    assert reach == Reach(("200",), "(Alice looked something up in #staff)", ("discord:12",))


def test_this_channel_a_refusal_and_other_servers_tools_reach_nothing() -> None:
    for where in ("10", "discord:10", ""):
        call, result = lookup(where)
        assert reach_of("get_recent_messages", call, result, channel=HERE, askers=[ALICE]) is None
    call, result = lookup(error=True)
    assert reach_of("get_recent_messages", call, result, channel=HERE, askers=[ALICE]) is None
    call, result = lookup()
    assert reach_of(None, call, result, channel=HERE, askers=[ALICE]) is None


def test_memory_tools_reach_notes_whatever_they_returned() -> None:
    found = ToolResult("c1", 'Notes (…):\nNote 3 (person, …): "x"\nNote 4 (bot, …): "y"')
    recall = ToolCall("c1", "recall", {"query": "locker"})
    reach = reach_of("recall", recall, found, channel=HERE, askers=[ALICE, BOB])
    assert reach == Reach(("200", "201"), "(Alice and Bob looked up 2 notes)", (), True, True)
    refused = ToolResult("c1", "only the operator may keep bot notes", is_error=True)
    kept = ToolCall("c1", "remember", {"text": "a secret", "scope": "bot"})
    reach = reach_of("remember", kept, refused, channel=HERE, askers=[BOB])
    assert reach is not None
    assert (reach.notes, reach.shown) == (True, "(Bob had a note kept)")


def test_a_placeholder_has_no_arguments_and_the_fixed_line_for_a_result() -> None:
    call, result = lookup()
    reach = Reach(("200",), "(Alice looked something up in #staff)", ("discord:12",))
    hidden = placeholder(ToolRecord(T0, HERE.key, "m1", call, result, reach=reach))
    assert hidden.call.arguments == {}
    assert hidden.result == ToolResult("c1", "(Alice looked something up in #staff)")


def test_reach_and_seals_survive_a_restart(tmp_path: Path) -> None:
    log = ToolLog(tmp_path, "ann")
    call, result = lookup()
    reach = Reach(("200",), "(Alice looked something up in #12)", ("discord:12",))
    kept = ToolRecord(T0, HERE.key, "m1", call, result, reach=reach)
    other = ToolRecord(T0 + timedelta(seconds=1), HERE.key, "m1", ToolCall("c2", "x", {}), result)
    log.append(kept)
    log.append(other)
    log.seal(kept, now=T0 + timedelta(minutes=1))
    log.seal(kept)  # once is enough
    files = list((tmp_path / "ann").glob("*/*.jsonl"))
    assert sum(f.read_text().count('"sealed"') for f in files) == 1
    reborn = ToolLog(tmp_path, "ann")
    assert reborn.seed(hours=2, now=T0) == 2
    first, second = reborn.for_channel(HERE.key, None)
    assert (first.reach, reborn.sealed(first)) == (reach, True)
    assert (second.reach, reborn.sealed(second)) == (None, False)


def test_a_call_logged_before_reaches_were_kept_has_it_worked_out(tmp_path: Path) -> None:
    call, result = lookup()
    line = record_line(ToolRecord(T0, HERE.key, "m1", call, result))
    assert "reach" not in json.loads(line)
    old = derived(record_from(line))
    assert old.reach == Reach((), "(someone looked something up in #12)", ("discord:12",))


def test_a_batch_reads_with_no_ones_own_rights_and_the_roles_all_hold() -> None:
    assert joint((ALICE,)) is ALICE
    both = joint((ALICE, BOB))
    assert (both.id, both.name, both.roles) == ("", "Alice and Bob", ("x",))


def test_the_builtin_server_is_named_as_the_hub_names_it() -> None:
    assert BUILTIN_SERVER == servers.BUILTIN_SERVER
