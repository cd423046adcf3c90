"""IRC lines from chat text: newlines and over-long lines split as IRC needs them, and the
token bucket that paces what goes out."""

from __future__ import annotations

import time

__all__ = ["TokenBucket", "dot_lines", "irc_lines", "no_ctcp"]

_TOOL_LOG_LINES = 4
_CUT = "…"


class TokenBucket:
    """Flood control: ``burst`` lines at once, then ``rate`` lines per second."""

    def __init__(self, burst: int, rate: float) -> None:
        self.capacity = float(burst)
        self.rate = rate
        self.tokens = float(burst)
        self.stamp = time.monotonic()

    def delay(self) -> float:
        """Take a token; return how long to wait before sending."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        self.tokens -= 1
        return 0.0 if self.tokens >= 0 else -self.tokens / self.rate

    def take_if_free(self) -> bool:
        """Take a token only if one is there now (for lines that may as well be dropped)."""
        now = time.monotonic()
        self.tokens = min(self.capacity, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens < 1:
            return False
        self.tokens -= 1
        return True


def irc_lines(text: str, max_bytes: int) -> list[str]:
    """One chat message as IRC lines: no newlines, each at most ``max_bytes`` of UTF-8,
    split at spaces where possible and never inside a character."""
    lines: list[str] = []
    for raw in text.replace("\r", "").replace("\0", "").split("\n"):  # IRC forbids both
        line = raw.rstrip()
        while len(line.encode("utf-8")) > max_bytes:
            cut = _byte_cut(line, max_bytes)
            space = line.rfind(" ", 0, cut + 1)
            if space > cut // 2:
                cut = space
            lines.append(line[:cut].rstrip())
            line = line[cut:].lstrip()
        if line:
            lines.append(line)
    return lines


def dot_lines(text: str, max_bytes: int, max_lines: int = _TOOL_LOG_LINES) -> list[str]:
    """A dot message as at most ``max_lines`` IRC lines, every one starting with ``.`` (so
    no bot reads any of them); a cut shows as ``…`` at the end of the last line."""
    lines = [ln if ln.startswith(".") else f".{ln}" for ln in irc_lines(text, max_bytes - 1)]
    if len(lines) <= max_lines:
        return lines
    last = lines[max_lines - 1]
    room = max_bytes - len(_CUT.encode("utf-8"))
    return [*lines[: max_lines - 1], last[: _byte_cut(last, room)].rstrip() + _CUT]


def no_ctcp(text: str) -> str:
    """``text`` without \\x01, which would make a CTCP of the line."""
    return text.replace("\x01", "")


def _byte_cut(line: str, max_bytes: int) -> int:
    """The longest prefix (in characters) of ``line`` whose UTF-8 fits ``max_bytes``."""
    used = 0
    for index, char in enumerate(line):
        used += len(char.encode("utf-8"))
        if used > max_bytes:
            return max(index, 1)
    return len(line)
