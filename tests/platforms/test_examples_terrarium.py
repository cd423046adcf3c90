"""Terrarium (``examples/terrarium``, seed 004) on the fakes: Terra on a real miniircd,
the OpenAI SDK against the loopback LLM server as the local model server, which streams
its reasoning inline as ``<think>…</think>`` the way a server without a reasoning parser
does."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from fakes.irc import Human, IrcServer
from fakes.llm_server import LLMServer, Scripted
from tests.conftest import ServeApp
from tests.platforms.test_examples import copy_example, serve_example

ANSWER = "bob said the deploy broke on the cache migration."
THOUGHT = ("<think>PLUGH: bob talked about", " the deploy, I should", " summarise</th", "ink>")


@pytest.fixture
async def ircd() -> AsyncIterator[IrcServer]:
    server = IrcServer()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def people(ircd: IrcServer) -> AsyncIterator[tuple[Human, Human]]:
    alice, bob = Human("alice", ircd.port), Human("bob", ircd.port)
    try:
        for person in (alice, bob):
            await person.connect()
            await person.join("#terrarium")
        yield alice, bob
    finally:
        await alice.close()
        await bob.close()


async def test_terrarium_answers_from_the_chat_log_and_only_its_answer_reaches_irc(
    ircd: IrcServer,
    people: tuple[Human, Human],
    llm_server: LLMServer,
    serve_app: ServeApp,
    tmp_path: Path,
) -> None:
    alice, bob = people

    def on_fakes(data: dict[str, Any]) -> None:
        data["providers"]["agent"].update(base_url=llm_server.base_url + "/v1", retries=0)
        irc = data["platforms"]["irc"]
        irc.update(server="127.0.0.1", port=ircd.port, tls=False, flood_burst=50)

    await alice.send("TOPIC #terrarium :deploy day")  # alice opened the channel: she may
    await alice.expect(r"TOPIC #terrarium :deploy day")
    root = copy_example("terrarium", tmp_path, {"bots/terra.yaml": on_fakes})
    app = await serve_example(root, "terra", serve_app, {})
    await alice.expect(r":Terra!\S+ JOIN :?#terrarium", within=15)  # Terra is in the channel
    carol = Human("carol", ircd.port)
    await carol.connect()
    await carol.join("#terrarium")  # a join Terra sees: the <irc_logs> feed shows it
    await carol.close()
    await alice.say("#terrarium", ".ping")  # answered by Terra itself, no model
    assert await alice.privmsgs_from("Terra", 1) == ["alice: pong"]
    seen = len(alice.lines)
    llm_server.queue(
        Scripted(tool_calls=[("call_1", "search_chat_logs", {"query": "deploy"})]),
        Scripted(chunks=[*THOUGHT, "\n\n", ANSWER]),
    )
    await bob.say("#terrarium", "the deploy broke on the cache migration")
    await alice.say("#terrarium", "lunch anyone?")
    await alice.say("#terrarium", ".terrarium what did bob say about the deploy?")
    assert await alice.privmsgs_from("Terra", 1, after=seen) == [ANSWER]
    await app.agent.wait_idle()
    assert await alice.privmsgs_from("Terra", 1, after=seen) == [ANSWER]  # and nothing after
    assert "PLUGH" not in "\n".join(alice.lines)  # no reasoning in any line, notice or dot
    first, second = llm_server.requests
    assert first.body["model"] == "GLM-4.5-Air-4bit"
    assert first.body["temperature"] == 0.8
    assert first.body["chat_template_kwargs"] == {"enable_thinking": True}
    asked = json.dumps(first.body["messages"])
    # the channel's lines as the seed's chat log: [time] <nick> message
    assert re.search(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] <bob> the deploy broke", asked)
    system = first.body["messages"][0]["content"]
    assert "channel #terrarium" in system
    assert "(topic: deploy day)" in system
    assert "alice" in system.split("Here now:")[1]  # {{users}}
    assert "<irc_logs>" in system
    assert "carol joined" in system
    assert "pong" not in asked  # the dot command went to no model
    assert "what did bob say about the deploy?" in asked
    result = next(m for m in second.body["messages"] if m["role"] == "tool")
    assert "<bob> the deploy broke on the cache migration" in result["content"]
    assert "PLUGH" not in json.dumps([r.body for r in llm_server.requests])


async def test_terrariums_own_env_file_works_as_is(
    ircd: IrcServer,
    people: tuple[Human, Human],
    serve_app: ServeApp,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The seed's environment variables, as its .env sets them, read by the example; its
    AGENT_API_URL without /v1 reaches a server that serves only under /v1 (as vLLM does)."""
    alice, bob = people
    async with LLMServer(only_under="/v1") as llm:
        seed_env = {
            "AGENT_API_URL": llm.base_url,  # the seed's http://localhost:8080: no /v1
            "AGENT_TEMPERATURE": "0.5",
            "AGENT_MAX_TOKENS": "512",
            "IRC_SERVER": "127.0.0.1",
            "IRC_PORT": str(ircd.port),
            "IRC_NICK": "Terrabot",
            "IRC_CHANNELS": "#terrarium,#test",
            "COMMAND_PREFIX": "!",
            "MAX_CONTEXT_MESSAGES": "2",
            "DB_PATH": "./data/irc_logs.db",
        }
        for name, value in seed_env.items():
            monkeypatch.setenv(name, value)

        def no_tls(data: dict[str, Any]) -> None:  # the fake has none; 6667 would be plain
            data["platforms"]["irc"].update(tls=False, flood_burst=50)

        root = copy_example("terrarium", tmp_path, {"bots/terra.yaml": no_tls})
        await serve_example(root, "terra", serve_app, {})
        await alice.expect(r":Terrabot!\S+ JOIN :?#terrarium", within=15)
        llm.queue(ANSWER)
        await bob.say("#terrarium", "PLUGH an old line")
        await bob.say("#terrarium", "the deploy broke on the cache migration")
        await alice.expect(r"PRIVMSG #terrarium :the deploy broke")  # relayed: in order
        await alice.say("#terrarium", "!terrarium what did bob say about the deploy?")
        assert await alice.privmsgs_from("Terrabot", 1) == [ANSWER]
    refused, asked = llm.requests
    assert (refused.path, asked.path) == ("/chat/completions", "/v1/chat/completions")
    assert asked.body["temperature"] == 0.5
    assert asked.body["max_tokens"] == 512
    turns = json.dumps(asked.body["messages"][1:])  # the system prompt holds <irc_logs>
    assert "the deploy broke" in turns
    assert "PLUGH" not in turns  # MAX_CONTEXT_MESSAGES=2: bob's last line and the question
    assert (root / "data" / "irc_logs.db").is_file()


async def test_the_live_check_finds_the_missing_v1_of_agent_api_url(tmp_path: Path) -> None:
    """``salon check --live`` with the seed's AGENT_API_URL: what it found, which URL
    answers, and the answer."""
    root = copy_example("terrarium", tmp_path)
    async with LLMServer(only_under="/v1") as llm:
        llm.queue("ok")
        env = {**os.environ, "AGENT_API_URL": llm.base_url}
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "salon",
            "check",
            str(root),
            "--live",
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    (line,) = [x for x in out.decode().splitlines() if x.startswith("live: provider agent")]
    assert line.endswith(
        f": 'ok' ({llm.base_url} answered 404; {llm.base_url}/v1 answers: set base_url to it)"
    ), line
