"""The JSONL tool-use log: hourly files, durable writes, reseeding after a restart."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from salon.model import ToolCall, ToolResult
from salon.tools.log import ToolLog, ToolRecord, record_from, record_line

T0 = datetime(2026, 11, 22, 9, 59, 30, tzinfo=UTC)


def record(when: datetime, n: int, channel: str = "irc:#salon") -> ToolRecord:
    call = ToolCall(f"c{n}", "echo", {"text": str(n)})
    return ToolRecord(when, channel, f"m{n}", call, ToolResult(f"c{n}", str(n)))


def test_one_file_per_bot_channel_and_hour(tmp_path: Path) -> None:
    log = ToolLog(tmp_path, "ann")
    log.append(record(T0, 1))
    log.append(record(T0 + timedelta(minutes=1), 2))
    old = tmp_path / "ann" / "irc_salon" / "2026-11-22T09.jsonl"
    new = tmp_path / "ann" / "irc_salon" / "2026-11-22T10.jsonl"
    assert [json.loads(x)["call"]["id"] for x in old.read_text().splitlines()] == ["c1"]
    assert [json.loads(x)["call"]["id"] for x in new.read_text().splitlines()] == ["c2"]


def test_restart_reseeds_recent_calls_and_skips_bad_lines(tmp_path: Path) -> None:
    log = ToolLog(tmp_path, "ann")
    log.append(record(T0 - timedelta(hours=5), 0))
    log.append(record(T0, 1))
    log.append(record(T0, 2, channel="terminal:local"))
    with (tmp_path / "ann" / "irc_salon" / "2026-11-22T09.jsonl").open("a") as handle:
        handle.write("{not json\n")
    reborn = ToolLog(tmp_path, "ann")
    assert reborn.seed(hours=2, now=T0) == 2
    assert [r.call.id for r in reborn.for_channel("irc:#salon", None)] == ["c1"]
    assert reborn.for_channel("terminal:local", None)[0].result == ToolResult("c2", "2")


def test_calls_older_than_the_context_are_dropped(tmp_path: Path) -> None:
    log = ToolLog(tmp_path, "ann")
    for n in range(3):
        log.append(record(T0 + timedelta(minutes=n), n))
    assert len(log.for_channel("irc:#salon", T0 + timedelta(seconds=90))) == 1
    assert len(log.for_channel("irc:#salon", None)) == 1  # dropped for good


def test_a_lone_surrogate_in_a_call_is_logged_as_a_replacement_character(tmp_path: Path) -> None:
    # The provider boundary cleans what models say; a call from anywhere else is logged too.
    log = ToolLog(tmp_path, "ann")
    call = ToolCall("c1", "ec\ud800ho", {"text": "half \ud83d", "k\udc00": ["\udfff"]})
    log.append(ToolRecord(T0, "irc:#salon", "m1", call, ToolResult("c1", "ok")))
    (line,) = (tmp_path / "ann" / "irc_salon" / "2026-11-22T09.jsonl").read_text().splitlines()
    logged = json.loads(line)["call"]
    assert logged["name"] == "ec\ufffdho"
    assert logged["arguments"] == {"text": "half \ufffd", "k\ufffd": ["\ufffd"]}
    (remembered,) = log.for_channel("irc:#salon", None)
    assert remembered.call.arguments == logged["arguments"]  # as the next context shows it


def test_the_thoughts_of_the_turn_that_made_a_call_survive_a_restart(tmp_path: Path) -> None:
    from dataclasses import replace

    from salon.model import Thought

    thought = Thought("anthropic", "claude-x", text="look it up", signature="c2lnbmVk")
    hidden = Thought("anthropic", "claude-x", redacted="b3BhcXVl")
    log = ToolLog(tmp_path, "ann")
    log.append(replace(record(T0, 1), thoughts=(thought, hidden)))
    log.append(record(T0, 2))  # a later call of the same turn: its thoughts went with c1
    reborn = ToolLog(tmp_path, "ann")
    assert reborn.seed(hours=1, now=T0) == 2
    first, second = reborn.for_channel("irc:#salon", None)
    assert first.thoughts == (thought, hidden)
    assert second.thoughts == ()


def test_a_line_written_before_thoughts_were_kept_reads_without_them(tmp_path: Path) -> None:
    line = record_line(record(T0, 1))
    assert "thoughts" not in json.loads(line)  # nothing new on a record without them
    assert record_from(line).thoughts == ()


def test_the_words_of_the_turn_that_made_a_call_survive_a_restart(tmp_path: Path) -> None:
    from dataclasses import replace

    log = ToolLog(tmp_path, "ann")
    log.append(replace(record(T0, 1), said="Let me look.", posted_as=("m7", "m8")))
    log.append(replace(record(T0, 2), same_turn=True))
    reborn = ToolLog(tmp_path, "ann")
    assert reborn.seed(hours=1, now=T0) == 2
    first, second = reborn.for_channel("irc:#salon", None)
    assert (first.said, first.posted_as, first.same_turn) == ("Let me look.", ("m7", "m8"), False)
    assert (second.said, second.posted_as, second.same_turn) == ("", (), True)
    plain = json.loads(record_line(record(T0, 3)))
    assert {"said", "posted_as", "same_turn"}.isdisjoint(plain)  # nothing new without them
