"""``--judge``: a blind pairwise preference between two arms' answers, each pair asked
twice with the order swapped, against the loopback LLM server scripted to prefer one
side (or one position)."""

from __future__ import annotations

import asyncio
import re
import socket
from pathlib import Path

import pytest

from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.cli import main
from tests.replay.rooms import LOG, json_lines, nothing_connected, write_config


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REPLAY_TEST_KEY", "k-test")
    (tmp_path / "room.log").write_text(LOG)
    (tmp_path / "good.yaml").write_text('system_prompt: "Be good."\n')
    (tmp_path / "meh.yaml").write_text('system_prompt: "Be meh."\n')
    return tmp_path


def _judged(request: Recorded) -> bool:
    return "compare two replies" in str(request.body.get("system"))


def _prefers_good(request: Recorded) -> Scripted:
    """Answers by the arm's system prompt; as the judge, the reply that is the good one."""
    if not _judged(request):
        good = "Be good." in str(request.body.get("system"))
        return Scripted(text="GOOD: udisksctl mount" if good else "so-so")
    asked = str(request.body["messages"])
    second = asked.index("Reply 2:")
    return Scripted(text="1" if "GOOD" in asked[:second] else "2")


def _prefers_first(request: Recorded) -> Scripted:
    if not _judged(request):
        return _prefers_good(request)
    return Scripted(text="Reply 1 is better.")


async def _replay(room: Path, llm: LLMServer, port: int, *extra: str) -> int:
    write_config(room, port, llm=llm.base_url, judge=True)
    args = [
        "replay", str(room), "--bot", "helper", str(room / "room.log"), "--as", "Helper",
        "--arm", f"good={room / 'good.yaml'}", "--arm", f"meh={room / 'meh.yaml'}", *extra,
    ]  # fmt: skip
    return await asyncio.to_thread(main, args)


async def test_the_judge_prefers_one_arm_in_both_orders(
    room: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    out = room / "o.jsonl"
    async with LLMServer() as llm:
        llm.respond = _prefers_good
        code = await _replay(room, llm, listener.getsockname()[1], "--judge", "judge",
                             "--json", str(out))  # fmt: skip
        assert code == 0
        asks = [r for r in llm.requests if _judged(r)]
    assert len(asks) == 4  # two messages both arms answered, each asked twice
    assert all(r.body["model"] == "claude-haiku-4-5" for r in asks)
    asked = str(asks[0].body)  # blind: the arms are not named
    assert "good" not in asked
    assert "meh" not in asked
    # The order is swapped on the second ask.
    first, second = (str(r.body["messages"]) for r in asks[:2])
    assert first.index("GOOD") < first.index("Reply 2:")
    assert second.index("GOOD") > second.index("Reply 2:")
    rows = json_lines(out)
    judged = [r for r in rows if r.get("judge")]
    assert [(r["index"], r["preferred"]) for r in judged] == [(1, "good"), (5, "good")]
    summary = next(r for r in rows if r.get("judge_summary"))
    assert summary["wins"] == {"good": 2, "meh": 0}
    assert (summary["split"], summary["agreement"]) == (0, 1.0)
    assert summary["cost_usd"] > 0
    printed = capsys.readouterr()
    assert re.search(r"meh\s.*\s2\s+0 vs 2\s+100\.0%", printed.out)
    assert "judge judge: good vs meh on 2 messages: good preferred 2, meh 0" in printed.out
    assert "agreement 100%" in printed.out
    assert "estimated cost: at most" in printed.err
    assert "judge $" in printed.err  # the judge's asks are in the estimate
    assert nothing_connected(listener)


async def test_a_judge_that_prefers_a_position_shows_as_splits(
    room: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    out = room / "o.jsonl"
    async with LLMServer() as llm:
        llm.respond = _prefers_first
        code = await _replay(room, llm, listener.getsockname()[1], "--judge", "judge",
                             "--json", str(out))  # fmt: skip
        assert code == 0
    summary = next(r for r in json_lines(out) if r.get("judge_summary"))
    assert (summary["split"], summary["agreement"], summary["wins"]) == (
        2, 0.0, {"good": 0, "meh": 0},
    )  # fmt: skip
    assert "agreement 0%" in capsys.readouterr().out


async def test_the_judge_wants_real_answers(
    room: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    async with LLMServer() as llm:
        code = await _replay(room, llm, listener.getsockname()[1], "--judge", "judge",
                             "--dry-run")  # fmt: skip
        assert code == 2
        assert llm.requests == []
    err = capsys.readouterr().err.strip()
    assert (
        err
        == "error: (command line): --judge: the judge compares real answers: run without --dry-run"
    )
