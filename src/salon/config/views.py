"""What each part of the code needs of a bot's config, as small frozen records.

``BotConfig`` is the YAML's face: sixty-odd keys, most of them read by one part. The parts
that run for every message take only their own record, made once per effective config
(``BotConfig.visibility``, ``.window``, ``.render``), so a reader sees what a renderer
depends on and a test can build one without a whole config.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from salon.config.providers import ThinkingConfig

__all__ = ["RenderSettings", "Shaping", "Visibility", "WindowSettings"]


@dataclass(frozen=True, slots=True)
class Visibility:
    """Which messages no bot reads as conversation (dot messages, hiding reactions)."""

    ignore_dot_messages: bool
    hiding_reactions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class WindowSettings:
    """How much of the room the context holds, and how it rolls (context/rolling.py)."""

    visibility: Visibility
    recency_window_messages: int
    recency_window_characters: int
    recency_window_age: float | None  # seconds; None: any age
    hard_max_characters: int
    monitor_context_messages: int
    monitor_context_age: float
    rolling_threshold: int
    rolling_budget: Literal["floor", "average"]
    cache_breakpoint_offset: int


@dataclass(frozen=True, slots=True)
class RenderSettings:
    """What the renderers (chat and prefill) put around the room in a request."""

    name: str
    system_prompt: str
    max_tokens: int
    temperature: float | None
    stop_sequences: tuple[str, ...]
    prompt_caching: bool
    thinking: ThinkingConfig
    prefill_system: str
    prefill_user: str
    context_prefix: str
    recent_participant_count: int
    bot_run_join: Literal["paragraph", "space"] = "paragraph"  # between a bot's messages
    line_format: Literal["name", "irc"] = "name"  # chat mode: "Name: text" or "[time] <Name> text"
    timezone: str = "UTC"  # of the times "irc" lines show


@dataclass(frozen=True, slots=True)
class Shaping:
    """Which messages the context holds, and their marks (context/sources.py)."""

    other_bots: bool = True  # other bots' messages stay in the context
    history: bool = True  # more than the message that asked (and schedules, /ask)
    sources: bool = False  # each message of someone else marked with where it came from
