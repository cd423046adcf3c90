"""``salon chat``: one bot in this terminal, and where a command finds a bot by itself.

With no directory named, ``chat`` talks to the config here, else to the built-in bot (in
Salon's folder of the user's data directory, written on first use); ``trace`` reads the
same place, without writing anything. Each line typed (or piped) is one turn: the next is
read once the bot has answered it.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from pathlib import Path

from salon.agent.dispatch import TOLD_IN_CHANNEL
from salon.app import BotApp, data_dir, load_bot
from salon.config import ConfigSet, load_config_dir
from salon.config.example import write_example
from salon.errors import ConfigError, ConfigProblem
from salon.logsetup import configure_logging
from salon.platforms.terminal import terminal_for
from salon.printable import printable

__all__ = [
    "chat",
    "existing_root",
    "local_model_note",
    "provider_from_environment",
]

_OPENAI_VARIABLES = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL")


def provider_from_environment(model: str | None) -> str:
    """The provider a new config should use: the one the user has set up, else local."""
    if model or any(os.environ.get(name) for name in _OPENAI_VARIABLES):
        return "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "local"


def _is_config_dir(path: Path) -> bool:
    return (path / "bots").is_dir() or (path / "shared.yaml").is_file()


def _builtin_bot_dir() -> Path:
    """Where the built-in bot keeps its config and memory: Salon's folder in the user's
    data directory ($XDG_DATA_HOME, else ~/.local/share)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "salon" / "default"


def existing_root(root: Path | None) -> Path:
    """The directory named, else here when it holds a config, else the built-in bot's
    when ``salon chat`` has made it; else a ConfigError saying where it looked."""
    if root is not None:
        return root
    for found in (Path("."), _builtin_bot_dir()):
        if _is_config_dir(found):
            return found
    reason = f"no bot files here (bots/<name>.yaml), nor a built-in bot in {_builtin_bot_dir()}"
    raise ConfigError([ConfigProblem("bots", "", f"{reason}: name a DIR, or run salon chat")])


def _chat_root(root: Path | None) -> Path:
    """As ``existing_root``, but the built-in bot is written on first use, with the
    provider the environment has, else the local model."""
    if root is not None or _is_config_dir(Path(".")):
        return existing_root(root)
    builtin = _builtin_bot_dir()
    if not _is_config_dir(builtin):
        model = os.environ.get("OPENAI_MODEL")
        write_example(builtin, model=model, provider=provider_from_environment(model))
        print(f"(the built-in bot: its config and memory are in {builtin})", file=sys.stderr)
    return builtin


def local_model_note(configs: ConfigSet, key: str) -> str | None:
    """What a bot on the bundled tiny model says first: what it is, and the one line to
    change for a real provider. None for any other model."""
    config = configs.bots[key]
    settings = config.provider_config()
    if settings.type != "local" or settings.model_path is not None:
        return None
    bot_file = configs.root / "bots" / f"{key}.yaml"
    return (
        f"({config.name} runs {config.model_name()}, a tiny local model for trying Salon: "
        "expect wrong answers.)\n"
        f"(For a real model, change `provider: local` to `provider: openai` in {bot_file} "
        "and set OPENAI_API_KEY.)"
    )


def chat(root: Path | None, bot: str | None) -> int:
    root = _chat_root(root)
    configs = load_config_dir(root)
    key, config, secrets = load_bot(configs, bot)
    console = configure_logging(
        secrets.redactor(),
        level=config.log_level,
        log_dir=data_dir(configs.root, config) / "logs",
        stem=f"chat-{key}",
        short=True,
    )
    # The terminal is the conversation: routine lines stay off it, and a failure the chat
    # already shows (its ⚠️ note) is not repeated.
    console.setLevel(logging.WARNING)
    console.addFilter(lambda record: not getattr(record, TOLD_IN_CHANNEL, False))
    if note := local_model_note(configs, key):
        print(printable(note), file=sys.stderr)
    interactive = sys.stdin.isatty()
    if interactive:
        print(printable(f"Talking to {config.name}. /quit or Ctrl-D to leave.\n"))
    app = BotApp(
        key=key,
        config=config,
        root=root,
        secrets=secrets,
        channel_configs=configs.channel_configs(key),
        watch_config=True,
    )
    prompt = f"{config.platforms.terminal.user_name}: " if interactive else None
    return asyncio.run(_chat(app, prompt))


async def _chat(app: BotApp, prompt: str | None) -> int:
    async with app:
        terminal = terminal_for(app.build_context(), settled=app.agent.wait_idle, prompt=prompt)
        # Input ended (a pipe) or /quit: answers in progress still come (Ctrl-C stops them).
        await app.serve(terminal.closed, [terminal], grace=None)
    return 0
