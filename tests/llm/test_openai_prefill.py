"""OpenAI-compatible servers in prefill mode, per-model request fields, model routing."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes.llm_server import Flavour, LLMServer, Scripted
from salon.config import Secrets, load_config_dir
from salon.context import render_prefill
from salon.errors import ConfigError
from salon.llm import ChatMessage, LLMRequest, Provider, TextDelta
from salon.llm.factory import build_provider
from salon.model import ChannelRef, Message, Participant
from tests.conftest import WriteConfig, bot_config

ROOM = ChannelRef("memory", "room")
ALICE = Participant("alice", "Alice")
ME = Participant("bot", "Salon", is_bot=True)


def local(server: LLMServer, **settings: object) -> Provider:
    config = bot_config(
        providers={
            "test": {
                "type": "openai",
                "model": "base-7b",
                "base_url": server.base_url + "/v1",
                "backoff_initial": 0,
                **settings,
            }
        }
    )
    return build_provider(config, Secrets({}))


def prefill_request(*texts: str) -> LLMRequest:
    from datetime import UTC, datetime

    when = datetime(2026, 1, 1, tzinfo=UTC)
    history = [Message(str(i), ROOM, ALICE, t, when) for i, t in enumerate(texts)]
    config = bot_config(mode="prefill", stop_sequences=["###"])
    return render_prefill(history, ME, config.render, "base-7b")


async def text_of(provider: Provider, request: LLMRequest) -> str:
    return "".join([e.text async for e in provider.stream(request) if isinstance(e, TextDelta)])


async def test_assistant_continue_sends_the_continuation_fields(llm_server: LLMServer) -> None:
    llm_server.queue(" Hello Alice.")
    provider = local(llm_server)
    assert await text_of(provider, prefill_request("hi there")) == " Hello Alice."
    body = llm_server.requests[0].body
    assert llm_server.requests[0].path == "/v1/chat/completions"
    assert body["continue_final_message"] is True
    assert body["add_generation_prompt"] is False
    assert body["messages"][-1] == {"role": "assistant", "content": "Alice: hi there\n\nSalon:"}
    # Chat mode sends no continuation fields.
    llm_server.queue("ok")
    await text_of(provider, LLMRequest(model="base-7b", messages=(ChatMessage.text("user", "x"),)))
    assert "continue_final_message" not in llm_server.requests[1].body
    await provider.aclose()


async def test_completions_style_sends_the_raw_transcript(llm_server: LLMServer) -> None:
    llm_server.queue(Scripted(chunks=[" Hel", "lo."], input_tokens=9, output_tokens=2))
    provider = local(llm_server, prefill_style="completions", end_of_turn="<|eot|>")
    request = prefill_request("hi there", "anyone?")
    events = [e async for e in provider.stream(request)]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == " Hello."
    sent = llm_server.requests[0]
    assert sent.path == "/v1/completions"
    assert sent.body["prompt"] == "Alice: hi there\n\nAlice: anyone?\n\nSalon:"
    assert sent.body["stop"] == ["\nAlice:", "\nalice:", "###", "<|eot|>"]
    assert "messages" not in sent.body
    await provider.aclose()


def with_text_tools(request: LLMRequest) -> LLMRequest:
    """The request as the text tool protocol sends it: the tool list opens the first user
    turn and ``</function_calls>`` is a stop sequence."""
    from dataclasses import replace

    from salon.context.textproto import CALLS_CLOSE, render_tool_list
    from salon.llm import TextPart
    from salon.model import ToolSpec

    schema = {"type": "object", "properties": {"tz": {"type": "string"}}}
    spec = ToolSpec("get_time", "clock", "get_time", "tells the time", schema)
    opening, *rest = request.messages
    listing = render_tool_list([spec]) + "\n\n"
    listed = ChatMessage("user", (TextPart(listing), *opening.parts))
    return replace(
        request,
        messages=(listed, *rest),
        stop=(*request.stop, CALLS_CLOSE),
        tool_listing=listing,
    )


async def test_completions_style_lists_the_tools_atop_the_raw_prompt(llm_server: LLMServer) -> None:
    from salon.context.textproto import CALLS_OPEN

    provider = local(llm_server, prefill_style="completions")
    await text_of(provider, with_text_tools(prefill_request("what time is it?")))
    prompt = llm_server.requests[0].body["prompt"]
    assert prompt.startswith("You can use tools.")
    assert CALLS_OPEN in prompt
    assert '<tool name="get_time">' in prompt
    assert prompt.endswith("</tools>\n\nAlice: what time is it?\n\nSalon:")
    assert "<cmd>" not in prompt  # the chat framing stays out of a raw prompt
    assert "</function_calls>" in llm_server.requests[0].body["stop"]
    await provider.aclose()


@pytest.mark.parametrize(
    ("flavour", "settings", "continued"),
    [
        ("vllm", {}, True),  # continue_final_message + add_generation_prompt: false
        ("vllm", {"continue_fields": {}}, False),
        ("llamacpp", {}, True),  # continues a final assistant message by itself
        ("llamacpp", {"continue_fields": {}}, True),
        ("llama_cpp_python", {}, False),  # drops both fields: a new assistant turn
        ("llama_cpp_python", {"continue_fields": {}}, False),
    ],
)
async def test_assistant_continue_on_each_server(
    flavour: Flavour, settings: dict[str, object], continued: bool
) -> None:
    async with LLMServer(flavour=flavour) as server:
        provider = local(server, **settings)
        await text_of(provider, prefill_request("hi there"))
        await provider.aclose()
    prompt = server.requests[0].prompt
    assert ("Alice: hi there\n\nSalon:" in prompt) is True
    assert prompt.endswith("Salon:") is continued


async def test_completions_style_continues_on_every_server() -> None:
    for flavour in ("vllm", "llamacpp", "llama_cpp_python"):
        async with LLMServer(flavour=flavour) as server:
            provider = local(server, prefill_style="completions")
            await text_of(provider, prefill_request("hi there"))
            await provider.aclose()
        (sent,) = server.requests
        assert (sent.path, sent.body["prompt"]) == ("/v1/completions", "Alice: hi there\n\nSalon:")


async def test_per_model_fields_and_headers(llm_server: LLMServer) -> None:
    provider = local(
        llm_server,
        extra_body={"top_k": 40},
        extra_headers={"X-Title": "salon"},
        models={
            "base-7b": {
                "extra_body": {"provider": {"order": ["deepinfra"]}, "top_k": 20},
                "extra_headers": {"HTTP-Referer": "https://example.invalid"},
            }
        },
    )
    for model in ("base-7b", "other"):
        llm_server.queue("ok")
        await text_of(provider, LLMRequest(model=model, messages=(ChatMessage.text("user", "x"),)))
    tuned, plain = llm_server.requests
    assert tuned.body["provider"] == {"order": ["deepinfra"]}
    assert tuned.body["top_k"] == 20  # the model's value wins over the provider's
    assert tuned.headers["http-referer"] == "https://example.invalid"
    assert tuned.headers["x-title"] == "salon"
    assert plain.body["top_k"] == 40
    assert "provider" not in plain.body
    assert "http-referer" not in plain.headers
    await provider.aclose()


SHARED = """\
providers:
  openrouter: {type: openai, base_url: "http://127.0.0.1:9/v1"}
  local: {type: openai, base_url: "http://127.0.0.1:9/v1", model: qwen}
"""


def test_model_names_its_provider(write_config: WriteConfig, tmp_path: Path) -> None:
    root = write_config(
        SHARED,
        router="model: openrouter/anthropic/claude-sonnet\n",
        plain="provider: local\nmodel: openrouter/x\n",
    )
    configs = load_config_dir(root)
    router = configs.bots["router"]
    assert (router.provider, router.model_name()) == ("openrouter", "anthropic/claude-sonnet")
    plain = configs.bots["plain"]  # an explicit provider takes the model name verbatim
    assert (plain.provider, plain.model_name()) == ("local", "openrouter/x")
    broken = write_config(SHARED, lost="model: nowhere/m\n")
    with pytest.raises(ConfigError) as caught:
        load_config_dir(broken)
    assert "no provider for model 'nowhere/m'" in str(caught.value)


async def test_the_body_sent_is_the_wire_body_with_the_key_as_bearer(
    llm_server: LLMServer,
) -> None:
    """Salon hands the SDK a body it built itself: what goes out must be exactly that
    body (no field dropped or renamed), authorised with the key like the SDK's create."""
    config = bot_config(
        providers={
            "test": {
                "type": "openai",
                "model": "gpt-x",
                "base_url": llm_server.base_url + "/v1",
                "api_key_env": "TEST_OPENAI_KEY",
                "extra_headers": {"X-Title": "salon"},
                "extra_body": {"top_k": 5},
            }
        }
    )
    provider = build_provider(config, Secrets({"TEST_OPENAI_KEY": "sk-test-123"}))
    request = LLMRequest(
        model="gpt-x",
        system="Be brief.",
        messages=(ChatMessage.text("user", "Alice: hi"), ChatMessage.text("assistant", "hello")),
        stop=("###",),
        temperature=0.5,
    )
    llm_server.queue("ok")
    assert await text_of(provider, request) == "ok"
    (sent,) = llm_server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body == provider.wire(request)  # type: ignore[attr-defined]
    assert sent.body["top_k"] == 5
    assert "extra_body" not in sent.body
    assert "extra_headers" not in sent.body
    assert sent.headers["authorization"] == "Bearer sk-test-123"
    assert sent.headers["x-title"] == "salon"
    await provider.aclose()
