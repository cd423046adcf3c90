"""Channel keys people type (``salon tools call --channel``, ``POST /bots/<name>/events``)."""

from __future__ import annotations

from salon.config.models import BotConfig

__all__ = ["channel_key"]


def _examples(config: BotConfig) -> dict[str, str]:
    """A channel key to show for each platform the bot has."""
    examples = {"terminal": "terminal:local"}
    if config.platforms.irc is not None:
        first = next(iter(config.platforms.irc.channels), "#channel")
        examples["irc"] = f"irc:{first.lower()}"
    if config.platforms.discord is not None:
        examples["discord"] = "discord:<channel id>"
    if config.platforms.matrix is not None:
        examples["matrix"] = "matrix:<room id>"
    if config.platforms.slack is not None:
        examples["slack"] = "slack:<channel id>"
    return examples


def channel_key(config: BotConfig, channel: str, *, label: str = "--channel") -> str:
    """``channel`` as the key the bot's platforms store lines under; ValueError saying what
    to write instead when it is not a channel of a platform the bot has. ``label`` names
    where the value was written, for the message."""
    examples = _examples(config)
    platform, sep, ident = channel.partition(":")
    if not sep:
        raise ValueError(f"{label} {channel!r} is not a channel key{_guess(channel, examples)}")
    if platform not in examples:
        known = ", ".join(examples.values())
        raise ValueError(
            f"{label} {channel!r}: this bot has no {platform} platform; "
            f"write a channel key: {known}"
        )
    if platform == "terminal" and ident != "local":
        raise ValueError(f"{label} {channel!r}: write terminal:local")
    if platform == "discord" and not ident.isdigit():
        raise ValueError(
            f"{label} {channel!r}: a Discord channel key is discord:<channel id>, the id in digits"
        )
    if platform in ("matrix", "slack") and not ident:
        raise ValueError(f"{label} {channel!r}: write {examples[platform]}")
    if platform == "irc" and not ident:
        raise ValueError(f"{label} {channel!r}: write {examples['irc']}")
    # The IRC adapter stores channels and nicks in lower case.
    return f"irc:{ident.lower()}" if platform == "irc" else channel


def _guess(channel: str, examples: dict[str, str]) -> str:
    """``: write KEY`` when the bare name fits one platform, else the keys to choose from."""
    if channel.startswith(("#", "&")) and "irc" in examples:
        return f": write irc:{channel.lower()}"
    if channel.isdigit() and "discord" in examples:
        return f": write discord:{channel}"
    if channel == "local":
        return ": write terminal:local"
    return f"; write one of: {', '.join(examples.values())}"
