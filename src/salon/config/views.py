"""What each part of the code needs of a bot's config, as small frozen records.

``BotConfig`` is the YAML's face: every key of a bot file, most of them read by one part.
The parts that run for every message take only their own record, made once per effective
config (``BotConfig.visibility``, ``.window``, ``.shaping``, ``.render``), so a reader sees
what a renderer depends on and a test can build one without a whole config.

A setting is written once, in the model: ``max_tokens: Annotated[int, RENDER]`` makes it a
field of ``RenderSettings`` under the same name. A record below only restates its fields'
types, for mypy; ``Derived`` makes it from a model with no field copied by hand, and refuses
at import a record whose fields and the model's marks disagree (a test compares the types).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, get_origin

from pydantic import BaseModel

from salon.config.providers import ThinkingConfig

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

__all__ = [
    "RENDER",
    "SHAPING",
    "VISIBILITY",
    "WINDOW",
    "Derived",
    "In",
    "RenderSettings",
    "Shaping",
    "Visibility",
    "WindowSettings",
]

R = TypeVar("R", bound="DataclassInstance")


@dataclass(frozen=True, slots=True)
class In:
    """Marks a model field as the field of the same name of ``record``."""

    record: type[Any]


# The records hold no defaults and no meanings: those are the model's (BotConfig).


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
    recency_window_age: float | None
    hard_max_characters: int
    monitor_context_messages: int
    monitor_context_age: float
    rolling_threshold: int
    rolling_budget: Literal["floor", "average"]
    cache_breakpoint_offset: int


@dataclass(frozen=True, slots=True)
class Shaping:
    """Which messages the context holds, and their marks (context/sources.py)."""

    other_bots_in_context: bool
    context_history: bool
    context_sources: bool


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
    bot_run_join: Literal["paragraph", "space"]
    line_format: Literal["name", "irc"]
    timezone: str


VISIBILITY = In(Visibility)
WINDOW = In(WindowSettings)
SHAPING = In(Shaping)
RENDER = In(RenderSettings)


def _marked(record: type[Any], model: type[BaseModel]) -> dict[str, Any]:
    """The model's fields marked ``In(record)``, with their types."""
    mark = In(record)
    return {
        name: field.annotation
        for name, field in model.model_fields.items()
        if mark in field.metadata
    }


class Derived(Generic[R]):
    """Makes a ``record`` from an instance of ``model``: each of its fields is the model's
    attribute of that name, a field marked for it or another record the model makes (as
    ``WindowSettings.visibility``). A list becomes a tuple, so the record stays immutable."""

    __slots__ = ("_names", "_record", "_tuples")

    def __init__(self, record: type[R], model: type[BaseModel]) -> None:
        marked = _marked(record, model)
        names = tuple(field.name for field in fields(record))
        problems = [
            f"{name} is marked for it but is not one of its fields"
            for name in marked
            if name not in names
        ]
        problems += [
            f"{name} is neither a field marked for it nor a record the model makes"
            for name in names
            if name not in marked and not isinstance(getattr(model, name, None), cached_property)
        ]
        if problems:
            raise TypeError(f"{record.__name__} of {model.__name__}: {'; '.join(problems)}")
        self._record = record
        self._names = names
        self._tuples = tuple(
            i for i, name in enumerate(names) if get_origin(marked.get(name)) is list
        )

    def __call__(self, source: BaseModel) -> R:
        values = [getattr(source, name) for name in self._names]
        for i in self._tuples:
            values[i] = tuple(values[i])
        return self._record(*values)
