"""A tool server's question on Discord (MCP elicitation), on a silent message to the
requester: a yes/no or a single choice is a button each (and Decline); any other form is an
Answer button that opens a modal, a text input per field with its default filled in. Only
the requester may press or submit; no answer in time declines and takes the buttons off.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import TypeVar

import discord

from salon.model import ChannelRef, Elicitation, ElicitationAnswer, FormField
from salon.platforms.discord.channels import Channels
from salon.platforms.discord.people import People
from salon.platforms.discord.permissions import SEND
from salon.platforms.discord.refusals import NETWORK_ERRORS, translated, where
from salon.platforms.discord.sending import new_nonce

__all__ = ["Questions"]

logger = logging.getLogger(__name__)

_T = TypeVar("_T")
Retrying = Callable[[Callable[[], Awaitable[_T]]], Awaitable[_T]]
_Done = Callable[[discord.Interaction, ElicitationAnswer, str], Awaitable[None]]
_BUTTONS = 20  # choices shown as buttons (Discord: 25 in 5 rows; one is Decline)
_MODAL_FIELDS = 5  # text inputs a modal holds (Discord's limit)
_LABEL = 45  # characters of a modal's title and of a text input's label (Discord's limit)


def _choices(request: Elicitation) -> list[tuple[str, str | bool]] | None:
    """(label, value) of each button when the form is one yes/no or one choice."""
    if len(request.fields) != 1:
        return None
    (one,) = request.fields
    if one.kind == "boolean":
        return [("Yes", True), ("No", False)]
    if one.options and len(one.options) <= _BUTTONS:
        return list(zip(one.labels or one.options, one.options, strict=True))
    return None


class _Form(discord.ui.Modal):
    """The form as a modal; a submission that does not fit is refused, privately."""

    def __init__(self, request: Elicitation, done: _Done) -> None:
        super().__init__(title=f"{request.server} asks"[:_LABEL], custom_id="salon:form")
        self._done = done
        self._inputs: list[tuple[FormField, discord.ui.TextInput[_Form]]] = []
        for one in request.fields:
            hint = ", ".join(one.labels or one.options) or {"boolean": "yes or no"}.get(
                one.kind, ""
            )
            field = discord.ui.TextInput[_Form](
                label=one.label[:_LABEL],
                custom_id=f"salon:field:{one.name}"[:100],
                placeholder=(hint or one.description)[:100] or None,
                default=None if one.default is None else str(one.default)[:4000],
                required=one.required,
            )
            self._inputs.append((one, field))
            self.add_item(field)

    async def on_submit(self, interaction: discord.Interaction) -> None:
        content: dict[str, str | int | float | bool] = {}
        for one, field in self._inputs:
            if not field.value.strip():
                continue
            try:
                content[one.name] = one.parse(field.value)
            except ValueError as exc:
                text = f"{one.label} needs {exc}; press Answer to try again."
                await interaction.response.send_message(text, ephemeral=True)
                return
        await self._done(interaction, ElicitationAnswer("accept", content), "answered")


class _Prompt(discord.ui.View):
    """The buttons; ``answer`` resolves with the requester's answer, or decline in time."""

    def __init__(
        self,
        request: Elicitation,
        may_answer: Callable[[discord.Interaction], bool],
        name_of: Callable[[discord.Interaction], str],
    ) -> None:
        super().__init__(timeout=request.timeout)
        self.answer: asyncio.Future[ElicitationAnswer] = asyncio.get_running_loop().create_future()
        self._request = request
        self._may_answer = may_answer
        self._name_of = name_of
        choices = _choices(request)
        for index, (label, value) in enumerate(choices or [("Answer", "")]):
            button = discord.ui.Button[_Prompt](
                label=label[:80], style=discord.ButtonStyle.primary, custom_id=f"salon:ask:{index}"
            )
            pressed = self._chosen(value) if choices else self._open
            button.callback = pressed  # type: ignore[method-assign,assignment]
            self.add_item(button)
        decline = discord.ui.Button[_Prompt](
            label="Decline", style=discord.ButtonStyle.danger, custom_id="salon:decline"
        )
        decline.callback = self._declined  # type: ignore[method-assign]
        self.add_item(decline)

    async def interaction_check(self, interaction: discord.Interaction) -> bool:
        if self._may_answer(interaction):
            return True
        text = f"Only {self._request.requester.name} can answer this."
        await interaction.response.send_message(text, ephemeral=True)
        return False

    def _chosen(self, value: str | bool) -> Callable[[discord.Interaction], Awaitable[None]]:
        async def chosen(interaction: discord.Interaction) -> None:
            (one,) = self._request.fields
            shown = "yes" if value is True else "no" if value is False else str(value)
            await self._close(interaction, ElicitationAnswer("accept", {one.name: value}), shown)

        return chosen

    async def _open(self, interaction: discord.Interaction) -> None:
        await interaction.response.send_modal(_Form(self._request, self._close))

    async def _declined(self, interaction: discord.Interaction) -> None:
        await self._close(interaction, ElicitationAnswer("decline"), "declined")

    async def _close(
        self, interaction: discord.Interaction, answer: ElicitationAnswer, word: str
    ) -> None:
        who = self._name_of(interaction)
        if not self.answer.done():
            self.answer.set_result(ElicitationAnswer(answer.action, answer.content, by=who))
        asked = interaction.message.content if interaction.message else ""
        await interaction.response.edit_message(content=f"{asked}\n{word} by {who}.", view=None)
        self.stop()

    async def on_timeout(self) -> None:
        if not self.answer.done():
            self.answer.set_result(ElicitationAnswer("decline"))


class Questions:
    def __init__(
        self, *, channels: Channels, people: People, retrying: Retrying[discord.Message]
    ) -> None:
        self._channels = channels
        self._people = people
        self._retrying = retrying
        self.open = 0  # questions open and clickable
        self._changed = asyncio.Condition()

    async def ask(self, channel: ChannelRef, request: Elicitation) -> ElicitationAnswer:
        if len(request.fields) > _MODAL_FIELDS and _choices(request) is None:
            logger.warning(
                "Discord: %s asked for %d fields: declined", request.server, len(request.fields)
            )
            return ElicitationAnswer("decline")
        target = await self._channels.get(channel)
        prompt = _Prompt(
            request,
            may_answer=lambda i: self._people.person(i.user, i.guild).id == request.requester.id,
            name_of=lambda i: self._people.person(i.user, i.guild).name,
        )
        text = f"{request.requester.name}: {request.server} asks: {request.message}"[:2000]
        nonce = new_nonce()
        with translated(f"ask a question in {where(target)}", needs=SEND):
            asked = await self._retrying(
                lambda: target.send(text, view=prompt, silent=True, nonce=nonce)
            )
        async with self._changed:
            self.open += 1
            self._changed.notify_all()
        try:
            async with asyncio.timeout(request.timeout + 1):  # the view's own timeout first
                answer = await prompt.answer
        except TimeoutError:
            answer = ElicitationAnswer("decline")
        finally:
            self.open -= 1
            prompt.stop()
        if not answer.by:  # nobody answered: nobody presses the buttons later
            await self._close_unanswered(asked, text)
        return answer

    async def _close_unanswered(self, asked: discord.Message, text: str) -> None:
        try:
            await asked.edit(content=f"{text}\nNo answer in time: declined.", view=None)
        except (discord.DiscordException, *NETWORK_ERRORS) as exc:
            logger.warning("Discord: could not close an unanswered question: %s", exc)

    async def wait_open(self, count: int = 1) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: self.open >= count)
