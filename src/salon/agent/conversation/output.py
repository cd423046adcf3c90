"""Turning a stream of model text into chat messages.

``split_message`` cuts a text to a platform's size limit at the gentlest boundary it can
find (paragraph, then line, then word) and closes a code fence it cuts through, reopening
it in the next piece. ``ParagraphStream`` releases each paragraph as soon as it is complete,
so a long answer arrives in the room piece by piece while the model is still writing.
``LeadingLabel`` drops a label the model writes before its own answer (``Salon: hi``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = ["LeadingLabel", "ParagraphStream", "split_message"]

_FENCE = "```"
_CLOSE = "\n```"
_MAX_OPENER = 16  # "```typescript" fits; a longer "language" is not one
_MIN_FENCE_LIMIT = 64


def _open_fence(text: str) -> str | None:
    """The opening line of the code fence still open at the end of ``text``, if any."""
    opener: str | None = None
    for line in text.split("\n"):
        stripped = line.strip()
        if stripped.startswith(_FENCE):
            # Reopen with the fence and its language only: the rest of the line was content.
            opener = stripped.split()[0][:_MAX_OPENER] if opener is None else None
    return opener


def _cut_position(text: str, limit: int) -> tuple[int, int]:
    """Where to cut ``text`` (at most ``limit`` chars kept) and where the rest starts."""
    floor = limit // 4  # a boundary this early would waste most of a message
    for sep in ("\n\n", "\n", " "):
        at = text.rfind(sep, 0, limit + 1)
        if at > floor:
            return at, at + len(sep)
    return limit, limit


def split_message(text: str, limit: int) -> list[str]:
    """Split ``text`` into pieces of at most ``limit`` characters; empty pieces are dropped."""
    pieces: list[str] = []
    rest = text.strip()
    # Keep room for a closing fence and the reopened one so every round makes progress;
    # below _MIN_FENCE_LIMIT there is no such room and fences are cut like any text.
    mend_fences = _FENCE in text and limit >= _MIN_FENCE_LIMIT
    reserve = len(_CLOSE) + _MAX_OPENER + 1 if mend_fences else 0
    while len(rest) > limit:
        cut, resume = _cut_position(rest, max(limit - reserve, 1))
        head, rest = rest[:cut].rstrip(), rest[resume:].lstrip("\n")
        opener = _open_fence(head) if mend_fences else None
        if opener is not None:
            head += _CLOSE
            rest = f"{opener}\n{rest}"
        if head.strip():
            pieces.append(head)
    if rest.strip():
        pieces.append(rest)
    return pieces


class ParagraphStream:
    """Collects text deltas; ``feed`` returns the messages that are complete so far."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = ""
        self._scan_from = 0

    def feed(self, delta: str) -> list[str]:
        self._buf += delta
        out: list[str] = []
        while True:
            at = self._buf.find("\n\n", self._scan_from)
            if at < 0:
                break
            paragraph = self._buf[:at]
            if _open_fence(paragraph) is not None:
                self._scan_from = at + 2  # a blank line inside a code block ends nothing
                continue
            out.extend(split_message(paragraph, self.limit))
            self._buf = self._buf[at + 2 :].lstrip("\n")
            self._scan_from = 0
        if len(self._buf) > self.limit:
            # Splitting trims the text's ends; the white space it ends with is where the
            # next delta goes on, so it stays.
            trailing = self._buf[len(self._buf.rstrip()) :]
            *done, rest = split_message(self._buf, self.limit) or [""]
            self._buf = rest + trailing
            out.extend(done)
            self._scan_from = 0
        self._scan_from = max(self._scan_from, len(self._buf) - 1)
        return out

    def finish(self) -> list[str]:
        text, self._buf, self._scan_from = self._buf, "", 0
        return split_message(text, self.limit)


class LeadingLabel:
    """Holds back the start of an answer until it is clear whether the model began it with
    its own label (``Salon: hi``, ``Assistant: hi``, imitating the transcript), and drops
    that label. Only the very start of an answer is looked at."""

    def __init__(self, labels: Iterable[str]) -> None:
        names = sorted({label for label in labels if label}, key=len, reverse=True)
        alternatives = "|".join(re.escape(name) for name in names)
        self._pattern = re.compile(rf"\s*(?:{alternatives})\s*:[ \t]*", re.IGNORECASE)
        self._decide_at = max((len(n) for n in names), default=0) + 3
        self._held = ""
        self._decided = not names

    def feed(self, text: str) -> str:
        if self._decided:
            return text
        self._held += text
        start = self._held.lstrip()
        if len(start) < self._decide_at and ":" not in start and "\n" not in start:
            return ""  # could still be a label
        return self.flush()

    def flush(self) -> str:
        held, self._held = self._held, ""
        if not self._decided:
            self._decided = True
            found = self._pattern.match(held)
            if found:
                held = held[found.end() :]
        return held
