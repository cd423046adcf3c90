"""Image generation on a ComfyUI server, from a workflow template.

The template is a workflow exported in ComfyUI's API format, with ``{{prompt}}``,
``{{negative_prompt}}``, ``{{seed}}``, ``{{width}}`` and ``{{height}}`` where the values go
(a string that is exactly a number placeholder becomes a number). A generation opens
ComfyUI's WebSocket (``/ws?clientId=``) first, then queues the workflow (``POST /prompt``
with the same ``client_id``; ComfyUI queues it when at least one output node validates and
names the ones that did not in ``node_errors``: those are said in the result, the others'
images collected), follows ``progress``, ``executed``, ``execution_success`` and
``execution_error`` for its ``prompt_id`` (older servers end with ``executing`` and a null
node), reads the images from ``/history/{prompt_id}`` when the messages did not name them,
and fetches them from ``/view``. Progress goes to the hub (as MCP progress notifications
when served over MCP).
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import uuid
from pathlib import Path
from typing import Annotated, Any

import websockets
from pydantic import Field
from websockets.asyncio.client import ClientConnection, connect

from salon.config import ComfyUIIntegration
from salon.config.integrations import load_workflow, workflow_path
from salon.integrations._discipline import Clock, Discipline
from salon.integrations._http import VendorError, VendorHttp
from salon.integrations._server import (
    GENERATES,
    Lookup,
    content_result,
    expect_shape,
    guarded,
    image_block,
)
from salon.tools.base import Progress
from salon.tools.native import Image, Result, ToolSet

__all__ = ["ComfyUI", "build_comfyui_server", "fill_template"]

logger = logging.getLogger(__name__)

SERVICE = "ComfyUI"
_WS_MAX_MESSAGE = 32 * 1024 * 1024  # preview frames arrive as binary messages
_HISTORY_TRIES = 3
_STATUS_WAIT = 5.0


def fill_template(template: Any, values: dict[str, Any]) -> Any:
    """The workflow with every ``{{name}}`` replaced; exact placeholders keep their type."""
    if isinstance(template, dict):
        return {k: fill_template(v, values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill_template(v, values) for v in template]
    if isinstance(template, str):
        for name, value in values.items():
            mark = "{{" + name + "}}"
            if template == mark:
                return value
            template = template.replace(mark, str(value))
    return template


class _ProgressSteps:
    """ComfyUI counts each node's steps from zero; MCP progress must only grow."""

    def __init__(self, report: Progress) -> None:
        self._report = report
        self._stage = 0
        self._last = -1.0

    async def step(self, value: float, maximum: float) -> None:
        if maximum <= 0:
            return
        if value / maximum < self._last - self._stage:
            self._stage += 1  # a new node started counting
        done = self._stage + value / maximum
        if done > self._last:
            self._last = done
            await self._report(done, None, f"step {value:g}/{maximum:g}")


class ComfyUI:
    def __init__(self, http: VendorHttp, config: ComfyUIIntegration, workflow: dict[str, Any]):
        self.http = http
        self.config = config
        self.workflow = workflow
        self.base = (config.base_url or "http://127.0.0.1:8188").rstrip("/")
        self.ws_base = "ws" + self.base[4:] if self.base.startswith("http") else self.base

    async def generate(
        self, values: dict[str, Any], report: Progress
    ) -> tuple[list[dict[str, Any]], list[Image], str]:
        """(the image files, the images, what ComfyUI left out of the run)."""
        client_id = uuid.uuid4().hex
        graph = fill_template(self.workflow, values)
        try:
            async with connect(
                f"{self.ws_base}/ws?clientId={client_id}",
                max_size=_WS_MAX_MESSAGE,
                open_timeout=min(self.config.timeout, 30.0),
                user_agent_header="salon",
            ) as ws:
                prompt_id, left_out = await self._queue(graph, client_id)
                await report(0, None, "queued")
                named = await self._follow(ws, prompt_id, _ProgressSteps(report))
                files = named or await self._history(ws, prompt_id)
        except (OSError, websockets.exceptions.WebSocketException) as exc:
            logger.info("ComfyUI WebSocket: %s: %s", type(exc).__name__, exc)
            raise VendorError(
                "could not follow ComfyUI over its WebSocket; check its base_url and that it runs"
            ) from None
        return files, await self._fetch(files), left_out

    async def _queue(self, graph: dict[str, Any], client_id: str) -> tuple[str, str]:
        """The run's id, and what ComfyUI left out of it. A 200 with ``node_errors`` is a
        queued run whose other outputs go ahead (a workflow with no valid output is a 400)."""
        answer = await self.http.post_json(
            f"{self.base}/prompt", {"prompt": graph, "client_id": client_id}
        )
        with expect_shape(SERVICE):
            prompt_id = str(answer["prompt_id"])
            errors = answer.get("node_errors") or {}
            left_out = _left_out(errors) if isinstance(errors, dict) else ""
        if left_out:
            logger.info("ComfyUI queued %s without some outputs: %s", prompt_id, left_out)
        return prompt_id, left_out

    async def _follow(
        self, ws: ClientConnection, prompt_id: str, steps: _ProgressSteps
    ) -> list[dict[str, Any]]:
        files: list[dict[str, Any]] = []
        async for raw in ws:
            if isinstance(raw, bytes):
                continue  # a preview image
            kind, data = _message(raw)
            if data.get("prompt_id", prompt_id) != prompt_id:
                continue  # someone else's run
            if kind == "progress":
                await steps.step(float(data.get("value", 0)), float(data.get("max", 0)))
            elif kind == "executed":
                files += (data.get("output") or {}).get("images") or []
            elif kind == "execution_error":
                node = data.get("node_type") or data.get("node_id") or "a node"
                said = data.get("exception_message") or "an error"
                raise VendorError(f"ComfyUI failed in {node}: {str(said).strip()[:300]}")
            elif kind == "execution_interrupted":
                raise VendorError("ComfyUI's run was interrupted on the server; try again")
            elif kind == "execution_success" or _ended(kind, data):
                return files
        raise VendorError("ComfyUI closed its WebSocket before the image was done; try again")

    async def _history(self, ws: ClientConnection, prompt_id: str) -> list[dict[str, Any]]:
        """The run's images from its history; it is written just after the run ends."""
        for _ in range(_HISTORY_TRIES):
            history = await self.http.get_json(f"{self.base}/history/{prompt_id}")
            with expect_shape(SERVICE):
                entry = history.get(prompt_id)
                if entry:
                    outputs = entry.get("outputs") or {}
                    return [img for out in outputs.values() for img in out.get("images") or []]
            await _next_status(ws)
        raise VendorError("ComfyUI finished but its history has no images; check the workflow")

    async def _fetch(self, files: list[dict[str, Any]]) -> list[Image]:
        finals = [f for f in files if f.get("type") == "output"] or files
        if not finals:
            raise VendorError("ComfyUI's workflow produced no image; it needs a SaveImage node")
        images = []
        for file in finals[: self.config.max_images]:
            params = {
                "filename": file["filename"],
                "subfolder": file.get("subfolder", ""),
                "type": file.get("type", "output"),
            }
            data, kind = await self.http.get_bytes(
                f"{self.base}/view", params=params, max_bytes=self.config.max_image_bytes
            )
            kind = kind if kind.startswith("image/") else "image/png"
            images.append(image_block(data, kind, name=str(file["filename"])))
        return images


def _left_out(node_errors: dict[str, Any]) -> str:
    """The outputs ComfyUI will not run, each with the node that failed validation."""
    parts = []
    for node_id, entry in node_errors.items():
        outputs = ", ".join(str(o) for o in entry.get("dependent_outputs") or []) or "?"
        first = (entry.get("errors") or [{}])[0]
        said = ": ".join(str(first[k]) for k in ("message", "details") if first.get(k))
        label = "output" if "," not in outputs else "outputs"
        parts.append(
            f"{label} {outputs}, because node {node_id} ({entry.get('class_type', '?')}) "
            f"failed validation" + (f": {said}" if said else "")
        )
    return "; ".join(parts)[:600]


def _ended(kind: str, data: dict[str, Any]) -> bool:
    """Servers before ``execution_success`` end a run with ``executing`` of no node."""
    return kind == "executing" and data.get("node") is None and "prompt_id" in data


def _message(raw: str) -> tuple[str, dict[str, Any]]:
    try:
        message = json.loads(raw)
    except ValueError:
        return "", {}
    if not isinstance(message, dict) or not isinstance(message.get("data"), dict):
        return "", {}
    return str(message.get("type")), message["data"]


async def _next_status(ws: ClientConnection) -> None:
    """Wait for ComfyUI's next queue status (sent when a run's history is written)."""
    try:
        async with asyncio.timeout(_STATUS_WAIT):
            async for raw in ws:
                if isinstance(raw, str) and _message(raw)[0] == "status":
                    return
    except TimeoutError:
        return


def _size(value: int | None, default: int, config: ComfyUIIntegration) -> int:
    side = value or default
    if side > config.max_side:
        raise VendorError(f"{side} pixels is too large; at most {config.max_side} per side")
    return side - side % 8  # latent images come in multiples of eight


def build_comfyui_server(
    config: ComfyUIIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    path = workflow_path(config, root)
    if path is None:  # salon.config.integrations keeps such a config from being built
        raise ValueError("comfyui needs a workflow")
    http = VendorHttp(SERVICE, timeout=config.timeout)
    comfy = ComfyUI(http, config, load_workflow(path))
    discipline = Discipline(SERVICE, config, clock)
    server = ToolSet(
        "comfyui",
        instructions="Image generation on a ComfyUI server.",
        resources=[http],
    )

    @server.tool(annotations=GENERATES, structured_output=False)
    async def generate_image(  # noqa: PLR0917 - the model passes these by name
        progress: Progress,
        prompt: Annotated[str, Field(min_length=1, max_length=2000, description="the picture")],
        negative_prompt: Annotated[str, Field(max_length=1000, description="what to avoid")] = "",
        width: Annotated[int | None, Field(ge=64, le=8192)] = None,
        height: Annotated[int | None, Field(ge=64, le=8192)] = None,
        seed: Annotated[int | None, Field(ge=0, le=2**53)] = None,
    ) -> Result:
        """Generate an image from a text prompt with ComfyUI (takes a while; progress is
        reported). The image is shown in the channel."""
        wanted = {"prompt": prompt, "negative_prompt": negative_prompt, "seed": seed}
        sizes = (width, height)
        return await guarded(SERVICE, lambda: _generate(comfy, discipline, wanted, sizes, progress))

    return server


async def _generate(
    comfy: ComfyUI,
    discipline: Discipline,
    wanted: dict[str, Any],
    sizes: tuple[int | None, int | None],
    report: Progress,
) -> Result:
    config = comfy.config
    seed = wanted["seed"]
    values = {
        **wanted,
        "width": _size(sizes[0], config.width, config),
        "height": _size(sizes[1], config.height, config),
        "seed": seed if seed is not None else random.SystemRandom().randrange(2**32),
    }
    files, images, left_out = await discipline.run(lambda: comfy.generate(values, report))
    names = ", ".join(str(f.get("filename")) for f in files[: len(images)])
    text = (
        f"ComfyUI made {len(images)} image(s) for {values['prompt']!r} "
        f"({values['width']}x{values['height']}, seed {values['seed']}): {names}"
    )
    if left_out:
        text += f"\nLeft out: {left_out}"
    return content_result(text, images)
