"""Bob Bot (``examples/bob-bot``, seed 001) on the fakes: the context rules of its reply
chain (one budget for the chain and the channel, the chain first; every message of the
chain marked ``[reply]``), its inline answers, and 001's own variables read as they are."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from fakes.discord_server import DiscordServer
from fakes.llm_server import LLMServer
from salon.config.loader import load_config_dir
from tests.conftest import ServeApp
from tests.platforms.conftest import GENERAL
from tests.platforms.test_examples import EXAMPLES, copy_example, serve_example

SECRETS = {"DISCORD_TOKEN": "token-123", "SERPAPI_API_KEY": "serp-key"}


async def _serve_bob(
    llm: LLMServer, serve_app: ServeApp, tmp_path: Path, env: Mapping[str, str] | None = None
) -> None:
    def on_fakes(data: dict[str, Any]) -> None:
        data["providers"]["ollama"].update(base_url=llm.base_url + "/v1", retries=0)
        data["context_evaluator"]["enabled"] = False  # one request per answer, to read
        for integration in ("weather", "comfyui", "search", "nfl"):  # never asked here
            data["integrations"][integration]["base_url"] = llm.base_url

    root = copy_example("bob-bot", tmp_path, {"bots/bob.yaml": on_fakes})
    with pytest.MonkeyPatch.context() as patch:  # read as the files are, at the start
        for name, value in (env or {}).items():
            patch.setenv(name, value)
        await serve_example(root, "bob", serve_app, SECRETS)


def _lines(request_body: dict[str, Any]) -> list[str]:
    """The context's lines, after the system prompt (Ollama's turns hold several)."""
    turns = [m["content"] for m in request_body["messages"][1:]]
    assert all(isinstance(t, str) for t in turns), turns
    return "\n".join(turns).splitlines()


async def test_bob_marks_a_recent_replied_to_message_as_reply_and_answers_inline(
    fake_discord: DiscordServer, llm_server: LLMServer, serve_app: ServeApp, tmp_path: Path
) -> None:
    llm_server.queue("It starts at eight.")
    await _serve_bob(llm_server, serve_app, tmp_path)
    alice, carol = fake_discord.user("Alice"), fake_discord.user("Carol")
    match = await fake_discord.post(GENERAL, carol, "the match is tonight")
    await fake_discord.post(GENERAL, alice, "nice")
    asked = await fake_discord.post(
        GENERAL,
        alice,
        f"<@{fake_discord.bot.id}> when?",
        mentions=[fake_discord.bot],
        reply_to=match,
    )
    (answer,) = await fake_discord.wait_bot_messages(GENERAL, 1)
    assert answer["message_reference"]["message_id"] == asked["id"]  # reply_to_trigger
    seen = _lines(llm_server.requests[0].body)
    # Caz is Carol's nickname; her message is in the window and in the chain.
    assert "[reply] Caz: the match is tonight" in seen
    assert "[channel] Alice: nice" in seen
    assert "[channel] Alice: @Bob when?" in seen  # what asked is no message of the chain


async def test_bobs_reply_chain_and_channel_share_one_budget_the_chain_first(
    fake_discord: DiscordServer, llm_server: LLMServer, serve_app: ServeApp, tmp_path: Path
) -> None:
    """``REPLY_CHAIN_MAX_DEPTH=4``: the message that asked, the two of its chain, and the
    newest one message of the channel; 001's variable read from the environment."""
    llm_server.queue("Pizza, then.")
    await _serve_bob(llm_server, serve_app, tmp_path, {"REPLY_CHAIN_MAX_DEPTH": "4"})
    alice, carol = fake_discord.user("Alice"), fake_discord.user("Carol")
    question = await fake_discord.post(GENERAL, alice, "PLUGH what shall we eat?")
    idea = await fake_discord.post(GENERAL, carol, "XYZZY pizza", reply_to=question)
    for n in range(6):
        await fake_discord.post(GENERAL, carol, f"chatter {n}")
    mention = f"<@{fake_discord.bot.id}> agreed?"
    await fake_discord.post(GENERAL, alice, mention, mentions=[fake_discord.bot], reply_to=idea)
    await fake_discord.wait_bot_messages(GENERAL, 1)
    seen = _lines(llm_server.requests[0].body)
    assert seen == [
        "[reply] Alice: PLUGH what shall we eat?",
        "[reply] Caz: XYZZY pizza",
        "[channel] Caz: chatter 5",
        "[channel] Alice: @Bob agreed?",
    ]


def test_bob_reads_001s_own_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    seed_env = {
        "REPLY_CHAIN_MAX_DEPTH": "12",
        "REPLY_CHAIN_MAX_TOKENS": "8000",
        "REPLY_CHAIN_IMAGE_MAX_DEPTH": "0",
        "REPLY_CHAIN_ENABLED": "false",
        "ALLOW_BOT_INTERACTIONS": "true",
        "DEBUG_LOGGING": "true",
    }
    for name, value in {**seed_env, **SECRETS}.items():
        monkeypatch.setenv(name, value)
    _, bob = load_config_dir(EXAMPLES / "bob-bot").bot("bob")
    discord = bob.platforms.discord
    assert discord is not None
    assert (bob.recency_window_messages, discord.reply_chain_max_depth) == (12, 12)
    assert bob.recency_window_characters == 8000
    assert discord.reply_chain_image_max_depth == 0
    assert bob.context_history is False
    assert bob.allow_bot_interactions is bob.other_bots_in_context is True
    assert bob.log_level == "DEBUG"
    monkeypatch.setenv("DEBUG_LOGGING", "false")
    assert load_config_dir(EXAMPLES / "bob-bot").bot("bob")[1].log_level == "INFO"
