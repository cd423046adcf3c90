"""The counts limits decide on, in memory: exact within the process, because the check and
the taking happen with no await between them (one event loop), however many activations
run at once. Each key is read from the store the first time it is met, so counts survive a
restart; what an activation took is written back when it ends.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from typing import TypeVar

from salon.store.limits import Admission, LimitStore, Refusal, Settlement

__all__ = ["LimitBook"]

_KEYS = 100_000  # keys of each kind kept in memory; one forgotten is read again


_V = TypeVar("_V")


class _Lru(OrderedDict[str, _V]):
    def keep(self, key: str, value: _V) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > _KEYS:
            self.popitem(last=False)


class LimitBook:
    def __init__(self, bot: str, store: LimitStore) -> None:
        self.bot = bot
        self.store = store
        self._requests: _Lru[deque[float]] = _Lru()  # rate key -> newest request times
        self._spend: _Lru[list[float]] = _Lru()  # "key@day" -> [spent, held]
        self._marks: _Lru[float] = _Lru()  # key -> until

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
            key = f"{charge.key}@{admission.day}"
            if key not in self._spend:
                spent = await self.store.spent(self.bot, charge.key, admission.day)
                if key not in self._spend:
                    self._spend.keep(key, [spent, 0.0])

    async def load_mark(self, key: str) -> float:
        if key not in self._marks:
            until = await self.store.mark(self.bot, key) or 0.0
            if key not in self._marks:
                self._marks.keep(key, until)
        return self._marks[key]

    def take(self, admission: Admission) -> Refusal | None:
        """Refuse, or take the request and holds: no await, so nothing runs in between."""
        refusal = self._refusal(admission)
        if refusal is not None:
            return refusal
        if admission.rate_key is not None:
            self._requests[admission.rate_key].append(admission.now)
        if admission.cooldown_key is not None:
            self._marks.keep(admission.cooldown_key, admission.now + admission.cooldown)
        for charge in admission.charges:
            self._spend[f"{charge.key}@{admission.day}"][1] += charge.amount
        return None

    def _refusal(self, admission: Admission) -> Refusal | None:
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
        for charge in admission.charges:
            spent, held = self._spend[f"{charge.key}@{admission.day}"]
            if spent + held >= charge.limit:
                return Refusal("budget", charge.key, (admission.day + 1) * 86400.0)
        return None

    def settle(self, day: int, settlements: Sequence[Settlement]) -> None:
        for item in settlements:
            entry = self._spend.get(f"{item.key}@{day}")
            if entry is not None:
                entry[0] += item.spent
                entry[1] -= item.held

    def spent(self, key: str, day: int) -> tuple[float, float]:
        """(spent, held) as this process counts them."""
        entry = self._spend.get(f"{key}@{day}")
        return (entry[0], entry[1]) if entry else (0.0, 0.0)

    def set_mark(self, key: str, until: float) -> None:
        self._marks.keep(key, until)
