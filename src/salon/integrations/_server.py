"""What every integration's MCP server shares: annotations, results, the tool boundary."""

from __future__ import annotations

import base64
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ContentBlock, ImageContent, TextContent, ToolAnnotations

from salon.integrations._discipline import Clock
from salon.integrations._http import VendorError, VendorHttp
from salon.tools.results import META_NAME, META_URL

__all__ = [
    "GENERATES",
    "IMAGE_NAME",
    "IMAGE_URL",
    "READ_ONLY",
    "Builder",
    "Lookup",
    "error_result",
    "expect_shape",
    "guarded",
    "image_block",
    "lifespan_for",
    "text_result",
]

logger = logging.getLogger(__name__)

# Lookups of facts: never change anything, may be repeated, reach an outside service.
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)
# Generations: create something new (and may spend credits) but destroy nothing.
GENERATES = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=True
)

Lookup = Callable[[str], str | None]


class Builder(Protocol):
    """How an integration module makes its server from its config."""

    def __call__(self, config: Any, *, lookup: Lookup, root: Path, clock: Clock) -> MCPServer: ...


def text_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)])


def error_result(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


IMAGE_NAME = META_NAME  # what the image is (a direction, a file name), for the channel
IMAGE_URL = META_URL  # where the vendor publishes it, when it does


def image_block(
    data: bytes, mime_type: str, *, name: str | None = None, url: str | None = None
) -> ImageContent:
    meta = {k: v for k, v in ((IMAGE_NAME, name), (IMAGE_URL, url)) if v}
    return ImageContent(
        type="image",
        data=base64.b64encode(data).decode("ascii"),
        mime_type=mime_type,
        _meta=meta or None,
    )


def content_result(text: str, images: list[ImageContent]) -> CallToolResult:
    blocks: list[ContentBlock] = [TextContent(type="text", text=text), *images]
    return CallToolResult(content=blocks)


async def guarded(service: str, work: Callable[[], Awaitable[CallToolResult]]) -> CallToolResult:
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


def lifespan_for(
    *clients: VendorHttp,
) -> Callable[[MCPServer], contextlib.AbstractAsyncContextManager[dict[str, Any]]]:
    """A server lifespan that opens the vendor clients per connection and closes them."""

    @contextlib.asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[dict[str, Any]]:
        async with contextlib.AsyncExitStack() as stack:
            for client in clients:
                await stack.enter_async_context(client)
            yield {}

    return lifespan
