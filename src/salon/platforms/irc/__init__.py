"""The IRC adapter. Importing this package loads no pydle: ``ADAPTER`` builds the platform
for a bot on IRC, and ``IrcPlatform`` loads it when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from salon.platforms.irc.adapter import ADAPTER
from salon.platforms.irc.lines import TokenBucket, dot_lines, irc_lines

if TYPE_CHECKING:
    from salon.platforms.irc.platform import IrcPlatform

__all__ = ["ADAPTER", "IrcPlatform", "TokenBucket", "dot_lines", "irc_lines"]


def __getattr__(name: str) -> Any:
    if name == "IrcPlatform":
        from salon.platforms.irc import platform

        return platform.IrcPlatform
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
