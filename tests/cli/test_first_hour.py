"""A newcomer's first hour with the commands: `salon chat` answers each piped line on its
own, `salon trace` finds the built-in bot, a closed pipe ends a command quietly, `salon
init` writes Discord and IRC sections, and the tiny local model says what it is."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest
import yaml

from fakes.llm_server import LLMServer
from salon.cli import main
from salon.config import load_config_dir

PROVIDER_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL", "ANTHROPIC_API_KEY")


def bot_on(root: Path, base_url: str) -> Path:
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "bot.yaml").write_text(
        f"""\
name: Bot
providers:
  p: {{type: openai, model: m, base_url: "{base_url}/v1"}}
provider: p
data_dir: {root / "data"}
"""
    )
    return root


async def salon(
    *args: str, stdin: bytes = b"", stdout: int = asyncio.subprocess.PIPE
) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROVIDER_VARIABLES}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=stdout,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin), 60)
    assert proc.returncode is not None
    return proc.returncode, (out or b"").decode(), err.decode()


async def test_two_piped_lines_are_two_turns_with_an_answer_each(tmp_path: Path) -> None:
    async with LLMServer() as llm:
        llm.queue("one", "two")
        root = bot_on(tmp_path / "c", llm.base_url)
        code, out, err = await salon("chat", str(root), stdin=b"first\nsecond\n")
    assert code == 0, err
    assert out == "Bot: one\n\nBot: two\n\n"
    assert len(llm.requests) == 2


async def test_a_closed_pipe_ends_a_command_quietly(tmp_path: Path) -> None:
    root = bot_on(tmp_path / "c", "http://127.0.0.1:9")
    read, write = os.pipe()
    os.close(read)  # as `| head` does once it has its lines
    try:
        code, _, err = await salon("trace", "list", str(root), stdout=write)
    finally:
        os.close(write)
    assert "Traceback" not in err
    assert "BrokenPipeError" not in err
    assert code == 141  # as a command killed by SIGPIPE reports it


def test_trace_with_no_directory_finds_the_built_in_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert main(["init", str(tmp_path / "data" / "salon" / "default"), "--provider", "openai"]) == 0
    here = tmp_path / "empty"
    here.mkdir()
    monkeypatch.chdir(here)
    capsys.readouterr()
    assert main(["trace", "list"]) == 0
    assert capsys.readouterr().out == "no traces yet\n"


def test_trace_with_no_directory_and_no_bot_says_where_it_looked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    monkeypatch.chdir(tmp_path)
    assert main(["trace", "list"]) == 2
    err = capsys.readouterr().err
    assert "no bot files here (bots/<name>.yaml), nor a built-in bot in" in err
    assert not (tmp_path / "data" / "salon").exists()  # nothing written for a look-up


def test_init_for_discord_and_irc_writes_sections_that_check_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "c"
    args = ["init", str(root), "--provider", "openai", "--platform", "discord"]
    assert main([*args, "--platform", "irc"]) == 0
    bot = yaml.safe_load((root / "bots" / "assistant.yaml").read_text())
    assert bot["platforms"]["discord"]["token_env"] == "DISCORD_TOKEN"
    assert bot["platforms"]["irc"]["nick"] == "assistant"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.delenv("DISCORD_TOKEN", raising=False)
    assert main(["check", str(root)]) == 2
    assert "platforms.discord.token_env: environment variable DISCORD_TOKEN" in (
        capsys.readouterr().err
    )
    monkeypatch.setenv("DISCORD_TOKEN", "token")
    assert main(["check", str(root)]) == 0
    path = root / "bots" / "assistant.yaml"
    path.write_text(path.read_text().replace("    # sasl_", "    sasl_"))
    monkeypatch.delenv("IRC_SASL_PASSWORD", raising=False)
    capsys.readouterr()
    assert main(["check", str(root)]) == 2
    assert "platforms.irc.sasl_password_env: environment variable IRC_SASL_PASSWORD" in (
        capsys.readouterr().err
    )


def test_the_tiny_local_model_says_what_it_is_and_how_to_switch(tmp_path: Path) -> None:
    from salon.chat_cli import local_model_note

    root = tmp_path / "c"
    assert main(["init", str(root), "--provider", "local"]) == 0
    configs = load_config_dir(root)
    note = local_model_note(configs, "assistant")
    assert note is not None
    assert "tiny local model" in note
    assert "for trying Salon" in note
    assert str(root / "bots" / "assistant.yaml") in note
    assert "provider: openai" in note
    assert len(note.splitlines()) == 2  # what it is; the one line that switches
    path = root / "bots" / "assistant.yaml"
    path.write_text(path.read_text().replace("provider: local", "provider: openai"))
    assert local_model_note(load_config_dir(root), "assistant") is None
