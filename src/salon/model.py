"""Platform-neutral value types.

Adapters translate raw platform payloads into these at the edge; everything past the
adapter (agent, context builder, renderers, tools) sees only these types.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from functools import lru_cache
from typing import Any, Literal

__all__ = [
    "UNPARSED_ARGUMENTS",
    "Approval",
    "ApprovalDecision",
    "ApprovalRequest",
    "Attachment",
    "ChannelMark",
    "ChannelRef",
    "ChatLine",
    "Elicitation",
    "ElicitationAnswer",
    "Event",
    "FireStatus",
    "FormField",
    "Message",
    "MessageEvent",
    "OwedAnswer",
    "Participant",
    "Policy",
    "Reach",
    "RollState",
    "Schedule",
    "ScheduledEvent",
    "Tag",
    "ToolCall",
    "ToolRecord",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "Verdict",
    "clean_text",
    "name_key",
    "with_defaults",
]


def clean_text(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD. JSON from a platform may carry
    one, and no encoder accepts it: left in, it would make every later request that shows
    the message fail. The model types below clean their texts, so no adapter can forget."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


@lru_cache(maxsize=4096)
def name_key(name: str) -> str:
    """What two names are compared by: compatibility forms, case, invisible characters
    and runs of white space do not tell them apart."""
    folded = unicodedata.normalize("NFKC", name).casefold()
    visible = "".join(c for c in folded if unicodedata.category(c) != "Cf")
    return " ".join(visible.split())


@dataclass(frozen=True, slots=True)
class Participant:
    """Someone who writes in a channel: a person, another bot, or this bot."""

    id: str
    name: str
    is_bot: bool = False
    roles: tuple[str, ...] = field(default=(), compare=False)  # names and ids, where known
    # The strongest identity the platform vouches for (an IRC services account, else
    # nick!user@host); approvals compare it, as a name can be taken by someone else.
    identity: str = field(default="", compare=False)
    # The name is one the platform keeps for someone else (the application's owner, a
    # holder of an authorized role): the context tells this participant apart by id.
    borrowed: bool = field(default=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", clean_text(self.name))


@dataclass(frozen=True, slots=True)
class ChannelRef:
    """Where a message lives. ``key`` is unique across platforms."""

    platform: str
    id: str
    name: str = ""
    is_direct: bool = False
    guild_id: str | None = None
    parent_id: str | None = None
    # The Slack workspace: the server of the pinned-config link rule (``server_id``), and
    # unlike ``guild_id`` no config layer, note scope or budget.
    workspace_id: str | None = field(default=None, compare=False)
    # Rebuilt from a stored key (``from_key``): its guild, parent and kind are not known
    # until the platform is asked (the agent does so before it resolves the config).
    bare: bool = field(default=False, compare=False)

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.id}"

    @property
    def server_id(self) -> str | None:
        """The server whose channels a pinned ``.config`` here may link."""
        return self.guild_id or self.workspace_id

    @classmethod
    def from_key(cls, key: str) -> ChannelRef:
        """A bare reference from a stored key (platform and id only)."""
        platform, _, channel_id = key.partition(":")
        return cls(platform, channel_id, name=channel_id, bare=True)


@dataclass(frozen=True, slots=True)
class Attachment:
    """A file of a message, or one a tool made. ``url`` is where it can be fetched (a
    platform's file, a vendor's public link); ``label`` what it shows (a sprite's direction);
    ``path`` where Salon saved it (a generated file under the data dir)."""

    filename: str
    content_type: str
    size: int
    url: str = ""
    data: bytes | None = None
    label: str = ""
    path: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "filename", clean_text(self.filename))


@dataclass(frozen=True, slots=True)
class Message:
    """One message as the bot sees it, oldest-to-newest ordering is by ``created_at``."""

    id: str
    channel: ChannelRef
    author: Participant
    text: str
    created_at: datetime
    mentions: tuple[Participant, ...] = ()
    reply_to_id: str | None = None
    reply_to_author_id: str | None = None
    attachments: tuple[Attachment, ...] = ()
    reactions: tuple[str, ...] = ()
    tags: frozenset[Tag] = field(default_factory=frozenset)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", clean_text(self.text))

    def mentions_id(self, participant_id: str) -> bool:
        return any(p.id == participant_id for p in self.mentions)


@dataclass(frozen=True, slots=True)
class ChatLine:
    """One logged line of a channel, as the chat-log tools report it."""

    time: datetime
    user: str
    text: str
    kind: str = "message"


@dataclass(frozen=True, slots=True)
class MessageEvent:
    """A message arrived on a platform."""

    message: Message
    kind: Literal["message"] = "message"
    traceparent: str = ""  # a W3C trace context the event came with (pushed events)
    # Read back after a gap (salon.agent.delivery): the gap's length in seconds (-1: not
    # known); None for a message delivered live.
    gap: float | None = None
    # An answer an earlier process began and did not finish: its owed row is this one's.
    owed: bool = False

    @property
    def channel(self) -> ChannelRef:
        return self.message.channel


@dataclass(frozen=True, slots=True)
class ChannelMark:
    """The newest message the bot was handed in a channel, and when it last answered there
    (epoch seconds; 0: never); where a read-back after a gap starts (salon.agent.delivery)."""

    channel: ChannelRef
    last_id: str
    last_at: float
    answered_at: float = 0.0
    monitored: bool = False


@dataclass(frozen=True, slots=True)
class OwedAnswer:
    """A message an activation began to answer and did not finish (a stop, a crash), and
    the key its answer's first message went out under, if it was about to."""

    message: Message
    answer_key: str | None
    started_at: float


@dataclass(frozen=True, slots=True)
class Schedule:
    """A reminder or recurring task: a cron expression or one moment (``at``)."""

    id: int
    bot: str
    channel: ChannelRef
    prompt: str
    timezone: str
    cron: str | None = None
    at: datetime | None = None
    created_by: Participant = field(default_factory=lambda: Participant("", "someone"))
    next_due: datetime | None = None
    active: bool = True

    def describe(self) -> str:
        when = f"cron '{self.cron}'" if self.cron else f"once at {self.at:%Y-%m-%d %H:%M %Z}"
        due = f", next {self.next_due:%Y-%m-%d %H:%M UTC}" if self.next_due else ""
        return f"#{self.id} {when} ({self.timezone}{due}): {self.prompt}"


@dataclass(frozen=True, slots=True)
class ScheduledEvent:
    """A schedule came due: the bot acts on ``schedule.prompt`` in its channel."""

    schedule: Schedule
    due: datetime
    kind: Literal["scheduled"] = "scheduled"
    # Taken over from a process that stopped: the key its answer's first message went out
    # under (None: nothing was sent), to ask the platform whether it was shown.
    answer_key: str | None = None

    @property
    def channel(self) -> ChannelRef:
        return self.schedule.channel


Event = MessageEvent | ScheduledEvent


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """A question to a person: may this tool run? Only ``requester`` or a member of one of
    ``authorized_roles`` may answer; no answer within ``timeout`` seconds counts as cancel.
    With ``by_others`` (policy ``ask_admin``) the requester may only cancel: approval takes
    someone else of an authorized role, or the operator (with no roles listed, only them)."""

    tool: str
    description: str
    requester: Participant
    authorized_roles: tuple[str, ...] = ()
    timeout: float = 300.0
    by_others: bool = False

    def may_answer(self, *, requester: bool, in_role: bool, operator: bool, approve: bool) -> bool:
        """Whether a person may give this answer: the platform says whether they are the
        requester, hold an authorized role, or are the operator (whatever that means there)."""
        if not self.by_others:
            return requester or in_role
        if operator:
            return True
        if requester:
            return not approve
        return in_role and bool(self.authorized_roles)

    def refusal(self) -> str:
        """The line for someone who may not answer."""
        name = self.requester.name
        if not self.by_others:
            return f"Only {name} can answer this."
        if self.authorized_roles:
            return (
                f"Only the bot's operator or someone other than {name} with an authorized "
                f"role can approve this ({name} can cancel it)."
            )
        return "Only the bot's operator can approve this."


@dataclass(frozen=True, slots=True)
class FormField:
    """One field of a form a tool server asks a person to fill in (MCP elicitation): a
    ``string``, ``number``, ``integer`` or ``boolean``, or one of ``options`` (an enum,
    each with its ``labels`` entry as shown, where the server titled them)."""

    name: str
    kind: str
    title: str = ""
    description: str = ""
    options: tuple[str, ...] = ()
    labels: tuple[str, ...] = ()
    required: bool = False
    default: str | int | float | bool | None = None

    @property
    def label(self) -> str:
        return self.title or self.name

    def parse(self, text: str) -> str | int | float | bool:
        """The value ``text`` gives this field; ValueError (saying what is wanted) if none."""
        text = text.strip()
        if self.options:
            for option, label in zip(self.options, self.labels or self.options, strict=True):
                if text.lower() in (option.lower(), label.lower()):
                    return option
            raise ValueError(f"one of {', '.join(self.labels or self.options)}")
        if self.kind == "boolean":
            if text.lower() in ("y", "yes", "true", "on", "1"):
                return True
            if text.lower() in ("n", "no", "false", "off", "0"):
                return False
            raise ValueError("yes or no")
        if self.kind == "integer":
            try:
                return int(text)
            except ValueError:
                raise ValueError("a whole number") from None
        if self.kind == "number":
            try:
                return float(text)
            except ValueError:
                raise ValueError("a number") from None
        return text


def with_defaults(
    fields: tuple[FormField, ...], content: dict[str, str | int | float | bool]
) -> dict[str, str | int | float | bool]:
    """``content`` with every field left out that has a default filled in with it (as a
    form shows the default and the person leaves it)."""
    filled = dict(content)
    for one in fields:
        if one.name not in filled and one.default is not None:
            filled[one.name] = one.default
    return filled


@dataclass(frozen=True, slots=True)
class Elicitation:
    """A tool server's question to the person whose call it is running (MCP elicitation):
    ``message`` and a form of ``fields``. Only ``requester`` may answer; no answer within
    ``timeout`` seconds declines."""

    server: str
    message: str
    fields: tuple[FormField, ...]
    requester: Participant
    timeout: float = 300.0


@dataclass(frozen=True, slots=True)
class ElicitationAnswer:
    """A platform's answer to an ``Elicitation``: ``accept`` with the form's ``content``,
    ``decline`` (said no, or no answer in time) or ``cancel``; and who gave it."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, str | int | float | bool] = field(default_factory=dict)
    by: str = ""


class FireStatus(StrEnum):
    """Where one occurrence of a schedule stands (a row of ``schedule_fires``)."""

    CLAIMED = "claimed"
    """Taken by a process, its answer owed (taken over at the next start if it stopped)."""
    DONE = "done"
    """Answered (also by a process that stopped after its answer went out), or its failure
    told."""
    DROPPED = "dropped"
    """Not answered: its channel is on a platform this process does not run."""
    SKIPPED = "skipped"
    """Not answered: a stopped process left it for longer than the misfire grace."""


class Approval(StrEnum):
    """Where an approval question stands. A platform answers with one of the last three;
    the store also records ``failed`` (the question could not be asked) and ``closed``
    (left open by a stop, closed at the next start)."""

    PENDING = "pending"
    APPROVED = "approved"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    FAILED = "failed"
    CLOSED = "closed"


@dataclass(frozen=True, slots=True)
class ApprovalDecision:
    """A platform's answer to an ``ApprovalRequest``: the answer, and who gave it (empty
    on a timeout)."""

    answer: Approval
    by: str = ""


class Policy(StrEnum):
    """Who decides whether a tool may run: it runs, a person is asked first, or never."""

    ALLOW = "allow"
    ASK = "ask"
    ASK_ADMIN = "ask_admin"  # asked of someone else of an authorized role, or the operator
    DENY = "deny"


class Verdict(StrEnum):
    """What happens to one tool call: it runs, it is refused (the model is told), or the
    whole answer stops (a person said no, or nobody answered)."""

    RUN = "run"
    DENY = "deny"
    CANCEL = "cancel"


class Tag(StrEnum):
    """What an adapter knows of a message at the edge, carried to the agent and renderers."""

    MONITORED = "monitored"
    """The channel is monitored (the bot reads every message there)."""
    ASKED = "asked"
    """A question asked outside the channel's history (a slash command)."""
    REPLY_CHAIN = "reply_chain"
    """Brought into the context by a reply chain, from beyond the window."""
    SOURCED = "sourced"
    """Marked in the context with where it came from (``context_sources``)."""
    NOTE = "note"
    """Salon's own words in a channel (a failure, an approval question, a cancelled tool),
    not the bot's conversation; no bot reads them back as something said."""


UNPARSED_ARGUMENTS = "__unparsed_arguments__"
"""Key of a tool call's arguments when the model's JSON could not be parsed."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returned: text for the model, files (e.g. images) for the channel."""

    call_id: str
    content: str
    is_error: bool = False
    attachments: tuple[Attachment, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "content", clean_text(self.content))


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one LLM call; cache fields are zero where the vendor has none."""

    input_tokens: int = 0
    output_tokens: int = 0  # reasoning included: it is billed as output
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0  # the part of ``output_tokens`` the model spent thinking
    # The part of ``cache_write_tokens`` written for 1 hour (Anthropic bills it 2x input).
    cache_write_1h_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
            self.reasoning_tokens + other.reasoning_tokens,
            self.cache_write_1h_tokens + other.cache_write_1h_tokens,
        )


@dataclass(frozen=True, slots=True)
class Thought:
    """One piece of a model's reasoning, as its vendor returned it.

    ``text`` is the readable reasoning (empty when the vendor hides it). What a vendor needs
    back within a tool loop is kept exactly as received: Anthropic's ``signature`` of a
    thinking block, or the opaque ``redacted`` data of a ``redacted_thinking`` block;
    Gemini's thought signature (with ``call_id``, the function call it came on, or "" for a
    text part); an OpenAI-compatible server's ``details`` (OpenRouter's
    ``reasoning_details``, as JSON text). ``vendor`` and ``model`` say who wrote it: a
    thought goes back only to the same vendor and model, never as visible text.
    """

    vendor: str
    model: str
    text: str = ""
    signature: str = ""
    redacted: str = ""
    call_id: str = ""
    details: str = ""


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One tool as the registry knows it.

    ``name`` is what the model sees (prefixed with the server's name only where two servers
    offer the same name); ``remote_name`` is what the server calls it.
    """

    name: str
    server: str
    remote_name: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool | None = None
    destructive: bool | None = None


@dataclass(frozen=True, slots=True)
class Reach:
    """What a tool call read with its askers' rights beyond its channel (``askers``: their
    ids; ``channels``: other channels; ``personal``: what only they may read; ``notes``:
    notes, never replayed: the store is their source), by ``salon.tools.reach``; ``shown``:
    the fixed line standing for it where it may not go, the same whoever reads."""

    askers: tuple[str, ...]
    shown: str
    channels: tuple[str, ...] = ()
    personal: bool = False
    notes: bool = False


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One call with its result, and the message it came after (where it goes in context).

    ``thoughts``: the reasoning of the assistant turn that made the call, as its vendor
    wants it back (a restart in the middle of a tool loop sends it again); of several
    calls of one turn, only the first carries them. ``reach``: what it read with its
    askers' rights (None: nothing beyond its channel). ``said``: what the turn held
    before its calls, as the tool loop sent it back (its words; in the text protocol, its
    text before the calls block), on the first call too; ``posted_as``: the chat messages
    those words went out as, left out of any context that carries the record (the words
    go to the model once, where the loop put them). ``same_turn``: a later call of the
    turn of the record before it (the turn's calls go back as one turn)."""

    time: datetime
    channel: str
    after_message_id: str | None
    call: ToolCall
    result: ToolResult
    thoughts: tuple[Thought, ...] = ()
    reach: Reach | None = None
    said: str = ""
    posted_as: tuple[str, ...] = ()
    same_turn: bool = False


@dataclass(frozen=True)
class RollState:
    """What must survive between activations (and restarts) for one bot and channel."""

    anchor_id: str  # the oldest message kept since the last roll
    breakpoint_id: str | None  # the message the cache breakpoint sits on
    head_id: str  # the newest message at the last roll
    breakpoint_time: datetime | None = None  # where to look if that message vanishes
    tail_id: str | None = None  # the newest message of the previous activation
