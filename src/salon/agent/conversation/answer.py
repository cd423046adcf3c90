"""The conversation: from a scene to the bot's answer in the channel.

Render the scene (chat turns or a transcript), stream the model's answer into the channel
a paragraph at a time, run the tools it asks for (native calls, the text protocol, or a
JSON plan first) and feed their results back until it is done.

A stream can break. Before anything reached the channel, the completion is asked for
again (the model's text so far is dropped); after, what was shown stays and a note says
the answer was cut off. A stream that ends without the model's finish reason is a broken
stream, not an answer.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field, replace
from typing import Literal, Protocol

from salon.agent.activation import Scene
from salon.agent.conversation.output import LeadingLabel, ParagraphStream
from salon.agent.conversation.planner import answer_request, parse_plan, planning_request
from salon.agent.conversation.prompt import fill_prompt
from salon.agent.conversation.sidecall import side_call
from salon.agent.conversation.stream import IncompleteStream, Streamed, read_stream, record_usage
from salon.agent.conversation.toolrules import merge_results, split_calls
from salon.agent.conversation.toolrunner import ToolRunner, Turn
from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig, Redactor
from salon.context import ChatMemo, render_chat, render_prefill
from salon.context.prefill import PrefillMemo
from salon.context.rolling import activation_gaps
from salon.context.sources import irc_logs_block
from salon.context.textproto import CallTextFilter, parse_calls
from salon.context.view import ByChannel
from salon.errors import PlatformError, ProviderError, StoreError
from salon.llm.base import (
    LLMRequest,
    Provider,
    ProviderTraits,
)
from salon.llm.retry import backoff_delay
from salon.model import ChannelRef, ChatLine, Message, Tag, ToolCall, Usage
from salon.platforms.base import Capability, Platform
from salon.store.base import Store

__all__ = ["ChannelLogs", "Conversation", "Reply"]

logger = logging.getLogger(__name__)

_MEMO_MESSAGES = 200_000  # messages the channels' render memos may hold between them
_SPOILER_CHARS = 200  # of the reasoning, in a spoiler under the answer
_POST_BACKOFF_MAX = 60.0  # seconds between tries of a post the platform could not take


@dataclass
class Reply:
    """An answer on its way to a channel: paragraphs go out as soon as they are complete.
    Everything posted passes the redactor: no configured secret reaches a channel."""

    platform: Platform
    channel: ChannelRef
    redact: Redactor
    paragraphs: ParagraphStream
    recorder: Recorder
    usage: Usage = field(default_factory=Usage)
    sent: int = 0
    thinking: str = ""  # the reasoning of the answer's calls, for a spoiler
    reply_to: str | None = None  # the trigger the answer's first message replies to
    retry_for: float = 0.0  # seconds a post the platform failed to take is tried again
    posted: list[str] = field(default_factory=list)  # the ids of the answer's messages

    async def write(self, text: str) -> None:
        for piece in self.paragraphs.feed(text):
            await self.say(piece)

    async def flush(self) -> None:
        for piece in self.paragraphs.finish():
            await self.say(piece)

    def drop_unsent(self) -> None:
        """Forget text held back for the next paragraph (a broken stream, asked again)."""
        self.paragraphs = ParagraphStream(self.paragraphs.limit)

    async def say(self, text: str) -> None:
        await self._send(text, note=False)

    async def note(self, text: str) -> None:
        """Salon's own word in the channel; never read back as the bot's conversation."""
        await self._send(text, note=True)

    async def _send(self, text: str, *, note: bool) -> None:
        text = self.redact(text)
        # A schedule's answer goes out under its key, on its first message (answerkey).
        once = self.recorder.activation.first_send
        key = await once.take() if once is not None else None
        reply_to = None if note else self.reply_to
        with self.recorder.phase("send"):
            message = await self._post(text, note=note, key=key, reply_to=reply_to)
        if not note:
            self.posted.append(message.id)
        if reply_to is not None:
            self.reply_to = None  # the first message answers the asker; the rest follow it
        self.sent += 1
        self.recorder.said(text, note=note)

    async def _post(
        self, text: str, *, note: bool, key: str | None, reply_to: str | None
    ) -> Message:
        """One post; one the platform could not take now (5xx, disconnected, rate limited)
        is tried again, with backoff, for ``retry_for`` seconds, in order: the next waits."""
        deadline = time.monotonic() + self.retry_for
        attempt = 0
        while True:
            try:
                return await self.platform.send(
                    self.channel, text, note=note, key=key, reply_to=reply_to
                )
            except PlatformError as exc:
                # The wait the platform asked for decides whether another try can come in
                # time; the sleep itself is capped (a shorter wait may well succeed).
                wait = exc.retry_after if exc.retry_after is not None else 2.0**attempt
                if not exc.transient or time.monotonic() + max(wait, 0.1) > deadline:
                    if exc.transient:
                        logger.warning(
                            "%s: gave up posting after %d tries: %r",
                            self.channel.key,
                            attempt + 1,
                            text[:120],
                        )
                    raise
                wait = min(max(wait, 0.1), _POST_BACKOFF_MAX)
                attempt += 1
                logger.warning(
                    "%s: could not post (%s); trying again in %.0f s", self.channel.key, exc, wait
                )
                await asyncio.sleep(wait)


class ChannelLogs(Protocol):
    """A chat log that keeps joins and parts too (``SQLStore.chatlog``)."""

    async def channel_log(self, bot: str, channel_key: str, *, limit: int) -> list[ChatLine]: ...


class Conversation:
    def __init__(
        self,
        *,
        bot: str,
        store: Store,
        tools: ToolRunner | None,
        redactor: Redactor,
        max_tool_depth: int,
        chatlog: ChannelLogs | None = None,
    ) -> None:
        """``chatlog``: the log ``irc_logs`` reads (None: that block is left out)."""
        self.bot = bot
        self.store = store
        self.chatlog = chatlog
        self.tools = tools
        self._redact = redactor
        self.max_tool_depth = max_tool_depth
        self._plans = 0
        self._chat_memos = ByChannel(ChatMemo, _MEMO_MESSAGES)
        self._prefill_memos = ByChannel(PrefillMemo, _MEMO_MESSAGES)

    async def answer(self, scene: Scene, provider: Provider, recorder: Recorder) -> None:
        """Answer in the scene's channel; usage is recorded even when the answer fails."""
        tools = self.tools.with_config(scene.config) if self.tools is not None else None
        logs = await self._irc_logs(scene)
        with recorder.phase("render"):
            request = self._render(scene, tools, provider.traits)
        system = await fill_prompt(
            request.system, scene.platform, scene.channel, scene.config.timezone
        )
        if logs:  # Terrarium's feed, beside the system prompt
            system = f"{system}\n\n{logs}".lstrip()
        if system != request.system:
            request = replace(request, system=system)
        paragraphs = ParagraphStream(scene.platform.max_message_chars)
        reply = Reply(scene.platform, scene.channel, self._redact, paragraphs, recorder)
        reply.retry_for = scene.config.catch_up.max_age
        trigger = recorder.activation.trigger
        if scene.config.reply_to_trigger and trigger is not None and Tag.ASKED not in trigger.tags:
            reply.reply_to = trigger.id  # an /ask question is no message to reply to
        try:
            await self._converse(reply, provider, request, scene, tools)
            await reply.flush()
            if reply.sent == 0:
                await reply.note(f"({scene.config.name} had nothing to say: the answer was empty)")
            elif scene.config.thinking.show == "spoiler" and reply.thinking.strip():
                await reply.note(self._spoiler(reply, scene.config.name))
            recorder.answer_shown = True
        finally:
            await record_usage(
                self.store, self.bot, scene.channel.key, provider, request, reply.usage
            )

    async def _irc_logs(self, scene: Scene) -> str:
        """``irc_logs``: the channel's newest logged lines with joins, parts and quits;
        without a chat log, or when it cannot be read, the block is left out."""
        count, log = scene.config.irc_logs, self.chatlog
        if not count or log is None:
            return ""
        try:
            lines = await log.channel_log(self.bot, scene.channel.key, limit=count)
        except StoreError as exc:
            logger.warning("no <irc_logs> for %s: %s", scene.channel.key, exc)
            return ""
        return irc_logs_block(lines, scene.config.timezone)

    def _spoiler(self, reply: Reply, name: str) -> str:
        """The start of the answer's reasoning on one line, secrets redacted before it is
        cut (a cut secret would not match): hidden subtext where the platform has
        spoilers, else a dot message (no bot reads one)."""
        line = " ".join(self._redact(reply.thinking).split())
        if len(line) > _SPOILER_CHARS:
            line = line[: _SPOILER_CHARS - 1].rstrip() + "…"
        if reply.platform.can(Capability.SPOILERS):
            return f"-# ||{line.replace('|', '¦')}||"  # a "|" of its own could end it
        return f".{name} thought: {line}"

    def _render(self, scene: Scene, tools: ToolRunner | None, traits: ProviderTraits) -> LLMRequest:
        config = scene.config
        me, model, key = scene.platform.self_participant, config.model_name(), scene.channel.key
        limit = scene.platform.max_message_chars
        if config.mode == "prefill":
            prefill = self._prefill_memos.get(key)
            request = render_prefill(
                scene.messages, me, config.render, model, scene.records,
                breakpoints=scene.breakpoints, message_limit=limit, memo=prefill,
                preamble=scene.preamble,
            )  # fmt: skip
            self._prefill_memos.settle(prefill)
        else:
            native = tools is not None and tools.native_offered()
            chat = self._chat_memos.get(key)
            request = render_chat(
                scene.messages, me, config.render, model, scene.records,
                breakpoints=scene.breakpoints, message_limit=limit, memo=chat,
                native_tools=native, preamble=scene.preamble,
            )  # fmt: skip
            self._chat_memos.settle(chat)
        # The channel's tempo, for a provider that chooses its cache markers' lifetimes.
        if scene.breakpoints and traits.cache_markers:
            request = replace(request, activation_gaps=activation_gaps(scene.messages, me.id))
        return tools.prepare(request) if tools is not None else request

    async def _converse(
        self,
        reply: Reply,
        provider: Provider,
        request: LLMRequest,
        scene: Scene,
        tools: ToolRunner | None,
    ) -> None:
        """The tool loop: complete, run the calls, feed the results back, until done."""
        if tools is not None and tools.planner and tools.offered():
            await self._plan_then_answer(reply, provider, request, scene, tools)
            return
        calls_made = 0
        last = False  # final_pass_combined: the call after the tools' results is the last
        while True:
            before = len(reply.posted)  # the messages the turn's words go out as follow
            turn, request = await self._complete_or_without_tools(
                reply, provider, request, scene.config, tools
            )
            if turn.cut_off or not turn.calls or tools is None or last:
                return
            await reply.flush()  # what the bot said before the call appears before its log
            if calls_made + len(turn.calls) > self.max_tool_depth:
                limit = self.max_tool_depth
                await reply.note(f"(stopped: this answer reached the limit of {limit} tool calls)")
                return
            calls_made += len(turn.calls)
            runs, refused = split_calls(turn.calls, scene.config.max_tool_calls_per_turn)
            with reply.recorder.phase("tools"):
                outcome = await tools.run(
                    reply.platform,
                    reply.channel,
                    scene.requester,
                    runs,
                    scene.after,
                    recorder=reply.recorder,
                    thoughts=turn.thoughts,
                    askers=scene.askers,
                    said=(said := tools.said(turn)),
                    posted_as=reply.posted[before:] if said else (),
                )
            if outcome.cancelled is not None:
                await reply.note(f"(cancelled: {outcome.cancelled} was not run)")
                return
            results = merge_results(turn.calls, outcome.results, refused)
            request = tools.follow_up(request, turn, results, outcome.ids)
            last = scene.config.final_pass_combined

    async def _plan_then_answer(
        self,
        reply: Reply,
        provider: Provider,
        request: LLMRequest,
        scene: Scene,
        tools: ToolRunner,
    ) -> None:
        """Planner mode: ask for a JSON plan (not shown), run its tool, then answer."""
        specs = tools.offered()
        planning = planning_request(request, specs, scene.config.planner_temperature)
        try:
            async with reply.platform.typing(reply.channel):
                text = await side_call(
                    provider, planning, reply.recorder, "plan", store=self.store, bot=self.bot
                )
        except ProviderError as exc:
            # A plan is a help, not the answer: a planning call that times out or is
            # refused leaves a direct answer (the call and its failure are traced).
            logger.warning("planner: the planning call failed (%s); answering directly", exc)
            text = ""
        plan = parse_plan(text, {s.name for s in specs})
        if plan is None and text:
            logger.info("planner: no usable plan in %r; answering directly", text[:200])
        elif plan is not None and plan.use_tool:
            self._plans += 1
            call = ToolCall(f"plan-{self._plans}", plan.tool, plan.args or {})
            with reply.recorder.phase("tools"):
                outcome = await tools.run(
                    reply.platform,
                    reply.channel,
                    scene.requester,
                    [call],
                    scene.after,
                    recorder=reply.recorder,
                    askers=scene.askers,
                )
            if outcome.cancelled is not None:
                await reply.note(f"(cancelled: {outcome.cancelled} was not run)")
                return
            request = answer_request(request, call, outcome.results[0])
        await self._complete(reply, provider, request, scene.config, None)

    async def _complete_or_without_tools(
        self,
        reply: Reply,
        provider: Provider,
        request: LLMRequest,
        config: BotConfig,
        tools: ToolRunner | None,
    ) -> tuple[Turn, LLMRequest]:
        """Some OpenAI-compatible servers refuse any request that offers tools (a model
        without tool support): then this bot stops offering them, says so once in the
        log, and asks again."""
        try:
            return await self._complete(reply, provider, request, config, tools), request
        except ProviderError as exc:
            if not (request.tools and exc.status == 400 and reply.sent == 0):
                raise
            for runner in (self.tools, tools):
                if runner is not None:
                    runner.refused_by_provider = True
            logger.warning(
                "the provider refused a request with tools (%s); continuing without tools", exc
            )
            plain = replace(request, tools=())
            return await self._complete(reply, provider, plain, config, tools), plain

    async def _complete(
        self,
        reply: Reply,
        provider: Provider,
        request: LLMRequest,
        config: BotConfig,
        tools: ToolRunner | None,
    ) -> Turn:
        """One completion into the channel. A broken stream is asked for again while
        nothing of it was shown; after that, it ends as a cut-off answer."""
        settings = config.provider_config()
        attempt = 0
        while True:
            shown = reply.sent
            try:
                kind: Literal["answer", "retry"] = "retry" if attempt else "answer"
                return await self._stream(reply, provider, request, config, tools, kind=kind)
            except IncompleteStream as exc:
                if reply.sent != shown:
                    await reply.flush()
                    await reply.note(f"(the answer was cut off: {exc})")
                    return Turn(cut_off=True)
                if not exc.retryable or attempt >= settings.retries:
                    raise
                delay = backoff_delay(attempt, settings.backoff_initial, settings.backoff_max, exc)
                logger.warning(
                    "the answer in %s broke off before anything was shown (%s); asking again",
                    reply.channel.key,
                    exc,
                )
                attempt += 1
                reply.drop_unsent()
                await asyncio.sleep(delay)

    async def _stream(
        self,
        reply: Reply,
        provider: Provider,
        request: LLMRequest,
        config: BotConfig,
        tools: ToolRunner | None,
        *,
        kind: Literal["answer", "retry"] = "answer",
    ) -> Turn:
        text_mode = tools is not None and tools.text_mode
        hold_back = CallTextFilter() if text_mode else None
        label = LeadingLabel((config.name, reply.platform.self_participant.name, "assistant"))
        turn = Turn()

        async def show(text: str) -> None:
            visible = label.feed(hold_back.feed(text) if hold_back else text)
            turn.text += visible
            await reply.write(visible)

        pending = reply.recorder.call(kind, provider, request)
        # The model's native calls and its reasoning's replayable form go into the turn.
        streamed = Streamed(calls=turn.calls, thoughts=turn.thoughts)
        async with reply.platform.typing(reply.channel):  # while the model writes, not longer
            try:
                await read_stream(provider, pending, streamed, show)
            finally:
                reply.usage += streamed.usage
                reply.thinking += streamed.thinking
        if not streamed.finished:
            raise IncompleteStream(
                f"{provider.name}: the answer stream ended before the model finished",
                provider=provider.name,
                retryable=True,
            )
        rest = label.feed(hold_back.flush()) if hold_back is not None else ""
        rest += label.flush()
        turn.text += rest
        await reply.write(rest)
        if hold_back is not None and tools is not None:
            parsed = parse_calls(hold_back.full, tools.schemas(), id_prefix=f"t{id(turn)}-")
            turn.raw, turn.calls = hold_back.full, parsed.calls
        return turn
