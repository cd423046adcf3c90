"""The IRC adapter."""

from salon.platforms.irc.lines import TokenBucket, dot_lines, irc_lines
from salon.platforms.irc.platform import IrcPlatform

__all__ = ["IrcPlatform", "TokenBucket", "dot_lines", "irc_lines"]
