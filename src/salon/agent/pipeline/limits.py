"""Limits and budgets: requests per person (a sliding window), spend per person, channel and
guild per UTC day (tokens or dollars), a cooldown per channel.

An activation is admitted or refused as a whole against the counts in memory
(``LimitBook``: exact within the process, read from the store at first use). While it runs
it holds an estimate of its spend on each budget (the context's characters / 4 plus
``max_tokens``, worked out only if another admission to the budget comes while it runs);
when it ends, its real spend (every call it made, priced) replaces the hold and the
activation is recorded in the store. So twenty activations at once cannot all take the
last of a budget. A refusal is said once per person and limit, as a note with the
reset time; until the reset, that person gets silence.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from operator import attrgetter
from typing import NamedTuple

from salon.agent.activation import Activation, Scene
from salon.agent.pipeline.limitbook import NO_ESTIMATE, Estimate, LimitBook
from salon.agent.recording.recorder import Recorder
from salon.config import BotConfig, Price
from salon.config.pipeline import Budget
from salon.config.prices import call_cost, price_for
from salon.errors import StoreError
from salon.model import ChannelRef, Participant
from salon.platforms.base import Platform
from salon.store.limits import Admission, Charge, LimitStore, Refusal, Settlement

__all__ = ["Hold", "Limits", "refusal_text"]

logger = logging.getLogger(__name__)

_DAY = 86400.0
_CHARS_PER_TOKEN = 4  # for the estimate held while an answer runs
_PRICES_KEPT = 256  # models whose price is remembered
_TERMS_KEPT = 4096  # (channel, requester) pairs whose limits are remembered


PriceOf = Callable[[str, Mapping[str, Price]], Price | None]


class Hold(NamedTuple):
    """What an admitted activation took (its request, its holds), to record when it ends."""

    admission: Admission | None
    estimate: Estimate = NO_ESTIMATE


class Limits:
    def __init__(self, bot: str, store: LimitStore, clock: Callable[[], float] = time.time) -> None:
        self.bot = bot
        self.store = store
        self.clock = clock
        self.book = LimitBook(bot, store)
        # Prices by model while the config's table stays the same object: the lookup walks
        # the whole table, too slow for every activation.
        self._prices: dict[str, tuple[Mapping[str, Price], Price | None]] = {}
        self._terms: dict[tuple[object, ...], tuple[BotConfig, object, Admission | None]] = {}

    def _price(self, model: str, overrides: Mapping[str, Price]) -> Price | None:
        known = self._prices.get(model)
        if known is not None and known[0] is overrides:
            return known[1]
        if len(self._prices) >= _PRICES_KEPT:
            self._prices.clear()
        price = price_for(model, overrides)
        self._prices[model] = (overrides, price)
        return price

    async def admit(
        self, activation: Activation, config: BotConfig, scene: Scene | None, *, model_calls: bool
    ) -> Hold | Refusal:
        """Take the activation's request and holds, or say which limit refuses it."""
        terms = self._terms_for(activation, config)
        if terms is None:
            return Hold(None)
        now = self.clock()
        admission = Admission(now, int(now // _DAY), *terms[2:])
        await self.book.load(admission)
        estimate = NO_ESTIMATE
        if model_calls and admission.charges:
            estimate = Estimate(lambda: _estimate(config, scene, self._price))
        refusal = self.book.take(admission, estimate)
        return refusal if refusal is not None else Hold(admission, estimate)

    def _terms_for(self, activation: Activation, config: BotConfig) -> Admission | None:
        """The limits that apply to this requester in this channel (an admission with no
        time yet); None when none do. Kept while the config stays the same object."""
        requester, channel = activation.requester, activation.channel
        asked = activation.trigger is not None  # a person asked (not a schedule)
        key = (channel.key, channel.guild_id, requester.id, requester.identity, asked)
        known = self._terms.get(key)
        if known is not None and known[0] is config and known[1] == requester.roles:
            return known[2]
        if len(self._terms) >= _TERMS_KEPT:
            self._terms.clear()
        terms = _terms(activation, config, asked=asked)
        self._terms[key] = (config, requester.roles, terms)
        return terms

    async def settle(self, hold: Hold, config: BotConfig, recorder: Recorder) -> None:
        """Replace the holds with what every call of the activation really cost, and record
        the activation in the store."""
        if hold.admission is None:
            return
        tokens, cost = _spend(config, recorder, self._price)
        held = hold.estimate.value if hold.estimate.known else (0.0, 0.0)
        settlements = [
            Settlement(c.key, held[1], cost)
            if c.key.endswith(":usd")
            else Settlement(c.key, held[0], tokens)
            for c in hold.admission.charges
        ]
        self.book.settle(hold.admission.day, hold.estimate, settlements)
        try:
            await self.store.record(self.bot, hold.admission, settlements)
        except StoreError:  # memory still counts it; only a restart would forget it
            logger.exception("could not record limits in the store")

    async def tell_once(
        self,
        *,
        platform: Platform,
        channel: ChannelRef,
        requester: Participant,
        refusal: Refusal,
        recorder: Recorder,
        config: BotConfig,
    ) -> None:
        """Say the refusal once per person and limit until it resets; silence after."""
        key = f"told:{refusal.key}:{_person(requester)}"
        now = self.clock()
        if await self.book.load_mark(key) > now:
            return
        self.book.set_mark(key, refusal.reset_at)  # before any await: said once, exactly
        await self.store.set_mark(self.bot, key, refusal.reset_at)
        text = refusal_text(refusal, requester.name, config, now)
        await platform.send(channel, text, note=True)
        recorder.said(text, note=True)


def _terms(activation: Activation, config: BotConfig, *, asked: bool) -> Admission | None:
    limits = config.limits
    requester = activation.requester
    if not limits.any or _exempt(requester, config):
        return None
    who = _person(requester)
    budgets = _budgets(config, activation.channel, who)
    charges = tuple(
        Charge(f"{scope}:{budget_unit(budget)}", _limit(budget)) for scope, budget in budgets
    )
    rate = limits.user_rate if asked else None
    return Admission(
        now=0.0,
        day=0,
        rate_key=f"rate:{who}" if rate else None,
        rate_limit=rate.requests if rate else 0,
        rate_window=rate.per_seconds if rate else 0.0,
        cooldown_key=f"cooldown:{activation.channel.key}"
        if asked and limits.channel_cooldown
        else None,
        cooldown=limits.channel_cooldown,
        charges=charges,
    )


def budget_unit(budget: Budget) -> str:
    return "usd" if budget.cost is not None else "tokens"


def _limit(budget: Budget) -> float:
    return float(budget.cost if budget.cost is not None else budget.tokens or 0)


def _budgets(config: BotConfig, channel: ChannelRef, who: str) -> list[tuple[str, Budget]]:
    limits = config.limits
    found: list[tuple[str, Budget]] = []
    if limits.user_budget:
        found.append((f"user:{who}", limits.user_budget))
    if limits.channel_budget:
        found.append((f"channel:{channel.key}", limits.channel_budget))
    if limits.guild_budget and channel.guild_id:
        found.append((f"guild:{channel.platform}:{channel.guild_id}", limits.guild_budget))
    return found


def _person(participant: Participant) -> str:
    return participant.identity or participant.id


def _exempt(requester: Participant, config: BotConfig) -> bool:
    roles = set(config.authorized_roles)
    return bool(config.limits.exempt_authorized and roles and roles & set(requester.roles))


_TEXT = attrgetter("text")


def _estimate(config: BotConfig, scene: Scene | None, price_of: PriceOf) -> tuple[float, float]:
    """(tokens, dollars) an answer may spend: its context and its longest answer."""
    # map and attrgetter keep this walk over the whole context in C: it runs every answer.
    texts = map(_TEXT, scene.messages) if scene else ()
    chars = len(config.system_prompt) + sum(map(len, texts)) if scene else 0
    prompt = chars // _CHARS_PER_TOKEN
    tokens = float(prompt + config.max_tokens)
    price = price_of(config.model_name(), config.prices)
    cost = 0.0 if price is None else (prompt * price.input + config.max_tokens * price.output) / 1e6
    return tokens, cost


def _spend(config: BotConfig, recorder: Recorder, price_of: PriceOf) -> tuple[float, float]:
    tokens = 0.0
    cost = 0.0
    for pending in recorder.calls:
        usage = pending.usage
        tokens += (
            usage.input_tokens
            + usage.output_tokens
            + usage.cache_read_tokens
            + usage.cache_write_tokens
        )
        cost += call_cost(price_of(pending.request.model, config.prices), usage) or 0.0
    return tokens, cost


def refusal_text(refusal: Refusal, name: str, config: BotConfig, now: float) -> str:
    """One short line: which limit, and when it resets."""
    at = _when(refusal.reset_at, now)
    scope = refusal.key.split(":", 1)[0]
    if refusal.kind == "rate":
        rate = config.limits.user_rate
        noun = "request" if rate and rate.requests == 1 else "requests"
        count = f"{rate.requests} {noun} per {_span(rate.per_seconds)}" if rate else "your limit"
        return f"{name}: you have reached {count}; I can answer you again {at}."
    if refusal.kind == "cooldown":
        return f"{config.name} is taking a break in this channel; back {at}."
    whose = {"user": "your", "channel": "this channel's", "guild": "this server's"}[scope]
    return f"{name}: {whose} daily budget for {config.name} is used up; it resets {at}."


def _when(at: float, now: float) -> str:
    moment = datetime.fromtimestamp(at, UTC)
    if at - now < 3600:  # a short wait: to the second
        return f"at {moment:%H:%M:%S} UTC"
    if at - now < _DAY:
        return f"at {moment:%H:%M} UTC"
    return f"on {moment:%Y-%m-%d} at {moment:%H:%M} UTC"


def _span(seconds: float) -> str:
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if seconds % size == 0:
            count = int(seconds // size)
            return unit if count == 1 else f"{count} {unit}s"
    return f"{seconds:g} seconds"
