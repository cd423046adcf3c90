"""An MCP tool result as Salon hands it on: text for the model, files for the channel.

Images (and audio, embedded blobs, data URIs and base64 runs inside text) never reach the
model: each becomes an ``Attachment``, saved under the outputs directory when there is one,
and the text gets a one-line placeholder naming it. A resource link to an image becomes an
attachment with only its URL. Names and public URLs come from the blocks' ``_meta``
(``salon/name``, ``salon/url``) where a server gives them.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from salon.model import Attachment, ToolResult
from salon.tools.inline import Blob, describe, split_inline
from salon.tools.outputs import OutputDir, file_name

if TYPE_CHECKING:  # the SDK's types load only with an MCP server (``_block_parts``)
    import mcp_types

    from salon.tools.native import Result

__all__ = ["MAX_RESULT_CHARS", "META_NAME", "META_URL", "native_result", "to_result"]

META_NAME = "salon/name"  # what a file is (a direction, a file name), for the channel
META_URL = "salon/url"  # where its vendor publishes it, when it does
MAX_RESULT_CHARS = 100_000

Part = str | Attachment


def _size(count: int) -> str:
    for unit, scale in (("MB", 1_000_000), ("kB", 1_000)):
        if count >= scale:
            return f"{count / scale:.1f} {unit}"
    return f"{count} bytes"


def _meta(block: Any) -> tuple[str, str]:
    meta = getattr(block, "meta", None) or {}
    return str(meta.get(META_NAME) or ""), str(meta.get(META_URL) or "")


def _file(data: bytes, mime: str, label: str, url: str = "") -> Attachment:
    kind = mime.partition("/")[0] or "file"
    label = label or kind
    return Attachment(file_name(label, mime), mime, len(data), url=url, data=data, label=label)


def _text_parts(text: str) -> list[Part]:
    parts: list[Part] = []
    for piece in split_inline(text):
        if isinstance(piece, str):
            parts.append(piece)
        elif piece.data and piece.mime:
            parts.append(_file(piece.data, piece.mime, "inline " + piece.mime.partition("/")[0]))
        else:
            parts.append(describe(piece))
    return parts


def _decoded(encoded: str) -> bytes | None:
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return None


def _block_parts(block: mcp_types.ContentBlock) -> list[Part]:
    import mcp_types  # loaded with the first MCP server, not before

    if isinstance(block, mcp_types.TextContent):
        return _text_parts(block.text)
    if isinstance(block, mcp_types.ImageContent | mcp_types.AudioContent):
        data = _decoded(block.data)
        if data is None:
            return [describe(Blob(block.mime_type, b"", len(block.data)))]
        return [_file(data, block.mime_type, *_meta(block))]
    if isinstance(block, mcp_types.ResourceLink):
        mime = block.mime_type or ""
        if mime.startswith("image/"):
            label = block.title or block.name
            return [Attachment(label, mime, block.size or 0, url=str(block.uri), label=label)]
        return [f"[{block.name}: {block.uri}]"]
    if isinstance(block, mcp_types.EmbeddedResource):
        resource = block.resource
        if isinstance(resource, mcp_types.TextResourceContents):
            return _text_parts(resource.text)
        data = _decoded(resource.blob)
        mime = resource.mime_type or "application/octet-stream"
        if data is None:
            return [describe(Blob(mime, b"", len(resource.blob)))]
        label = _meta(resource)[0] or str(resource.uri).rsplit("/", 1)[-1]
        return [_file(data, mime, label, _meta(resource)[1])]
    return _text_parts(json.dumps(block.model_dump(mode="json", exclude_none=True))[:2000])


def _placeholder(file: Attachment, outputs: OutputDir | None) -> str:
    what = f"{file.content_type.partition('/')[0] or 'file'} {file.label}".strip()
    if file.data is None:
        return f"[{what}: {file.url}, shown in the channel]"
    kind = f"{file.content_type}, {_size(file.size)}"
    if file.path and outputs is not None:
        where = outputs.relative(Path(file.path))
        return f"[{what} ({kind}) saved as {where}, shown in the channel]"
    return f"[{what} ({kind}), shown in the channel]"


def _saved(files: Sequence[Attachment], outputs: OutputDir, owner: str) -> list[Part]:
    """Each file with its saved path (and public link); a placeholder for one too large."""
    kept: list[Part] = []
    for file in files:
        if file.data is None:
            kept.append(file)
            continue
        path = outputs.save(file_name(file.label, file.content_type, owner), file.data)
        if path is None:
            limit = _size(outputs.config.max_file_bytes)
            kept.append(f"[{file.label} ({_size(file.size)}): over the {limit} limit, not kept]")
            continue
        url = file.url or outputs.public_url(path)
        kept.append(replace(file, filename=path.name, path=str(path), url=url))
    return kept


async def to_result(
    call_id: str,
    raw: mcp_types.CallToolResult,
    *,
    outputs: OutputDir | None = None,
    owner: str = "",
) -> ToolResult:
    """``raw`` as a ``ToolResult``; files are saved (in a thread) when ``outputs`` is set.
    ``owner`` (who asked) starts the saved files' names, as in ``001``."""
    blocks = [_block_parts(block) for block in raw.content]
    if not any(blocks) and raw.structured_content is not None:
        blocks = [_text_parts(json.dumps(raw.structured_content, ensure_ascii=False))]
    return await _finish(call_id, blocks, bool(raw.is_error), outputs, owner)


async def native_result(
    call_id: str, raw: Result, *, outputs: OutputDir | None = None, owner: str = ""
) -> ToolResult:
    """A native tool's result as a ``ToolResult``: its images are files already."""
    blocks: list[list[Part]] = [
        _text_parts(part)
        if isinstance(part, str)
        else [_file(part.data, part.mime_type, part.name or "", part.url or "")]
        for part in raw.content
    ]
    return await _finish(call_id, blocks, raw.is_error, outputs, owner)


async def _finish(
    call_id: str,
    blocks: list[list[Part]],
    is_error: bool,
    outputs: OutputDir | None,
    owner: str,
) -> ToolResult:
    files = [p for parts in blocks for p in parts if isinstance(p, Attachment)]
    if files and outputs is not None:
        kept = await asyncio.to_thread(_saved, files, outputs, owner)
        swap = dict(zip(map(id, files), kept, strict=True))
        blocks = [[swap.get(id(p), p) for p in parts] for parts in blocks]
    text = "\n".join(
        "".join(p if isinstance(p, str) else _placeholder(p, outputs) for p in parts)
        for parts in blocks
    )
    if len(text) > MAX_RESULT_CHARS:
        text = text[:MAX_RESULT_CHARS] + " …[truncated]"
    parts = [p for parts in blocks for p in parts]
    shown = _unique([p for p in parts if isinstance(p, Attachment)])
    return ToolResult(call_id, text, is_error=is_error, attachments=tuple(shown))


def _unique(files: list[Attachment]) -> list[Attachment]:
    """Files with distinct names (a platform refers to uploads by name)."""
    seen: dict[str, int] = {}
    out = []
    for file in files:
        count = seen.get(file.filename, 0)
        seen[file.filename] = count + 1
        if not count:
            out.append(file)
            continue
        stem, dot, extension = file.filename.rpartition(".")
        name = f"{stem}-{count + 1}.{extension}" if dot else f"{file.filename}-{count + 1}"
        out.append(replace(file, filename=name))
    return out
