"""What every integration's tool set shares: annotations, results, the tool boundary."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from salon.integrations._discipline import Clock
from salon.integrations._http import VendorError
from salon.tools.native import Annotations, Image, Result, ToolSet

__all__ = [
    "GENERATES",
    "READ_ONLY",
    "Builder",
    "Lookup",
    "error_result",
    "expect_shape",
    "guarded",
    "image_block",
    "text_result",
]

logger = logging.getLogger(__name__)

# Lookups of facts: never change anything, may be repeated, reach an outside service.
READ_ONLY = Annotations(read_only=True, destructive=False, idempotent=True, open_world=True)
# Generations: create something new (and may spend credits) but destroy nothing.
GENERATES = Annotations(read_only=False, destructive=False, idempotent=False, open_world=True)

Lookup = Callable[[str], str | None]


class Builder(Protocol):
    """How an integration module makes its tool set from its config."""

    def __call__(self, config: Any, *, lookup: Lookup, root: Path, clock: Clock) -> ToolSet: ...


def text_result(text: str) -> Result:
    return Result.text(text)


def error_result(text: str) -> Result:
    return Result.error(text)


def image_block(
    data: bytes, mime_type: str, *, name: str | None = None, url: str | None = None
) -> Image:
    """An image the channel shows (named, with the vendor's public link when it has one)."""
    return Image(data, mime_type, name=name, url=url)


def content_result(text: str, images: list[Image]) -> Result:
    return Result((text, *images))


async def guarded(service: str, work: Callable[[], Awaitable[Result]]) -> Result:
    """The tool boundary: every failure becomes an error result the model can read."""
    try:
        return await work()
    except VendorError as exc:
        return error_result(str(exc))
    except Exception:
        logger.exception("%s: a tool call failed", service)
        return error_result(f"{service} failed unexpectedly; the details are in Salon's log")


@contextlib.contextmanager
def expect_shape(service: str) -> Iterator[None]:
    """Reading a vendor's answer: a missing or odd field is the vendor's fault, said so."""
    try:
        yield
    except (KeyError, IndexError, TypeError, ValueError, AttributeError) as exc:
        logger.info("%s: unexpected answer: %s: %s", service, type(exc).__name__, exc)
        raise VendorError(
            f"{service} sent an answer in an unexpected shape; try again later"
        ) from None
