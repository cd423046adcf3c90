"""The speak gate and the context evaluator in a replay: a dry run takes the canned
model's verdict and says so; a real run asks them, and their calls are counted."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from fakes.llm_server import LLMServer, Recorded, Scripted
from salon.cli import main
from tests.replay.rooms import LOG, json_lines, nothing_connected, write_config

STEPS = """\
reply_on_random: 1
speak_gate: {enabled: true}
context_evaluator: {enabled: true}
"""


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REPLAY_TEST_KEY", "k-test")
    (tmp_path / "room.log").write_text(LOG)
    return tmp_path


def _by_index(path: Path) -> dict[int, dict[str, Any]]:
    return {r["index"]: r for r in json_lines(path) if "decision" in r}


def _kind(request: Recorded) -> str:
    if "would Helper reply next" in str(request.body.get("system")):
        return "gate"
    return "evaluate" if "Newest request:" in str(request.body["messages"]) else "answer"


def _gate_says_no(request: Recorded) -> Scripted:
    kind = _kind(request)
    return Scripted(text={"gate": "No.", "evaluate": '{"keep": [1]}'}.get(kind, "ok"))


def test_a_dry_run_takes_the_canned_verdicts_and_bills_their_calls(
    room: Path, listener: socket.socket
) -> None:
    write_config(room, listener.getsockname()[1], extra=STEPS)
    out = room / "o.jsonl"
    assert main(["replay", str(room), "--bot", "helper", str(room / "room.log"), "--as",
                 "Helper", "--dry-run", "--json", str(out)]) == 0  # fmt: skip
    rows = _by_index(out)
    gated = rows[4]  # "thanks to the helpers": addressed to nobody
    assert gated["decision"] == "speak"
    assert gated["why"].startswith("random (1 in 1); speak gate: yes (the canned model, dry run)")
    assert "evaluator kept 5 of 5 (the canned model keeps all, dry run)" in gated["why"]
    assert 0 < gated["side_cost_usd"] < gated["cost_usd"]
    addressed = rows[1]
    assert "speak gate" not in addressed["why"]  # a mention never asks the gate
    assert addressed["why"].startswith("mention; evaluator kept 3 of 3")
    assert nothing_connected(listener)


async def test_a_real_run_asks_the_gate_and_the_evaluator_and_counts_their_cost(
    room: Path, listener: socket.socket
) -> None:
    out = room / "o.jsonl"
    async with LLMServer() as llm:
        llm.respond = _gate_says_no
        write_config(room, listener.getsockname()[1], llm=llm.base_url, extra=STEPS)
        code = await asyncio.to_thread(
            main, ["replay", str(room), "--bot", "helper", str(room / "room.log"), "--as",
                   "Helper", "--json", str(out)],
        )  # fmt: skip
        assert code == 0
        kinds = [_kind(r) for r in llm.requests]
        answers = [r for r in llm.requests if _kind(r) == "answer"]
    assert kinds.count("gate") == 3  # lines 0, 4 and 6: nobody addressed the bot
    # At line 1 the roll's breakpoint protects all but the newest: nothing to judge.
    assert kinds.count("evaluate") == 1
    assert len(answers) == 2
    rows = _by_index(out)
    assert rows[0]["decision"] == "silent"
    assert rows[0]["why"] == "random (1 in 1); speak gate: no ('No.')"
    assert rows[0]["cost_usd"] == rows[0]["side_cost_usd"] > 0  # the gate's call, billed
    assert rows[1]["why"] == "mention"
    assert rows[5]["why"] == "mention; evaluator kept 2 of 5"
    assert "thanks to the helpers" not in str(answers[1].body["messages"])  # dropped
    assert "and unmount?" in str(answers[1].body["messages"])
    assert rows[5]["cost_usd"] > rows[5]["side_cost_usd"] > 0
    summary = next(r for r in json_lines(out) if r.get("summary"))
    assert summary["spoke"] == 2
    assert summary["side_cost_usd"] == pytest.approx(
        sum(r["side_cost_usd"] for r in rows.values()), abs=1e-6
    )
    assert nothing_connected(listener)
