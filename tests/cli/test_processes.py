"""`salon chat` and `salon run` as real processes, as a user would run them."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from fakes.llm_server import LLMServer, Scripted
from salon.cli import main

SECRET = "sk-live-Zq8vT3pLx0RkW9"


async def salon(
    *args: str, stdin: str = "", env: dict[str, str] | None = None, unset: Sequence[str] = ()
) -> tuple[int, str, str]:
    environ = {k: v for k, v in {**os.environ, **(env or {})}.items() if k not in unset}
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        *args,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=environ,
    )
    out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


def chat_env(server: LLMServer) -> dict[str, str]:
    return {"OPENAI_BASE_URL": server.base_url + "/v1", "OPENAI_API_KEY": SECRET}


async def test_newcomer_flow_init_then_chat_remembers(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    assert main(["init", str(root), "--model", "tiny"]) == 0
    llm_server.queue("Hello! I am here.")
    code, out, err = await salon("chat", str(root), stdin="hello bot\n", env=chat_env(llm_server))
    assert code == 0, err
    assert out == "Assistant: Hello! I am here.\n\n"
    first = llm_server.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.body["model"] == "tiny"

    llm_server.queue("You said hello.")
    code, out, err = await salon(
        "chat", str(root), stdin="what did I say?\n", env=chat_env(llm_server)
    )
    assert code == 0, err
    assert "You said hello." in out
    contents = [m["content"] for m in llm_server.requests[1].body["messages"]]
    assert contents[1:] == ["you: hello bot", "Hello! I am here.", "you: what did I say?"]


async def test_secret_never_appears_in_output_logs_or_errors(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    main(["init", str(root), "--provider", "openai"])
    shared = root / "shared.yaml"
    shared.write_text(shared.read_text().replace("retries: 2", "retries: 0") + "log_level: DEBUG\n")
    llm_server.queue(Scripted(status=401, error_message=f"Incorrect API key provided: {SECRET}"))
    code, out, err = await salon("chat", str(root), stdin="hi\n", env=chat_env(llm_server))
    assert code == 0
    assert "could not answer" in out
    assert "Incorrect API key provided: ***" in out
    logs = "".join(p.read_text() for p in (root / "data" / "logs").glob("*.log"))
    assert "HTTP 401" in logs
    for text in (out, err, logs):
        assert SECRET not in text


async def test_missing_secret_stops_chat_before_connecting(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    main(["init", str(root), "--provider", "openai"])
    env = {"OPENAI_BASE_URL": llm_server.base_url + "/v1", "OPENAI_API_KEY": ""}
    code, _out, err = await salon("chat", str(root), stdin="hi\n", env=env)
    assert code == 2
    assert "OPENAI_API_KEY is empty" in err
    assert llm_server.requests == []


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str]) -> re.Match[str]:
    async with asyncio.timeout(30):
        while True:
            raw = await stream.readline()
            assert raw, f"stream ended before {pattern!r}; saw: {seen}"
            seen.append(raw.decode())
            if found := re.search(pattern, seen[-1]):
                return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def test_run_supervises_restarts_and_stops_cleanly(tmp_path: Path) -> None:
    root = tmp_path / "two"
    main(["init", str(root), "--bot", "ann", "--provider", "openai"])
    main(["init", str(root), "--bot", "ben", "--provider", "openai"])
    shared = root / "shared.yaml"
    shared.write_text(shared.read_text() + "restart_backoff_initial: 0.05\n")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "run",
        str(root),
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "OPENAI_API_KEY": SECRET},
    )
    assert proc.stderr is not None
    seen: list[str] = []
    pids = {}
    for _ in range(2):
        found = await read_until(proc.stderr, r"bot (\w+) started \(pid (\d+)\)", seen)
        pids[found[1]] = int(found[2])
    assert set(pids) == {"ann", "ben"}
    await read_until(proc.stderr, r"bot (ann|ben) running", seen)
    os.kill(pids["ann"], signal.SIGKILL)
    await read_until(proc.stderr, r"bot ann exited with code -9; restarting", seen)
    found = await read_until(proc.stderr, r"bot ann started \(pid (\d+)\)", seen)
    new_ann = int(found[1])
    assert new_ann != pids["ann"]
    await read_until(proc.stderr, r"bot ann running", seen)

    proc.send_signal(signal.SIGTERM)
    async with asyncio.timeout(10):
        rest = await proc.stderr.read()
        code = await proc.wait()
    assert code == 0, [*seen, rest.decode()]
    assert "all bots stopped" in rest.decode()
    assert not alive(new_ann)
    assert not alive(pids["ben"])
    assert SECRET not in "".join(seen) + rest.decode()


async def test_check_live_asks_each_provider_in_use_once(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "live"
    (root / "bots").mkdir(parents=True)
    (root / "guilds").mkdir()
    base = llm_server.base_url
    (root / "shared.yaml").write_text(
        "providers:\n"
        f"  good: {{type: openai, base_url: '{base}/v1', model: tiny, api_key_env: GOOD_KEY}}\n"
        f"  claude: {{type: anthropic, base_url: '{base}', model: big, api_key_env: BAD_KEY}}\n"
        f"  gem: {{type: google, base_url: '{base}', model: gemini-x, api_key_env: BAD_KEY}}\n"
        "  spare: {type: openai, base_url: 'http://127.0.0.1:9/v1', model: m}\n"
        "provider: good\n"  # in shared.yaml, so that the guild file may choose another
    )
    (root / "bots" / "a.yaml").write_text("")
    (root / "bots" / "b.yaml").write_text("model: tiny\n")
    (root / "guilds" / "555.yaml").write_text("provider: claude\nmodel: big\n")  # both bots
    (root / "bots" / "a-777.yaml").write_text("provider: gem\n")  # bot a in guild 777
    llm_server.queue(
        "ok",
        Scripted(status=401, error_message=f"invalid x-api-key {SECRET}"),
        Scripted(status=400, error_message="API key not valid."),
    )
    env = {"GOOD_KEY": "k-good", "BAD_KEY": SECRET}
    code, out, err = await salon("check", str(root), "--live", env=env)
    assert code == 1, err
    lines = [line for line in out.splitlines() if line.startswith("live:")]
    assert re.fullmatch(r"live: provider good \(model tiny\): \d+ ms: 'ok'", lines[0])
    assert lines[1].startswith("live: provider claude (model big): FAILED: claude: HTTP 401:")
    assert "invalid x-api-key ***" in lines[1]
    assert lines[2] == (
        "live: provider gem (model gemini-x): FAILED: gem: HTTP 400: API key not valid."
    )
    assert lines[3] == "live: provider spare: skipped (unused)"
    assert len(lines) == 4  # each provider once, although two bots use `good`
    assert SECRET not in out + err
    paths = [r.path for r in llm_server.requests]
    assert paths[:2] == ["/v1/chat/completions", "/v1/messages"]
    assert paths[2].endswith("/models/gemini-x:streamGenerateContent?alt=sse")
    assert len(paths) == 3  # no retries


def quick_retries(root: Path, retries: int) -> None:
    shared = root / "shared.yaml"
    text = shared.read_text().replace("retries: 2", f"retries: {retries}")
    shared.write_text(text.replace("backoff_initial: 1.0", "backoff_initial: 0.0"))


async def test_a_provider_failure_in_chat_is_one_readable_line(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    main(["init", str(root), "--provider", "openai"])
    quick_retries(root, 1)
    llm_server.queue(*[Scripted(status=500, error_message="model melted")] * 2)
    code, out, err = await salon("chat", str(root), stdin="hi\n", env=chat_env(llm_server))
    assert code == 0
    assert out == "⚠️ Assistant could not answer: openai: HTTP 500: model melted\n\n"
    assert "Traceback" not in err
    (retrying,) = err.splitlines()  # the one retry, said in one line
    assert "retry 1/1" in retrying
    logs = "".join(p.read_text() for p in (root / "data" / "logs").glob("*.log"))
    assert "Traceback" in logs  # the details are in the log file


async def test_piped_chat_waits_for_the_answer_after_the_input_ends(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    main(["init", str(root), "--provider", "openai"])
    resume = asyncio.Event()
    llm_server.queue(Scripted(chunks=["Slow ", "answer."], pause_before_chunk=1, resume=resume))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "salon",
        "chat",
        str(root),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **chat_env(llm_server)},
    )
    assert proc.stdin is not None
    proc.stdin.write(b"question\n")
    proc.stdin.close()  # end of input, as `echo question | salon chat`
    await asyncio.wait_for(llm_server.received.wait(), 30)
    finished = asyncio.ensure_future(proc.wait())
    done, _ = await asyncio.wait({finished}, timeout=6)  # longer than the old 4 s grace
    assert not done  # still waiting for the answer, not cut off
    resume.set()
    out, _err = await asyncio.wait_for(proc.communicate(), 30)
    assert out.decode() == "Assistant: Slow answer.\n\n"


async def test_a_line_over_a_mebibyte_is_cut_and_the_chat_goes_on(
    llm_server: LLMServer, tmp_path: Path
) -> None:
    root = tmp_path / "mine"
    main(["init", str(root), "--provider", "openai"])
    llm_server.queue("Got a long one.", "Got hi.")
    huge = "x" * (2 << 20)
    code, out, err = await salon("chat", str(root), stdin=f"{huge}\nhi\n", env=chat_env(llm_server))
    assert code == 0, err
    assert "(that line was cut to its first 1,048,576 characters)" in out
    assert out.endswith("Assistant: Got a long one.\n\nAssistant: Got hi.\n\n")
    # The line after the long one still arrived, as its own turn; the long one itself is
    # past the 100 000-character window, so the model sees the newest line only.
    assert llm_server.requests[-1].body["messages"][-1]["content"] == "you: hi"


async def test_check_live_passes_on_a_fresh_init(llm_server: LLMServer, tmp_path: Path) -> None:
    root = tmp_path / "fresh"
    assert main(["init", str(root), "--model", "tiny"]) == 0
    llm_server.queue("ok")
    # ANTHROPIC_BASE_URL keeps the unused entry on loopback should it ever be asked.
    env = {**chat_env(llm_server), "ANTHROPIC_BASE_URL": llm_server.base_url}
    code, out, err = await salon("check", str(root), "--live", env=env, unset=["ANTHROPIC_API_KEY"])
    assert code == 0, out + err
    lines = [line for line in out.splitlines() if line.startswith("live:")]
    assert re.fullmatch(r"live: provider openai \(model tiny\): \d+ ms: 'ok'", lines[0])
    assert lines[1:] == [
        "live: provider anthropic: skipped (unused)",
        "live: provider local: skipped (unused)",
    ]
    assert [r.path for r in llm_server.requests] == ["/v1/chat/completions"]
