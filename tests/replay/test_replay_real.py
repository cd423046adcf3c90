"""``salon replay`` on real providers: the real Anthropic SDK asks the scripted loopback LLM
server (its billing fake bills the prompt cache), the cost is estimated before anything is
sent and ``--max-cost`` refuses above it; still no tool is offered and no platform is
contacted."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import pytest

from fakes.billing import CacheBilling
from fakes.llm_server import LLMServer, Scripted
from salon.cli import main
from tests.replay.rooms import LOG, json_lines, nothing_connected, write_config


@pytest.fixture
def room(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("REPLAY_TEST_KEY", "k-test")
    (tmp_path / "room.log").write_text(LOG)
    return tmp_path


async def _main(*args: str) -> int:
    """The command in a thread of its own (it runs its own event loop) while the loopback
    server answers in this one."""
    return await asyncio.to_thread(main, ["replay", *args])


async def test_a_real_run_asks_the_provider_bills_what_it_reports_and_times_it(
    room: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    async with LLMServer(billing=CacheBilling()) as llm:
        llm.queue(Scripted(chunks=["Mount it with ", "udisksctl."]), "umount /media/usb")
        write_config(room, listener.getsockname()[1], "Be kind. " * 600, llm=llm.base_url)
        out = room / "o.jsonl"
        code = await _main(str(room), "--bot", "helper", str(room / "room.log"),
                           "--as", "Helper", "--json", str(out))  # fmt: skip
        assert code == 0
        requests = list(llm.requests)
    spoke = [r for r in json_lines(out) if r.get("decision") == "speak"]
    assert [(r["index"], r["answer"]) for r in spoke] == [
        (1, "Mount it with udisksctl."), (5, "umount /media/usb"),
    ]  # fmt: skip
    assert len(requests) == 2
    assert all(not r.body.get("tools") for r in requests)  # no tool is offered
    # Live: the replayed answer, not the recorded line, is in the room the second call saw.
    assert "udisksctl" in str(requests[1].body["messages"])
    assert "look in /media" not in str(requests[1].body["messages"])
    assert spoke[0]["cache_write_tokens"] > 1024  # as the vendor (its fake) billed it
    assert spoke[1]["cache_read_tokens"] > 1024
    assert all(r["cost_usd"] > 0 and r["first_token_s"] is not None for r in spoke)
    summary = next(r for r in json_lines(out) if r.get("summary"))
    assert summary["first_token_s_median"] is not None
    err = capsys.readouterr().err
    assert "estimated cost: at most $" in err
    assert nothing_connected(listener)


async def test_max_cost_refuses_to_start_above_the_estimate(
    room: Path, listener: socket.socket, capsys: pytest.CaptureFixture[str]
) -> None:
    async with LLMServer() as llm:
        write_config(room, listener.getsockname()[1], "Be kind. " * 600, llm=llm.base_url)
        code = await _main(str(room), "--bot", "helper", str(room / "room.log"),
                           "--as", "Helper", "--max-cost", "0.001")  # fmt: skip
        assert code == 2
        assert llm.requests == []
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("error: the estimated cost, at most $0.0")
    assert err[-1].endswith("is above --max-cost $0.001: nothing was sent")
    assert nothing_connected(listener)


async def test_under_max_cost_the_replay_runs(room: Path, listener: socket.socket) -> None:
    async with LLMServer() as llm:
        write_config(room, listener.getsockname()[1], llm=llm.base_url)
        code = await _main(str(room), "--bot", "helper", str(room / "room.log"),
                           "--as", "Helper", "--max-cost", "5")  # fmt: skip
        assert code == 0
        assert len(llm.requests) == 2


async def test_a_missing_key_is_refused_before_anything_is_sent(
    room: Path,
    listener: socket.socket,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.delenv("REPLAY_TEST_KEY")
    async with LLMServer() as llm:
        write_config(room, listener.getsockname()[1], llm=llm.base_url)
        assert await _main(str(room), "--bot", "helper", str(room / "room.log")) == 2
        assert llm.requests == []
    err = capsys.readouterr().err.strip()
    assert "REPLAY_TEST_KEY is not set" in err
    assert len(err.splitlines()) == 1


async def test_a_failing_provider_is_the_rows_error_not_the_replays_end(
    room: Path, listener: socket.socket
) -> None:
    async with LLMServer() as llm:
        llm.queue(Scripted(status=500), "fine")
        write_config(room, listener.getsockname()[1], llm=llm.base_url)
        out = room / "o.jsonl"
        code = await _main(str(room), "--bot", "helper", str(room / "room.log"),
                           "--as", "Helper", "--json", str(out))  # fmt: skip
        assert code == 0
    spoke = [r for r in json_lines(out) if r.get("decision") == "speak"]
    assert spoke[0]["error"]
    assert "provider failed" in spoke[0]["why"]
    assert spoke[1]["answer"] == "fine"
    assert next(r for r in json_lines(out) if r.get("summary"))["errors"] == 1
