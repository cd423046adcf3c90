"""What an answer is owed for and made of: whether a message should make the bot answer
(``should_activate``), the ``Activation`` that owes it, and the ``Scene`` it is made of."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from salon.agent.answerkey import FirstSend
from salon.config import BotConfig
from salon.context import RollState, is_visible, m_command
from salon.model import (
    ChannelRef,
    Event,
    Message,
    MessageEvent,
    Participant,
    ScheduledEvent,
    Tag,
    ToolRecord,
)
from salon.platforms.base import Platform

__all__ = ["SCHEDULER", "Activation", "Scene", "joint", "should_activate"]

SCHEDULER = Participant("scheduler", "Scheduler")  # the author of a schedule's prompt


def _names_bot(text: str, name: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(name)}(?!\w)", text, re.IGNORECASE) is not None


def should_activate(
    message: Message,
    me: Participant,
    config: BotConfig,
    *,
    monitored: bool = False,
    rng: random.Random | None = None,
) -> bool:
    """Apply the bot's activation rules, cheapest first."""
    if message.author.id == me.id:
        return False
    if message.author.is_bot and not config.allow_bot_interactions:
        return False
    command = m_command(message.text)
    if command is not None:  # "m continue" goes on without a mention; other m words: nothing
        return command == "continue"
    if not is_visible(message, config.visibility):
        return False
    if message.channel.is_direct or monitored:
        return True
    if message.mentions_id(me.id) or message.reply_to_author_id == me.id:
        return True
    if config.reply_on_name and (
        _names_bot(message.text, config.name) or _names_bot(message.text, me.name)
    ):
        return True
    if config.reply_on_random > 0:
        return (rng or random.Random()).randrange(config.reply_on_random) == 0
    return False


@dataclass
class Activation:
    """One answer owed in a channel; triggers arriving while it waits join it."""

    channel: ChannelRef
    triggers: list[Event]
    queued_at: float | None = None  # time.perf_counter() when its first event arrived
    first_send: FirstSend | None = None  # set when it starts, if it answers schedules

    @property
    def trigger(self) -> Message | None:
        """The newest message that asked, when a message (not a schedule) did."""
        last = self.triggers[-1]
        return last.message if isinstance(last, MessageEvent) else None

    @property
    def requester(self) -> Participant:
        """Who answers approvals: the last person who asked, or whoever set the schedule."""
        for event in reversed(self.triggers):
            if isinstance(event, MessageEvent):
                return event.message.author
        last = self.triggers[-1]
        assert isinstance(last, ScheduledEvent)
        return last.schedule.created_by

    @property
    def askers(self) -> tuple[Participant, ...]:
        """Everyone this answer is for, once each, in the order they asked: the authors
        of its messages and the setters of its schedules."""
        people: dict[str, Participant] = {}
        for event in self.triggers:
            person = (
                event.message.author
                if isinstance(event, MessageEvent)
                else event.schedule.created_by
            )
            people.setdefault(person.id, person)
        return tuple(people.values())

    @property
    def monitored(self) -> bool:
        last = self.triggers[-1]
        return isinstance(last, MessageEvent) and Tag.MONITORED in last.message.tags

    def extra(self) -> list[Message]:
        """Messages outside the channel's history that end this context: schedules'
        prompts and ``/ask`` questions."""
        return [_extra_message(e) for e in self.triggers if _is_extra(e)]


@dataclass(frozen=True)
class Scene:
    platform: Platform
    channel: ChannelRef
    config: BotConfig
    messages: tuple[Message, ...]  # what the model sees, oldest first
    requester: Participant
    breakpoints: tuple[str, ...] = ()  # ids of messages that end a prompt-cache block
    records: tuple[ToolRecord, ...] = ()  # past tool calls among those messages
    rolled: RollState | None = None  # a new rolling state, to store once answered
    cut: bool = False  # the rolling window was cut back for this answer
    linked: str = ""  # the linked channels' block, before the history (salon.agent.links)
    memory: str = ""  # the notes in view, after the linked block (salon.agent.memoryblock)
    askers: tuple[Participant, ...] = ()  # everyone it answers (empty: the requester)

    @property
    def readers(self) -> tuple[Participant, ...]:
        """Whom the answer is built for: what it reads, all of them may read."""
        return self.askers or (self.requester,)

    @property
    def preamble(self) -> str:
        """What opens the request before the room's history: the linked channels, then
        the memory block."""
        return "\n\n".join(block for block in (self.linked, self.memory) if block)

    @property
    def after(self) -> str | None:
        """The newest message: this answer's tool calls go after it."""
        return self.messages[-1].id if self.messages else None


def joint(askers: tuple[Participant, ...]) -> Participant:
    """Whose rights an answer to ``askers`` reads with: the one person, or for several
    (a batch), nobody in particular: no id (so no one's own notes, no one's account, no
    other channel through the tools) and the roles all of them hold."""
    if len(askers) == 1:
        return askers[0]
    if not askers:
        return Participant("", "someone")
    common = [r for r in askers[0].roles if all(r in p.roles for p in askers[1:])]
    names = [p.name for p in askers]
    return Participant("", f"{', '.join(names[:-1])} and {names[-1]}", roles=tuple(common))


def _is_extra(event: Event) -> bool:
    return isinstance(event, ScheduledEvent) or Tag.ASKED in event.message.tags


def _extra_message(event: Event) -> Message:
    if isinstance(event, MessageEvent):
        return event.message
    schedule = event.schedule
    text = f"(scheduled task #{schedule.id}, set by {schedule.created_by.name}) {schedule.prompt}"
    stamp = int(event.due.timestamp())
    return Message(f"schedule-{schedule.id}-{stamp}", schedule.channel, SCHEDULER, text, event.due)
