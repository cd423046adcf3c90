"""The counts limits decide on, in memory: exact within the process, because the check and
the taking happen with no await between them (one event loop), however many activations
run at once. Each key is read from the store the first time it is met, so counts survive a
restart; what an activation took is written back when it ends.

An activation's hold on a budget is its estimated spend, and working that out walks its
whole context; only another admission to the same budget, while it runs, needs the figure.
So a hold is taken as a pending ``Estimate`` and counted (worked out once) when such an
admission checks that budget: the same figure at the same moment it matters, and none of
the work when activations do not overlap.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from typing import TypeVar

from salon.store.limits import Admission, LimitStore, Refusal, Settlement

__all__ = ["Estimate", "LimitBook"]

_KEYS = 100_000  # keys of each kind kept in memory; one forgotten is read again


_K = TypeVar("_K")
_V = TypeVar("_V")


class _Lru(OrderedDict[_K, _V]):
    def keep(self, key: _K, value: _V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _KEYS:
            self.popitem(last=False)


class Estimate:
    """(tokens, dollars) an activation may spend, worked out at most once, when first asked."""

    __slots__ = ("_value", "_work")

    def __init__(self, work: Callable[[], tuple[float, float]]) -> None:
        self._work: Callable[[], tuple[float, float]] | None = work
        self._value: tuple[float, float] | None = None

    @property
    def value(self) -> tuple[float, float]:
        if self._value is None:
            assert self._work is not None
            self._value, self._work = self._work(), None  # the context is let go of
        return self._value

    @property
    def known(self) -> bool:
        return self._value is not None


NO_ESTIMATE = Estimate(lambda: (0.0, 0.0))


class _Spend:
    """One budget on one day: spent, held by counted estimates, and pending estimates."""

    __slots__ = ("held", "pending", "spent", "unit")

    def __init__(self, spent: float, key: str) -> None:
        self.spent = spent
        self.held = 0.0
        self.pending: set[Estimate] = set()
        self.unit = 1 if key.endswith(":usd") else 0  # which figure of an estimate

    def count_pending(self) -> None:
        for estimate in self.pending:
            self.held += estimate.value[self.unit]
        self.pending.clear()


class LimitBook:
    def __init__(self, bot: str, store: LimitStore) -> None:
        self.bot = bot
        self.store = store
        self._requests: _Lru[str, deque[float]] = _Lru()  # rate key -> newest request times
        self._spend: _Lru[tuple[str, int], _Spend] = _Lru()  # (key, day) -> its counts
        self._marks: _Lru[str, float] = _Lru()  # key -> until

    async def load(self, admission: Admission) -> None:
        """Read from the store what this admission needs and memory does not hold."""
        rate = admission.rate_key
        if rate is not None and rate not in self._requests:
            since = admission.now - admission.rate_window
            times = await self.store.rate_events(self.bot, rate, since, admission.rate_limit)
            if rate not in self._requests:  # another activation may have loaded it meanwhile
                self._requests.keep(rate, deque(times, maxlen=admission.rate_limit))
        cooldown = admission.cooldown_key
        if cooldown is not None and cooldown not in self._marks:
            since = admission.now - admission.cooldown
            last = await self.store.rate_events(self.bot, cooldown, since, 1)
            if cooldown not in self._marks:
                self._marks.keep(cooldown, last[-1] + admission.cooldown if last else 0.0)
        for charge in admission.charges:
            key = (charge.key, admission.day)
            if key not in self._spend:
                spent = await self.store.spent(self.bot, charge.key, admission.day)
                if key not in self._spend:
                    self._spend.keep(key, _Spend(spent, charge.key))

    async def load_mark(self, key: str) -> float:
        if key not in self._marks:
            until = await self.store.mark(self.bot, key) or 0.0
            if key not in self._marks:
                self._marks.keep(key, until)
        return self._marks[key]

    def take(self, admission: Admission, estimate: Estimate = NO_ESTIMATE) -> Refusal | None:
        """Refuse, or take the request and hold ``estimate`` on each budget: no await, so
        nothing runs in between."""
        day = admission.day
        budgets = [self._spend[charge.key, day] for charge in admission.charges]
        refusal = self._refusal(admission, budgets)
        if refusal is not None:
            return refusal
        if admission.rate_key is not None:
            self._requests[admission.rate_key].append(admission.now)
        if admission.cooldown_key is not None:
            self._marks.keep(admission.cooldown_key, admission.now + admission.cooldown)
        if estimate is not NO_ESTIMATE:
            for budget in budgets:
                budget.pending.add(estimate)
        return None

    def _refusal(self, admission: Admission, budgets: Sequence[_Spend]) -> Refusal | None:
        if admission.cooldown_key is not None:
            until = self._marks.get(admission.cooldown_key, 0.0)
            if until > admission.now:
                return Refusal("cooldown", admission.cooldown_key, until)
        if admission.rate_key is not None:
            times = self._requests[admission.rate_key]
            if times.maxlen != admission.rate_limit:  # the rate changed (a config reload)
                times = deque(times, maxlen=admission.rate_limit)
                self._requests.keep(admission.rate_key, times)
            while times and times[0] <= admission.now - admission.rate_window:
                times.popleft()
            if len(times) >= admission.rate_limit:
                # The request that frees a place is the oldest of the newest ``rate_limit``.
                return Refusal("rate", admission.rate_key, times[0] + admission.rate_window)
        for charge, budget in zip(admission.charges, budgets, strict=True):
            if budget.pending:  # activations running on this budget: their holds count now
                budget.count_pending()
            if budget.spent + budget.held >= charge.limit:
                return Refusal("budget", charge.key, (admission.day + 1) * 86400.0)
        return None

    def settle(self, day: int, estimate: Estimate, settlements: Sequence[Settlement]) -> None:
        """Count what was spent, and let go of the hold (counted or still pending)."""
        for item in settlements:
            budget = self._spend.get((item.key, day))
            if budget is None:
                continue
            budget.spent += item.spent
            if estimate in budget.pending:
                budget.pending.discard(estimate)
            else:  # counted by an admission that came while it ran
                budget.held -= estimate.value[budget.unit]

    def spent(self, key: str, day: int) -> tuple[float, float]:
        """(spent, held) as this process counts them."""
        budget = self._spend.get((key, day))
        if budget is None:
            return 0.0, 0.0
        budget.count_pending()
        return budget.spent, budget.held

    def set_mark(self, key: str, until: float) -> None:
        self._marks.keep(key, until)
