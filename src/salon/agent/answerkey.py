"""The key the first message of an owed answer (a schedule's, a message's) goes out under.

An occurrence is completed in the store once its activation has ended. A process killed
between the answer on screen and that record leaves the occurrence claimed, and the
process that takes the claim over would answer it a second time. So the first message of
an answer that owes occurrences goes out under a key, recorded with the occurrences just
before it is sent (``SQLStore.answering``; for messages, their owed rows:
``salon.agent.delivery``): Discord keeps it as the message's nonce (with
``enforce_nonce``), the terminal and IRC as the id of the chat-log line they commit before
showing it. The process taking over asks the platform for the key (``Platform.sent_before``)
and completes the occurrence when that message went out (``salon.agent.dispatch``).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

__all__ = ["FirstSend"]

logger = logging.getLogger(__name__)

_KEY_CHARS = 20  # Discord takes a nonce of up to 25 characters


def _new_key() -> str:
    return uuid.uuid4().hex[:_KEY_CHARS]


@dataclass
class FirstSend:
    """One activation's key, handed out once: to the first message of its answer."""

    record: Callable[[str], Awaitable[None]]  # puts the key with the occurrences
    key: str = field(default_factory=_new_key)
    taken: bool = False

    async def take(self) -> str | None:
        """The key, for the answer's first message only, recorded before it is returned.
        When the record fails the message goes out without one: after a crash it would
        be answered twice, never lost."""
        if self.taken:
            return None
        self.taken = True
        try:
            await self.record(self.key)
        except Exception:
            logger.exception("could not record the key of an owed answer")
            return None
        return self.key
