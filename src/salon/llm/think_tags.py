"""Reasoning written inline in a model's text (``<think>…</think>``), taken out of the answer.

Servers without a reasoning parser (Ollama, llama.cpp without ``--reasoning-format``, vLLM
without ``--reasoning-parser``) and the local provider stream a thinking model's reasoning
(Qwen3, GLM-4.5, DeepSeek-R1) in the answer's own text. ``ThinkSplitter`` sits in the
provider, before anything else reads the text, and turns it into ``ThinkingDelta`` (the
reasoning) and ``TextDelta`` (the answer), as the text streams:

- a tag may be cut anywhere between chunks (``<thi`` + ``nk>``): only the end of a chunk that
  could still become a tag is held back, so the answer is not delayed more than that;
- a ``<think>`` never closed by the end of the stream was all reasoning: nothing of it is
  answer;
- some chat templates open the block themselves, so the model's text starts inside it and
  only ``</think>`` shows (Qwen3-Thinking, DeepSeek-R1-0528). When a tag-less start is
  expected (the provider says when: a thinking bot on a server that leaves the template's
  text as it is), text before a ``</think>`` with no opening tag is reasoning: the start of
  the answer is held until a ``</think>`` comes (what came before it was reasoning) or the
  stream ends without one (it was all answer), or the server shows it parses reasoning out
  (``apart``). Otherwise nothing is held: a stray ``</think>`` is taken out and said
  (``ThinkingClosed``), and a reader that has shown nothing of the text before it yet takes
  that text as reasoning (the agent holds an answer's first paragraph until it ends).

A ``<think>`` anywhere in the answer opens a block too: a literal tag in an answer is rare,
a leaked chain of thought in a channel is worse. The whitespace after ``</think>`` (the
templates put a blank line there) is not part of the answer.
"""

from __future__ import annotations

from salon.llm.base import TextDelta, ThinkingClosed, ThinkingDelta

__all__ = ["CLOSE", "OPEN", "ThinkSplitter"]

OPEN, CLOSE = "<think>", "</think>"

_Events = list[TextDelta | ThinkingDelta | ThinkingClosed]

_ANSWER, _THINKING, _UNSURE = "answer", "thinking", "unsure"


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


def _first(text: str, tags: tuple[str, ...]) -> tuple[int, str]:
    """Where the first of ``tags`` is in ``text``, and which: (-1, "") for none."""
    found = [(at, tag) for tag in tags if (at := text.find(tag)) >= 0]
    return min(found) if found else (-1, "")


class ThinkSplitter:
    """Splits one stream's text into reasoning and answer; ``expect_thinking`` says the
    model is asked to think, so a tag-less start may be reasoning (see the module)."""

    def __init__(self, *, expect_thinking: bool = False) -> None:
        self._state = _UNSURE if expect_thinking else _ANSWER
        self._held = ""  # text not yet known to be answer or reasoning
        self._trim = False  # drop the whitespace that follows a closing tag
        self._opening = True  # a tag-less start: what is held may still open with a tag
        self._searched = 0  # a tag-less start: how much of what is held had no "</think>"
        self.reasoning = ""  # every piece of reasoning taken out, in order

    def feed(self, text: str) -> _Events:
        """The events ``text`` (the next piece of the stream) makes known."""
        self._held += text
        out: _Events = []
        while self._held:
            if not self._step(out):
                break
        return out

    def apart(self) -> None:
        """The server gives reasoning in a field of its own: a start with no opening tag
        is the answer (tags in the text are still taken out)."""
        if self._state == _UNSURE and not self._held:
            self._state = _ANSWER

    def finish(self) -> _Events:
        """What is left when the stream ends: an open block was reasoning; a tag-less
        start that never closed was the answer."""
        held, self._held = self._held, ""
        if not held:
            return []
        if self._state == _THINKING:
            return [self._thought(held)]
        return self._answer(held)

    def _step(self, out: _Events) -> bool:
        """Take what can be decided from the held text; False when the rest must wait."""
        if self._state == _UNSURE:
            return self._step_unsure(out)
        held = self._held
        if "<" not in held:  # most chunks: no tag, nor the start of one
            self._held = ""
            self._emit(held, out)
            return False
        # In the answer, an opening tag, or a closing one with nothing open (dropped).
        at, tag = _first(held, (CLOSE,) if self._state == _THINKING else (OPEN, CLOSE))
        if at < 0:
            keep = max(_partial_tag(held, OPEN), _partial_tag(held, CLOSE))
            self._emit(held[: len(held) - keep], out)
            self._held = held[len(held) - keep :]
            return False
        self._emit(held[:at], out)
        self._held = held[at + len(tag) :]
        if tag == CLOSE and self._state == _ANSWER:  # no block open: a template's?
            out.append(ThinkingClosed())
        self._state = _THINKING if tag == OPEN else _ANSWER
        self._trim = tag == CLOSE
        return True

    def _step_unsure(self, out: _Events) -> bool:
        """A tag-less start: held until ``</think>`` shows or an opening tag begins it.
        The held text is searched once, not again with every chunk."""
        if self._opening:  # the first non-blank characters could still be "<think>"
            start = self._held.lstrip()
            if start.startswith(OPEN):  # an ordinary block after all
                self._held = start[len(OPEN) :]
                self._state = _THINKING
                return True
            self._opening = not start or OPEN.startswith(start)
        close = self._held.find(CLOSE, self._searched)
        if close < 0:
            self._searched = max(len(self._held) - len(CLOSE) + 1, 0)
            return False  # wait for a closing tag, or the end
        out.append(self._thought(self._held[:close]))
        self._held = self._held[close + len(CLOSE) :]
        self._state, self._trim = _ANSWER, True
        return True

    def _emit(self, text: str, out: _Events) -> None:
        if self._state == _THINKING:
            if text:
                out.append(self._thought(text))
        else:
            out.extend(self._answer(text))

    def _thought(self, text: str) -> ThinkingDelta:
        self.reasoning += text
        return ThinkingDelta(text)

    def _answer(self, text: str) -> _Events:
        if self._trim:
            text = text.lstrip()
            self._trim = not text
        return [TextDelta(text)] if text else []
