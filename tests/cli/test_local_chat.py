"""`salon` as a newcomer runs it with no keys: the local model (the real SmolLM2) answers
through `salon chat`, in chat mode and in prefill mode; `salon check` knows the provider."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from pathlib import Path

import pytest

from salon.cli import main

# Each test starts salon, which loads the model, on a machine that may be busy.
pytestmark = pytest.mark.timeout(300)

# What a newcomer's shell would not have: any provider set up.
PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY")


async def salon(
    *args: str, cwd: Path, stdin: str = "", env: dict[str, str] | None = None
) -> tuple[int, str, str]:
    environ = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    environ.update(env or {})
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        *args,
        cwd=cwd,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environ,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def local_bot(root: Path, *extra: str) -> Path:
    """A config from `salon init` with the local provider, answering greedily."""
    assert main(["init", str(root), "--provider", "local"]) == 0
    bot = root / "bots" / "assistant.yaml"
    text = bot.read_text().replace("max_tokens: 1024", "max_tokens: 48")  # quick answers
    bot.write_text(text + "temperature: 0\n" + "".join(f"{x}\n" for x in extra))
    return root


async def sent_request(root: Path) -> dict[str, object]:
    code, out, err = await salon("trace", "request", str(root), "1", cwd=root)
    assert code == 0, err
    body: dict[str, object] = json.loads(out)
    return body


def answer_of(out: str) -> str:
    """The bot's answer; a slow machine may put a "(still waiting ...)" notice first."""
    lines = [line for line in out.splitlines() if not line.startswith("(")]
    assert lines, out
    assert lines[0].startswith("Assistant: "), out
    return "\n".join(lines).removeprefix("Assistant: ").strip()


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


async def test_salon_chat_with_no_directory_talks_to_the_built_in_local_bot(
    local_model: Path, tmp_path: Path
) -> None:
    here = tmp_path / "empty"
    here.mkdir()
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    code, out, err = await salon("chat", cwd=here, stdin="Hello! Who are you?\n", env=env)
    assert code == 0, err
    assert answer_of(out)
    builtin = tmp_path / "data" / "salon" / "default"
    assert f"the built-in bot: its config and memory are in {builtin}" in err
    assert "a tiny local model for trying Salon" in err  # its greeting, on stderr
    assert f"`provider: openai` in {builtin / 'bots' / 'assistant.yaml'}" in err
    assert "provider: local" in (builtin / "bots" / "assistant.yaml").read_text()
    assert "Traceback" not in err
    # the second time it is the same bot, and it remembers
    code, out, err = await salon("chat", cwd=here, stdin="What did I ask?\n", env=env)
    assert code == 0, err
    assert "built-in bot" not in err
    code, out, err = await salon("trace", "request", str(builtin), "2", cwd=here)
    assert code == 0, err
    contents = [m["content"] for m in json.loads(out)["messages"]]
    assert "you: Hello! Who are you?" in contents


async def test_chat_mode_goes_through_the_models_chat_template(
    local_model: Path, tmp_path: Path
) -> None:
    root = local_bot(tmp_path / "bots")
    code, out, err = await salon(
        "chat", str(root), cwd=tmp_path, stdin="What is the capital of France?\n"
    )
    assert code == 0, err
    assert answer_of(out)
    body = await sent_request(root)
    assert body["model_path"] == str(local_model)
    assert body["messages"] == [
        {
            "role": "system",
            "content": "You are Assistant, a friendly and concise participant in a group chat.\n",
        },
        {"role": "user", "content": "you: What is the capital of France?"},
    ]


async def test_prefill_mode_completes_the_transcript_as_raw_text(
    local_model: Path, tmp_path: Path
) -> None:
    root = local_bot(tmp_path / "bots", "mode: prefill", "builtin_tools: false")
    code, out, err = await salon(
        "chat", str(root), cwd=tmp_path, stdin="Tell me something about the sea.\n"
    )
    assert code == 0, err
    assert answer_of(out)
    body = await sent_request(root)
    assert "messages" not in body
    assert str(body["prompt"]).endswith("you: Tell me something about the sea.\n\nAssistant:")
    assert "\nyou:" in body["stop"]  # type: ignore[operator]


async def test_a_tool_call_in_the_text_protocol_runs_or_fails_cleanly(
    local_model: Path, tmp_path: Path
) -> None:
    """The model is too small to be relied on to call a tool: whatever it writes, the
    activation ends with an answer or a clear note, never a crash."""
    # One small real MCP server instead of the built-in tools: a short tool listing.
    server = Path(sys.executable).parent / "mcp-server-time"
    root = local_bot(
        tmp_path / "bots",
        "tool_mode: text",
        "builtin_tools: false",
        "default_tool_policy: allow",
        "max_tool_depth: 2",
        f"mcp_servers: {{time: {{command: {json.dumps(str(server))}}}}}",
    )
    question = (
        "Use the get_current_time tool now. Write exactly:\n"
        '<function_calls>\n<invoke name="get_current_time">\n'
        '<parameter name="timezone">UTC</parameter>\n</invoke>\n</function_calls>\n'
    )
    code, out, err = await salon(
        "chat", str(root), cwd=tmp_path, stdin=question.replace("\n", " ") + "\n"
    )
    assert code == 0, err
    assert "Traceback" not in err
    # an answer, or the tool log's line (".Assistant>"), or a clear note
    assert "Assistant" in out or "⚠️" in out, out
    code, listing, err = await salon("trace", "list", str(root), cwd=tmp_path)
    assert code == 0, err
    assert re.search(r"^1\s.*\b(answered|silent)\b", listing, re.MULTILINE), listing
    body = await sent_request(root)
    assert "get_current_time" in json.dumps(body)  # the listing reached the model


async def test_check_live_runs_one_short_generation(local_model: Path, tmp_path: Path) -> None:
    root = local_bot(tmp_path / "bots")
    code, out, err = await salon("check", str(root), "--live", cwd=tmp_path)
    assert code == 0, out + err
    assert re.search(
        r"^live: provider local \(model SmolLM2-135M-Instruct\): \d+ ms: (['\"]).+\1$",
        out,
        re.MULTILINE,
    ), out


async def test_check_names_a_missing_model_file_in_one_line(tmp_path: Path) -> None:
    root = local_bot(tmp_path / "bots")
    shared = root / "shared.yaml"
    shared.write_text(
        shared.read_text().replace(
            "    # model_path: ~/models", "    model_path: /nowhere/model.gguf  #"
        )
    )
    code, _, err = await salon("check", str(root), cwd=tmp_path)
    assert code == 2
    line = line_of(shared, "model_path: /nowhere")
    assert err.splitlines() == [
        f"error: {shared}:{line}: providers.local.model_path: no model file at /nowhere/model.gguf"
    ]


async def test_without_the_extra_check_and_chat_say_how_to_install_it(tmp_path: Path) -> None:
    root = local_bot(tmp_path / "bots")
    # A Python where llama_cpp cannot be imported, as after a plain install.
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text("import sys\nsys.modules['llama_cpp'] = None\n")
    env = {"PYTHONPATH": str(blocker)}
    shared = root / "shared.yaml"
    line = line_of(shared, "type: local")
    for command in ("check", "chat"):
        code, out, err = await salon(command, str(root), cwd=tmp_path, stdin="hi\n", env=env)
        assert code == 2, out + err
        assert err.splitlines() == [
            f"error: {shared}:{line}: providers.local.type: the local "
            "provider needs llama-cpp-python: install it with scripts/install --local "
            "(see README)"
        ]
