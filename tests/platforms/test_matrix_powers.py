"""The rule ``salon check --live`` applies to a Matrix room's ``m.room.power_levels``: what
the bot's level keeps it from doing, with the spec's defaults for absent keys."""

from __future__ import annotations

from typing import Any

from salon.platforms.matrix.powers import power_problems

BOT = "@salon:example.org"
ALICE = "@alice:example.org"
BOB = "@bob:example.org"


def problems(levels: dict[str, Any] | None, **kwargs: Any) -> list[str]:
    return power_problems(
        levels, bot=BOT, approval_level=kwargs.pop("approval_level", 50), **kwargs
    )


def test_the_defaults_of_a_new_room_only_keep_the_bot_from_redacting() -> None:
    """A level-0 bot in a room whose power levels give only the creator 100: messages and
    reactions need events_default (0), redacting another's message needs redact (50)."""
    (line,) = problems({"users": {ALICE: 100}})
    assert "redact" in line
    assert "needs 50" in line
    assert "has 0" in line
    assert "m continue" in line


def test_a_bot_at_the_redact_level_has_no_problem() -> None:
    assert problems({"users": {ALICE: 100, BOT: 50}}) == []


def test_an_explicit_redact_level_and_the_redaction_event_level_both_count() -> None:
    assert problems({"users": {ALICE: 100, BOT: 10}, "redact": 10}) == []
    (line,) = problems(
        {"users": {ALICE: 100, BOT: 10}, "redact": 10, "events": {"m.room.redaction": 20}}
    )
    assert "needs 20" in line


def test_messages_and_reactions_follow_events_then_events_default() -> None:
    found = problems({"users": {ALICE: 100, BOT: 50}, "events_default": 60})
    assert len(found) == 3  # sending an m.room.redaction needs events_default too
    assert "send messages" in found[0]
    assert "react" in found[1]
    assert "redact" in found[2]
    found = problems({"users": {ALICE: 100, BOT: 50}, "events": {"m.reaction": 75}})
    assert len(found) == 1
    assert "react" in found[0]
    assert "needs 75" in found[0]
    found = problems(
        {"users": {ALICE: 100, BOT: 50}, "events_default": 60, "events": {"m.room.message": 0}}
    )
    assert len(found) == 2
    assert "react" in found[0]
    assert "redact" in found[1]


def test_users_default_gives_the_bot_its_level() -> None:
    assert problems({"users": {ALICE: 100}, "users_default": 50}) == []


def test_a_room_without_power_levels_gives_the_creator_100_and_the_rest_0() -> None:
    (line,) = problems(None, creators={ALICE})
    assert "redact" in line
    assert problems(None, creators={BOT, ALICE}) == []


def test_a_creator_absent_from_users_outranks_every_level() -> None:
    """Room version 12: creators are not listed in ``users`` and outrank every level."""
    levels = {"users": {ALICE: 100}, "events_default": 100, "redact": 100}
    assert problems(levels, creators={BOT}) == []
    assert problems({"users": {BOT: 50}}, creators={ALICE}, approval_level=1000) == []


def test_no_member_at_the_approval_level_is_named() -> None:
    levels = {"users": {ALICE: 40, BOT: 50}}
    (line,) = problems(levels)
    assert "approval_power_level" in line
    assert "50" in line
    assert problems(levels, approval_level=40) == []


def test_the_bot_itself_and_people_who_left_are_no_approvers() -> None:
    levels = {"users": {ALICE: 100, BOT: 100}}
    assert problems(levels, members={BOT, ALICE, BOB}) == []
    (line,) = problems(levels, members={BOT, BOB})  # alice left
    assert "approval_power_level" in line
    (line,) = problems({"users": {BOT: 100}}, members={BOT, BOB})
    assert "approval_power_level" in line


def test_levels_written_as_strings_count_as_numbers_and_junk_as_the_default() -> None:
    assert problems({"users": {ALICE: "100", BOT: "50"}, "redact": "50"}) == []
    (line,) = problems({"users": {ALICE: 100, BOT: "high"}})
    assert "has 0" in line
