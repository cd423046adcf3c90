"""The agent's side of tool use: offering tools, gating calls, running them, feeding back.

``ToolRunner.prepare`` puts the tools into a request (native definitions, or the text
protocol's ephemeral list); ``run`` applies the approval policy, runs the approved calls
concurrently, logs and shows them; ``follow_up`` builds the next request of the loop.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from salon.agent.activation import joint
from salon.agent.conversation.progress import ProgressRelay
from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig, Redactor
from salon.config.pipeline import internal_tools
from salon.context.records import placeholder, record_id
from salon.context.textproto import CALLS_CLOSE, CALLS_OPEN, format_results, render_tool_list
from salon.errors import PlatformError
from salon.llm.base import (
    ChatMessage,
    LLMRequest,
    TextPart,
    ThinkingPart,
    ToolDefinition,
    ToolResultPart,
    ToolUsePart,
)
from salon.model import (
    Approval,
    ApprovalRequest,
    ChannelRef,
    Elicitation,
    ElicitationAnswer,
    FormField,
    Participant,
    Policy,
    Reach,
    Thought,
    ToolCall,
    ToolResult,
    ToolSpec,
    Verdict,
)
from salon.platforms.base import Capability, Platform
from salon.store.base import Store
from salon.tools.base import TRACE_PARENT, Progress
from salon.tools.caller import Caller
from salon.tools.display import flatten, tool_log_text
from salon.tools.inline import scrub
from salon.tools.link import Consent, Elicit
from salon.tools.log import ToolLog, ToolRecord
from salon.tools.policy import decide, statically_denied
from salon.tools.reach import BUILTIN_SERVER, other_channel, reach_of
from salon.trace import ToolTrace

__all__ = ["Outcome", "ToolRunner", "Tools"]

_TRACE_RESULT_CHARS = 20_000  # of a tool's result kept in a trace
_SUMMARY_CHARS = 200  # of a call's arguments in the note that shows its files
_QUESTIONS_KEPT = 20  # a server's questions during one call noted on the trace
_jobs = itertools.count(1)  # progress keys: a model's call ids repeat across answers

logger = logging.getLogger(__name__)


class Tools(Protocol):
    """What the runner needs of a ToolHub."""

    def specs(self) -> list[ToolSpec]: ...

    def get(self, name: str) -> ToolSpec | None: ...

    async def call(
        self,
        call: ToolCall,
        *,
        caller: Caller | None = None,
        progress: Progress | None = None,
        elicit: Elicit | None = None,
        consent: Consent | None = None,
    ) -> ToolResult: ...


@dataclass
class Outcome:
    results: list[ToolResult] = field(default_factory=list)
    cancelled: str | None = None  # the tool whose approval was refused or timed out
    # The vendor's id of each call -> the id its record keeps (``record_id``): the loop's
    # next request names the call as every later request will, so the prefix it cached is
    # read again after the loop.
    ids: dict[str, str] = field(default_factory=dict)


class Timing(NamedTuple):
    """When a tool call ran: milliseconds, the epoch second it started, its span id (0:
    no trace context travelled with it)."""

    ms: float
    started_at: float
    span_id: int


_NOT_RUN = Timing(0.0, 0.0, 0)


@dataclass
class Turn:
    """One completion of the loop: what it said, the calls it made, the raw text (text mode)."""

    text: str = ""
    calls: list[ToolCall] = field(default_factory=list)
    raw: str = ""
    cut_off: bool = False  # the stream broke after part of the answer was shown
    thoughts: list[Thought] = field(default_factory=list)  # go back first on the turn


@dataclass
class _Refusal:
    """Whether the provider refused a request offering tools: one answer for a bot's
    runner and every per-config runner made from it."""

    refused: bool = False


class ToolRunner:
    def __init__(
        self,
        *,
        bot: str,
        config: BotConfig,
        tools: Tools,
        store: Store,
        log: ToolLog | None,
        redactor: Redactor | None = None,
        clock: Callable[[], datetime] | None = None,
        refusal: _Refusal | None = None,
    ) -> None:
        """``clock``: when a call is recorded (the platform's messages' clock).
        ``refusal``: shared with the runner this one is made from (``with_config``)."""
        self.bot = bot
        self._now = clock or (lambda: datetime.now(UTC))
        self.config = config
        self.tools = tools
        self.store = store
        self.log = log
        self.redact = redactor or Redactor()
        self._refusal = refusal or _Refusal()

    @property
    def refused_by_provider(self) -> bool:
        """The model said no to native tools once: this bot stops offering them."""
        return self._refusal.refused

    @refused_by_provider.setter
    def refused_by_provider(self, refused: bool) -> None:
        self._refusal.refused = refused

    def with_config(self, config: BotConfig) -> ToolRunner:
        """This runner as a channel's config (mode, tool mode) would have it: the same
        tools, store, log and clock, and the same memory of a provider's refusal."""
        if config is self.config:
            return self
        return ToolRunner(
            bot=self.bot,
            config=config,
            tools=self.tools,
            store=self.store,
            log=self.log,
            redactor=self.redact,
            clock=self._now,
            refusal=self._refusal,
        )

    @property
    def planner(self) -> bool:
        """A JSON plan first, then the answer (``tool_mode: planner``)."""
        return self.config.tool_mode == "planner"

    @property
    def text_mode(self) -> bool:
        """Prefill mode speaks the text protocol (the transcript has no tool turns) unless
        the planner is asked for."""
        if self.planner:
            return False
        return self.config.tool_mode == "text" or self.config.mode == "prefill"

    def offered(self) -> list[ToolSpec]:
        hidden = internal_tools(self.config.keywords)  # reached only through their keywords
        return [
            s
            for s in self.tools.specs()
            if s.name not in hidden and not statically_denied(s, self.config)
        ]

    def native_offered(self) -> bool:
        """Whether the next request offers tools natively (so past calls can be native
        tool turns, which a vendor accepts only alongside tool definitions)."""
        if self.text_mode or self.planner or self.refused_by_provider:
            return False
        return bool(self.offered())

    def prepare(self, request: LLMRequest) -> LLMRequest:
        specs = self.offered()
        if not specs or self.planner or (self.refused_by_provider and not self.text_mode):
            return request
        if not self.text_mode:
            definitions = tuple(
                ToolDefinition(s.name, s.description, s.input_schema) for s in specs
            )
            return replace(request, tools=definitions)
        text = render_tool_list(specs) + "\n\n"
        listing = TextPart(text)
        messages = list(request.messages)
        if messages and messages[0].role == "user":
            messages[0] = ChatMessage("user", (listing, *messages[0].parts))
        else:
            messages.insert(0, ChatMessage("user", (listing,)))
        return replace(
            request,
            messages=tuple(messages),
            stop=(*request.stop, CALLS_CLOSE),
            tool_listing=text,
        )

    def schemas(self) -> dict[str, dict[str, object]]:
        return {s.name: s.input_schema for s in self.tools.specs()}

    def said(self, turn: Turn) -> str:
        """What the loop sends back of ``turn`` before its calls, and its first call's
        record keeps for every later request: its words natively, else its text before
        the calls block (redacted, as anything going back to the model)."""
        if self.text_mode:
            return self._clean(turn.raw.partition(CALLS_OPEN)[0])
        return self.redact(turn.text) if turn.text.strip() else ""

    def follow_up(
        self,
        request: LLMRequest,
        turn: Turn,
        results: Sequence[ToolResult],
        ids: Mapping[str, str] | None = None,
    ) -> LLMRequest:
        """The loop's next request. ``ids``: each call under the id its record keeps."""
        # Encoded data the model wrote into its calls is not repeated back to it.
        if not self.text_mode:
            named = ids or {}
            said = (TextPart(words),) if (words := self.said(turn)) else ()
            calls = (
                replace(c, id=named.get(c.id, c.id), arguments=_cleaned(c.arguments, scrub))
                for c in turn.calls
            )
            thought = tuple(  # a signature goes back on its call, under the call's new id
                ThinkingPart(replace(t, call_id=named.get(t.call_id, t.call_id)))
                for t in turn.thoughts
            )
            asked = ChatMessage("assistant", (*thought, *said, *(ToolUsePart(c) for c in calls)))
            answered = ChatMessage(
                "user",
                tuple(
                    ToolResultPart(replace(r, call_id=named.get(r.call_id, r.call_id)))
                    for r in results
                ),
            )
            return replace(request, messages=(*request.messages, asked, answered))
        # Text protocol: the results join the bot's own partial turn, which it continues.
        _, opened, block = turn.raw.partition(CALLS_OPEN)
        written = f"{self.said(turn)}{scrub(opened + block)}{CALLS_CLOSE}\n"
        written += f"{format_results(turn.calls, results)}\n"
        messages = list(request.messages)
        if messages and messages[-1].role == "assistant":
            last = messages[-1]
            messages[-1] = ChatMessage("assistant", (*last.parts, TextPart(written)))
        else:
            messages.append(ChatMessage("assistant", (TextPart(written),)))
        return replace(request, messages=tuple(messages))

    async def run(
        self,
        platform: Platform,
        channel: ChannelRef,
        requester: Participant,
        calls: Sequence[ToolCall],
        after_message_id: str | None,
        *,
        recorder: Recorder | None = None,
        thoughts: Sequence[Thought] = (),
        askers: Sequence[Participant] = (),
        said: str = "",
        posted_as: Sequence[str] = (),
    ) -> Outcome:
        """Run a turn's calls; ``thoughts`` (the turn's reasoning), ``said`` (what it said
        before its calls: ``said()``) and ``posted_as`` (the messages it went out as) go with
        the first call's record. With several ``askers``, calls run with the rights all share
        (``joint``)."""
        people = tuple(askers) or (requester,)
        caller = Caller(channel, joint(people), after_message_id or "")
        ready: list[ToolCall] = []
        refused: dict[str, ToolResult] = {}
        verdicts: dict[str, tuple[Verdict, dict[str, Any] | None]] = {}
        for call in calls:
            verdict, asked = await self._gate(platform, channel, requester, call)
            verdicts[call.id] = (verdict, asked)
            if verdict is Verdict.CANCEL:
                if recorder is not None:
                    cancelled = ToolResult(call.id, "not run: the person asked said no", True)
                    self._trace(recorder, call, cancelled, _NOT_RUN, verdicts[call.id])
                return Outcome(cancelled=call.name)
            if verdict is Verdict.DENY:
                reason = f"{call.name} is not allowed here (denied by policy)"
                refused[call.id] = ToolResult(call.id, reason, is_error=True)
            else:
                ready.append(call)
        questions: dict[str, list[dict[str, Any]]] = {c.id: [] for c in ready}
        trace = (recorder.trace_id, recorder.sampled) if recorder is not None else (0, True)
        ran = await asyncio.gather(
            *(
                self._timed(
                    platform,
                    channel,
                    c,
                    caller=caller,
                    elicit=self._asker(platform, channel, requester, questions[c.id]),
                    consent=_consenter(platform, channel, requester),
                    trace=trace,
                )
                for c in ready
            )
        )
        by_id = {r.call_id: r for r, _ in ran} | refused
        took = {r.call_id: timing for r, timing in ran}
        # No configured secret, and no encoded file, travels on: not to the model, the tool
        # log, the trace or the channel (the hub already keeps files out; this is the seal).
        results = [replace(by_id[c.id], content=self._clean(by_id[c.id].content)) for c in calls]
        ids: dict[str, str] = {}
        for n, (call, result) in enumerate(zip(calls, results, strict=True)):
            shown = replace(call, arguments=_cleaned(call.arguments, self._clean))
            reach = await self._reach(platform, channel, shown, result, people)
            made = ToolRecord(
                self._now(), channel.key, after_message_id, shown, result, reach=reach
            )
            if n == 0:  # the turn's reasoning and words go with its first call
                made = replace(
                    made, thoughts=tuple(thoughts), said=said, posted_as=tuple(posted_as)
                )
            else:
                made = replace(made, same_turn=True)
            record = self._record(made)
            ids[call.id] = record_id(record)
            if recorder is not None:
                timing = took.get(call.id, _NOT_RUN)
                put = tuple(questions.get(call.id, ()))
                self._trace(recorder, shown, result, timing, verdicts[call.id], asked=put)
            await self._show(platform, channel, record)
        return Outcome(results, ids=ids)

    async def _reach(
        self,
        platform: Platform,
        channel: ChannelRef,
        call: ToolCall,
        result: ToolResult,
        people: Sequence[Participant],
    ) -> Reach | None:
        """What the call read with its askers' rights (``salon.tools.reach``)."""
        spec = self.tools.get(call.name)
        tool = spec.remote_name if spec is not None and spec.server == BUILTIN_SERVER else None
        other = other_channel(tool or "", call.arguments, channel.key)
        try:
            found = await platform.find_channel(other.partition(":")[2]) if other else None
        except PlatformError:
            found = None  # the placeholder names it by its id
        names = {other: f"#{found.name.lstrip('#')}"} if other and found and found.name else {}
        return reach_of(tool, call, result, channel=channel, askers=people, names=names)

    def _clean(self, text: str) -> str:
        return scrub(self.redact(text))

    def _asker(
        self,
        platform: Platform,
        channel: ChannelRef,
        requester: Participant,
        asked: list[dict[str, Any]],
    ) -> Elicit:
        """How a server running a call asks its requester a question (MCP elicitation),
        noting each question, its answer and who gave it in ``asked`` (for the trace)."""

        async def elicit(
            server: str, message: str, fields: tuple[FormField, ...]
        ) -> ElicitationAnswer:
            request = Elicitation(
                server, message, fields, requester, timeout=self.config.approval_timeout
            )
            answer = await platform.elicit(channel, request)
            if len(asked) < _QUESTIONS_KEPT:
                asked.append(
                    {
                        "server": server,
                        "message": message[:_SUMMARY_CHARS],
                        "answer": answer.action,
                        "by": answer.by,
                        "requester": requester.name,
                        "at": datetime.now(UTC).isoformat(),
                    }
                )
            return answer

        return elicit

    async def _timed(
        self,
        platform: Platform,
        channel: ChannelRef,
        call: ToolCall,
        *,
        caller: Caller,
        elicit: Elicit,
        consent: Consent,
        trace: tuple[int, bool],
    ) -> tuple[ToolResult, Timing]:
        """The call's result and its timing, run for ``caller`` (who asks, where, with
        which roles). ``elicit`` takes the server's questions to the requester. With a
        trace context (``trace``: the activation's trace id, 0 for none, and whether it is
        sampled) the call gets a span id of its own, which an MCP server receives as the
        call's ``traceparent``."""
        trace_id, sampled = trace
        span = (random.getrandbits(64) or 1) if trace_id else 0
        if span:  # this call's task has its own context: nothing else sees the value
            TRACE_PARENT.set(f"00-{trace_id:032x}-{span:016x}-{'01' if sampled else '00'}")
        started, at = time.perf_counter(), time.time()
        relay = ProgressRelay(platform, channel, call.name, f"{call.id}#{next(_jobs)}")
        try:
            result = await self.tools.call(
                call, caller=caller, progress=relay.report, elicit=elicit, consent=consent
            )
        except BaseException:
            relay.abandon()  # a stop: the channel's last word is not ours to add
            raise
        took = time.perf_counter() - started
        await relay.finish(took, failed=result.is_error)
        return result, Timing(took * 1000, at, span)

    def _trace(
        self,
        recorder: Recorder,
        call: ToolCall,
        result: ToolResult,
        took: Timing,
        verdict: tuple[Verdict, dict[str, Any] | None],
        *,
        asked: tuple[dict[str, Any], ...] = (),
    ) -> None:
        """Note a call on the trace, with its timing."""
        text = result.content
        if len(text) > _TRACE_RESULT_CHARS:
            text = text[:_TRACE_RESULT_CHARS] + " …[cut for the trace]"
        recorder.tool(
            ToolTrace(
                call_id=call.id,
                name=call.name,
                arguments=call.arguments,
                result=text,
                is_error=result.is_error,
                duration_ms=took.ms,
                verdict=str(verdict[0]),
                approval=verdict[1],
                started_at=took.started_at,
                span_id=took.span_id,
                files=tuple(file.path for file in result.attachments if file.path),
                asked=asked,
            )
        )

    async def _gate(
        self, platform: Platform, channel: ChannelRef, requester: Participant, call: ToolCall
    ) -> tuple[Verdict, dict[str, Any] | None]:
        """The call's verdict, and who answered its approval and when (when asked)."""
        spec = self.tools.get(call.name)
        if spec is None:
            return Verdict.RUN, None  # the hub answers unknown tools with an error result
        policy = decide(spec, call.arguments, self.config)
        if policy == Policy.ALLOW:
            return Verdict.RUN, None
        if policy == Policy.DENY:
            return Verdict.DENY, None
        arguments = json.dumps(call.arguments, ensure_ascii=False)
        approval = await self.store.open_approval(
            self.bot, channel.key, call.name, arguments, requester.id
        )
        request = ApprovalRequest(
            tool=call.name,
            description=f"{call.name} ({flatten(call.arguments) or 'no arguments'})",
            requester=requester,
            authorized_roles=tuple(self.config.authorized_roles),
            timeout=self.config.approval_timeout,
            by_others=policy == Policy.ASK_ADMIN,
        )
        try:
            decision = await platform.request_approval(channel, request)
        except Exception:
            await self.store.close_approval(approval, Approval.FAILED)
            raise
        # Cancelled (shutdown) leaves it pending on purpose: the next start closes it aloud.
        await self.store.close_approval(approval, decision.answer)
        asked = {
            "answer": str(decision.answer),
            "by": decision.by,
            "requester": requester.name,
            "at": datetime.now(UTC).isoformat(),
        }
        verdict = Verdict.RUN if decision.answer == Approval.APPROVED else Verdict.CANCEL
        return verdict, asked

    def _record(self, record: ToolRecord) -> ToolRecord:
        if self.log is None:
            return record
        try:
            self.log.append(record)
        except OSError:
            logger.exception("could not write the tool log for %s", record.channel)
        return record

    async def _show(self, platform: Platform, channel: ChannelRef, record: ToolRecord) -> None:
        """Show the call in the channel: whole, or outside a DM, when it reached what
        not everyone there may read, as its placeholder line (no files)."""
        if record.reach is not None and not channel.is_direct:
            record = placeholder(record)
        call, result = record.call, record.result
        try:
            if self.config.tool_output_visible:
                text = tool_log_text(self.config.name, call, result, platform.max_message_chars)
                await platform.send_tool_log(channel, text)
            if result.attachments:
                summary = flatten(call.arguments)
                if len(summary) > _SUMMARY_CHARS:
                    summary = summary[: _SUMMARY_CHARS - 1] + "…"
                text = f"({call.name}: {summary})" if summary else f"({call.name})"
                await platform.send(channel, text, files=result.attachments, note=True)
        except Exception:  # showing is a courtesy; the answer must go on
            logger.exception("could not show the use of %s in %s", call.name, channel.key)


def _consenter(platform: Platform, channel: ChannelRef, requester: Participant) -> Consent:
    """How a per_user server's link to connect the requester's account reaches them: in a
    direct message, never in the channel (the link is theirs alone), with a short line in
    the channel; where there is no direct message, the channel says what instead."""

    async def consent(server: str, link: str | None, instead: str) -> bool:
        sent = False
        if link is not None and platform.can(Capability.DIRECT_MESSAGES):
            text = (
                f"To let me use {server} as you, connect your account here (the link is "
                f"yours alone, do not pass it on; good for 5 minutes):\n{link}"
            )
            try:
                await platform.send_direct(requester, text)
                sent = True
            except PlatformError as exc:
                logger.warning("could not send %s the link for %s: %s", requester.id, server, exc)
        said = (
            f"I sent you a link in a DM to connect your {server} account."
            if sent
            else f"{server} needs your own account; {instead}."
        )
        try:
            await platform.send(channel, f"{requester.name}: {said}", note=True)
        except PlatformError as exc:  # the tool's result still tells the model
            logger.warning("could not say in %s where the link went: %s", channel.key, exc)
        return sent

    return consent


def _cleaned(value: Any, clean: Callable[[str], str]) -> Any:
    """``value`` (JSON-like) with every string passed through ``clean``."""
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, dict):
        return {k: _cleaned(v, clean) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v, clean) for v in value]
    return value
