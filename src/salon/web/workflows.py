"""The configurator's ComfyUI workflow upload (``POST /config/bots/workflow``).

The file replaces the one the bot's ``integrations.comfyui.workflow`` names (inside the
config directory only), written at once, and only when it is a workflow Salon can run: UTF-8
JSON in ComfyUI's API format (an object of nodes, each with ``class_type`` and ``inputs``;
the UI format's ``nodes``/``links`` is refused with how to export the other), with
``{{prompt}}``, and no placeholder ``salon.integrations.comfyui`` does not fill (it would
reach ComfyUI as text). The bot reads its workflow when it starts: restart it to use the
new one.
"""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import Response

from salon.config.integrations import PROMPT_PLACEHOLDER, workflow_path
from salon.web.configurator import gate, write_file
from salon.web.context import Web
from salon.web.controls import page_with
from salon.web.guard import post_refusal

__all__ = ["MAX_WORKFLOW_BYTES", "PLACEHOLDERS", "upload", "workflow_problem"]

MAX_WORKFLOW_BYTES = 2_000_000
PLACEHOLDERS = frozenset({"prompt", "negative_prompt", "seed", "width", "height"})
_PLACEHOLDER = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
MAX_DEPTH = 64  # a workflow is nodes of inputs of lists: a handful of levels
TOO_DEEP = "the file is nested too deeply to be a workflow (export it with Save (API))"


def _strings(graph: Any) -> list[str] | None:
    """Every string value in ``graph`` (walked without recursion), or None when it is
    nested deeper than ``MAX_DEPTH``."""
    found: list[str] = []
    stack: list[tuple[Any, int]] = [(graph, 0)]
    while stack:
        value, depth = stack.pop()
        if depth > MAX_DEPTH:
            return None
        if isinstance(value, str):
            found.append(value)
        elif isinstance(value, dict | list):
            items = value.values() if isinstance(value, dict) else value
            stack.extend((v, depth + 1) for v in items)
    return found


def workflow_problem(data: bytes) -> str | None:
    """Why ``data`` is no workflow Salon can run, or None."""
    try:
        graph = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        return "the file is not UTF-8 text"
    except ValueError as exc:
        return f"the file is not valid JSON: {exc}"
    except RecursionError:  # the parser's own bound on nesting, not a crash
        return TOO_DEEP
    strings = _strings(graph)
    if strings is None:
        return TOO_DEEP
    if not isinstance(graph, dict) or not graph:
        return "a workflow is a JSON object of nodes (ComfyUI's API format)"
    if "nodes" in graph and "links" in graph:
        return "this is ComfyUI's UI format: export the workflow with Save (API)"
    for key, node in graph.items():
        if not isinstance(node, dict) or not isinstance(node.get("class_type"), str):
            return f"node {key!r} has no class_type: export the workflow in API format"
        if not isinstance(node.get("inputs"), dict):
            return f"node {key!r} has no inputs object: export the workflow in API format"
    found = {m for s in strings for m in _PLACEHOLDER.findall(s)}
    if not any(PROMPT_PLACEHOLDER in s for s in strings):
        return f"the workflow has no {PROMPT_PLACEHOLDER} placeholder (where the prompt goes)"
    unknown = sorted(found - PLACEHOLDERS)
    if unknown:
        names = ", ".join("{{" + name + "}}" for name in unknown)
        known = ", ".join(sorted(PLACEHOLDERS))
        return f"unknown placeholder {names}: Salon fills {known}"
    return None


async def _read(request: Request) -> tuple[dict[str, str], bytes] | int:
    """The form's text fields and the file, or the status that refuses it."""
    try:
        length = int(request.headers.get("content-length", ""))
    except ValueError:
        return 411
    if length > MAX_WORKFLOW_BYTES + 64_000:  # the form's other fields and boundaries
        return 413
    async with request.form(max_files=1, max_fields=4) as fields:
        upload = fields.get("workflow")
        texts = {k: v for k, v in fields.items() if isinstance(v, str)}
        if not isinstance(upload, UploadFile):
            return 422
        data = await upload.read(MAX_WORKFLOW_BYTES + 1)
    if len(data) > MAX_WORKFLOW_BYTES:
        return 413
    return texts, data


async def upload(request: Request) -> Response:
    web: Web = request.app.state.web
    refused = await gate(web, request)
    if refused:
        return refused
    if not request.headers.get("content-type", "").startswith("multipart/form-data"):
        return await page_with(web, request, "send the workflow as a file", ok=False, status=415)
    read = await _read(request)
    if isinstance(read, int):
        reasons = {411: "the upload has no length", 413: "the workflow is too large"}
        text = reasons.get(read, "the form has no workflow file")
        return await page_with(web, request, text, ok=False, status=read)
    fields, data = read
    refusal = post_refusal(request, fields)
    if refusal:
        return await page_with(web, request, refusal, ok=False, status=403)
    bot = fields.get("bot", "")
    target = await _target(web, bot)
    if isinstance(target, tuple):
        return await page_with(web, request, target[0], ok=False, status=target[1])
    problem = workflow_problem(data)
    if problem:
        return await page_with(web, request, f"not saved: {problem}", ok=False, status=422)
    await asyncio.to_thread(write_file, target, data.decode("utf-8"))
    said = f"{target.relative_to(web.root.resolve())} saved; restart {bot} to use it"
    return await page_with(web, request, said, ok=True)


async def _target(web: Web, bot: str) -> Path | tuple[str, int]:
    """The file the bot's workflow key names (links resolved), or why not and the status."""
    configs = await web.fleet.current()
    if bot not in configs.bots:
        return f"no bot {bot!r}", 404
    comfyui = configs.bots[bot].integrations.comfyui
    path = workflow_path(comfyui, web.root) if comfyui is not None else None
    if path is None:
        return f"set integrations.comfyui.workflow for {bot} first (the file this replaces)", 422
    if not _inside(web.root, path):
        return f"{bot}'s workflow is outside the config directory: replace it by hand", 422
    return path.resolve()


def _inside(root: Path, path: Path) -> bool:
    return path.resolve().is_relative_to(root.resolve())
