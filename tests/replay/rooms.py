"""A small IRC room and a bot config for the replay's tests: its platform and, unless a
test gives the loopback LLM server's address, its provider point at a listener nobody may
connect to."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

LOG = """\
[10:00] <ann> hi all
[10:01] <ben> Helper: how do I mount a usb disk?
=== cid has joined #room
[10:02] <Helper> ben: plug it in, then look in /media
[10:03] <ann> thanks to the helpers
[10:04] <ben> helper, and unmount?
[10:05] <cid> anyone know grub?
"""


def write_config(
    root: Path,
    port: int,
    system: str = "Be brief.",
    *,
    llm: str | None = None,
    extra: str = "",
    judge: bool = False,
) -> None:
    """``bots/helper.yaml``: Claude (at ``llm``, else the listener) and an IRC platform;
    ``judge``: a second provider, ``judge``, at the same address."""
    base = llm or f"http://127.0.0.1:{port}"
    second = (
        f"""  judge: {{type: anthropic, model: claude-haiku-4-5, api_key_env: REPLAY_TEST_KEY,
           base_url: "{base}", retries: 0}}
"""
        if judge
        else ""
    )
    (root / "bots").mkdir(parents=True)
    (root / "bots" / "helper.yaml").write_text(
        f"""\
name: Helper
providers:
  claude: {{type: anthropic, model: claude-sonnet-4-6, api_key_env: REPLAY_TEST_KEY,
           base_url: "{base}", cache_ttl: auto, retries: 0}}
{second}provider: claude
system_prompt: "{system}"
data_dir: {root / "data"}
platforms:
  irc: {{server: 127.0.0.1, port: {port}, tls: false, nick: Helper, channels: ["#room"]}}
{extra}"""
    )


def json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(row) for row in path.read_text().splitlines()]


def nothing_connected(sock: socket.socket) -> bool:
    try:
        sock.accept()[0].close()
    except BlockingIOError:
        return True
    return False
