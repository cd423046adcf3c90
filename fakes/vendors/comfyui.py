"""A ComfyUI server on loopback: POST /prompt, the /ws WebSocket, /history and /view.

As ComfyUI's server.py and execution.py behave: ``/ws?clientId=`` greets with a ``status``
message; ``POST /prompt`` with ``{"prompt", "client_id"}`` validates each output node
(SaveImage) with everything it depends on: when at least one output is valid
it answers 200 ``{"prompt_id", "number", "node_errors"}`` and runs only the valid outputs
(``node_errors`` names each invalid node with its ``errors``, ``dependent_outputs`` and
``class_type``); when none is, 400 with ``error`` (``prompt_outputs_failed_validation``) and
``node_errors``. Here a node is invalid when an input still holds a ``{{placeholder}}``. The
run
is reported to that client as JSON messages ``{"type", "data"}`` (``execution_start``,
``execution_cached``, ``executing``, ``progress`` {value, max}, ``executed`` with the output
images, ``execution_success`` or ``execution_error``) plus binary preview frames; the history
(``/history/{prompt_id}``, ``{}`` while unknown) is written after the run, followed by a
``status`` message; ``/view?filename&subfolder&type`` serves the file (404 if unknown).
"""

from __future__ import annotations

import asyncio
import struct
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import WSMsgType, web

from fakes.vendors.base import VendorFake, json_response
from fakes.vendors.images import tiny_png

__all__ = ["ComfyUIFake", "RunPlan"]

OUTPUT_CLASSES = {"SaveImage"}  # the output nodes (OUTPUT_NODE) that write output files


@dataclass
class RunPlan:
    """How the next run goes."""

    steps: int = 4
    ending: str = "execution_success"  # or "executing_null" (older servers)
    announce_outputs: bool = True  # send ``executed`` with the images
    error: dict[str, Any] | None = None  # an ``execution_error`` payload instead of success
    gate: asyncio.Event | None = None  # the run waits here after its first progress step
    history_late: bool = False  # the history appears only after a first, empty look at it
    filenames: list[str] = field(default_factory=lambda: ["salon_00001_.png"])


class ComfyUIFake(VendorFake):
    def __init__(self) -> None:
        super().__init__()
        self.plan = RunPlan()
        self.sockets: dict[str, web.WebSocketResponse] = {}
        self.connected = asyncio.Event()
        self.prompts: dict[str, dict[str, Any]] = {}
        self.history: dict[str, dict[str, Any]] = {}
        self.files: dict[tuple[str, str, str], bytes] = {}
        self._runs: set[asyncio.Task[None]] = set()
        self._late: dict[str, Any] = {}
        self._number = 0
        self.route("GET", "/ws", self._socket)
        self.route("POST", "/prompt", self._queue)
        self.route("GET", "/history/{prompt_id}", self._history)
        self.route("GET", "/view", self._view)

    async def stop(self) -> None:
        for task in self._runs:
            task.cancel()
        await asyncio.gather(*self._runs, return_exceptions=True)
        for ws in list(self.sockets.values()):
            await ws.close()
        await super().stop()

    async def _socket(self, request: web.Request) -> web.StreamResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        sid = request.query.get("clientId") or uuid.uuid4().hex
        self.sockets[sid] = ws
        self.connected.set()
        try:
            await ws.send_json(
                {
                    "type": "status",
                    "data": {"status": {"exec_info": {"queue_remaining": 0}}, "sid": sid},
                }
            )
            async for message in ws:
                if message.type == WSMsgType.ERROR:
                    break
        finally:
            self.sockets.pop(sid, None)
        return ws

    async def _queue(self, request: web.Request) -> web.Response:
        body = await request.json()
        graph = body.get("prompt")
        if not isinstance(graph, dict):
            return json_response({"error": "no prompt", "node_errors": []}, 400)
        good, node_errors = _validate(graph)
        if not good:
            details = "\n".join(
                f"{e['message']}: {e['details']}" for n in node_errors.values() for e in n["errors"]
            )
            error = {
                "type": "prompt_outputs_failed_validation",
                "message": "Prompt outputs failed validation",
                "details": details,
                "extra_info": {},
            }
            return json_response({"error": error, "node_errors": node_errors}, 400)
        prompt_id = str(uuid.uuid4())
        self.prompts[prompt_id] = graph
        self._number += 1
        client_id = body.get("client_id", "")
        task = asyncio.create_task(self._run(prompt_id, client_id, self.plan, good))
        self._runs.add(task)
        task.add_done_callback(self._runs.discard)
        answer = {"prompt_id": prompt_id, "number": self._number, "node_errors": node_errors}
        return json_response(answer)

    async def _send(self, client_id: str, kind: str, data: dict[str, Any]) -> None:
        ws = self.sockets.get(client_id)
        if ws is not None and not ws.closed:
            await ws.send_json({"type": kind, "data": data})

    async def _run(self, prompt_id: str, client_id: str, plan: RunPlan, outputs: list[str]) -> None:
        send = self._send
        await send(client_id, "status", {"status": {"exec_info": {"queue_remaining": 1}}})
        await send(
            client_id,
            "execution_start",
            {"prompt_id": prompt_id, "timestamp": int(time.time() * 1000)},
        )
        await send(client_id, "execution_cached", {"nodes": [], "prompt_id": prompt_id})
        await send(
            client_id, "executing", {"node": "3", "display_node": "3", "prompt_id": prompt_id}
        )
        for value in range(1, plan.steps + 1):
            await send(
                client_id,
                "progress",
                {"value": value, "max": plan.steps, "prompt_id": prompt_id, "node": "3"},
            )
            ws = self.sockets.get(client_id)
            if ws is not None and not ws.closed:
                await ws.send_bytes(
                    struct.pack(">I", 1) + struct.pack(">I", 1) + b"\xff\xd8preview"
                )
            if value == 1 and plan.gate is not None:
                await plan.gate.wait()
        if plan.error is not None:
            await send(client_id, "execution_error", {"prompt_id": prompt_id, **plan.error})
            self.history[prompt_id] = {
                "prompt": [],
                "outputs": {},
                "status": {"status_str": "error", "completed": False, "messages": []},
            }
            return
        made: dict[str, list[dict[str, str]]] = {}
        for k, node in enumerate(outputs):
            names = plan.filenames if k == 0 else [f"salon_{node}_00001_.png"]
            made[node] = []
            for i, name in enumerate(names):
                self.files[(name, "", "output")] = tiny_png(4, 4, 40 + 10 * k + i)
                made[node].append({"filename": name, "subfolder": "", "type": "output"})
            await send(
                client_id, "executing", {"node": node, "display_node": node, "prompt_id": prompt_id}
            )
            if plan.announce_outputs:
                await send(
                    client_id,
                    "executed",
                    {
                        "node": node,
                        "display_node": node,
                        "output": {"images": made[node]},
                        "prompt_id": prompt_id,
                    },
                )
        if plan.ending == "execution_success":
            await send(
                client_id,
                "execution_success",
                {"prompt_id": prompt_id, "timestamp": int(time.time() * 1000)},
            )
        else:
            await send(client_id, "executing", {"node": None, "prompt_id": prompt_id})
        # the worker writes the history after the run ends, then tells everyone the queue changed
        entry = {
            "prompt": [
                self._number,
                prompt_id,
                self.prompts[prompt_id],
                {"client_id": client_id},
                outputs,
            ],
            "outputs": {node: {"images": images} for node, images in made.items()},
            "status": {"status_str": "success", "completed": True, "messages": []},
            "meta": {node: {"node_id": node, "display_node": node} for node in made},
        }

        async def write() -> None:
            self.history[prompt_id] = entry
            await send(client_id, "status", {"status": {"exec_info": {"queue_remaining": 0}}})

        if plan.history_late:
            self._late[prompt_id] = write
        else:
            await write()

    async def _history(self, request: web.Request) -> web.Response:
        prompt_id = request.match_info["prompt_id"]
        entry = self.history.get(prompt_id)
        late = self._late.pop(prompt_id, None)
        if late is not None:  # written just after this look, as ComfyUI's worker may do
            task = asyncio.create_task(late())
            self._runs.add(task)
            task.add_done_callback(self._runs.discard)
        return json_response({prompt_id: entry} if entry else {})

    async def _view(self, request: web.Request) -> web.Response:
        q = request.query
        key = (q.get("filename", ""), q.get("subfolder", ""), q.get("type", "output"))
        data = self.files.get(key)
        if data is None:
            return web.Response(status=404)
        return web.Response(
            body=data,
            content_type="image/png",
            headers={"Content-Disposition": f'filename="{key[0]}"'},
        )


def _validate(graph: dict[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """(the output nodes that can run, node_errors), as execution.validate_prompt finds
    them: an output is invalid when it or any node it depends on is."""
    own = {nid: _input_errors(node) for nid, node in graph.items()}
    node_errors: dict[str, Any] = {}
    good = []
    outputs = [n for n, node in graph.items() if node.get("class_type") in OUTPUT_CLASSES]
    for output in sorted(outputs, key=lambda n: (len(n), n)):  # numeric ids in order
        bad = [nid for nid in _upstream(graph, output) if own.get(nid)]
        if not bad:
            good.append(output)
        for nid in bad:
            entry = node_errors.setdefault(
                nid,
                {
                    "errors": own[nid],
                    "dependent_outputs": [],
                    "class_type": graph[nid]["class_type"],
                },
            )
            entry["dependent_outputs"].append(output)
    return good, node_errors


def _input_errors(node: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "type": "value_not_in_list",
            "message": "Value not in list",
            "details": f"{name}: '{value}' not in (list of length 3)",
            "extra_info": {"input_name": name, "received_value": value},
        }
        for name, value in (node.get("inputs") or {}).items()
        if isinstance(value, str) and "{{" in value
    ]


def _upstream(graph: dict[str, Any], node_id: str) -> list[str]:
    """The node and every node it takes an input from, each once."""
    seen: list[str] = []
    todo = [node_id]
    while todo:
        nid = todo.pop()
        if nid in seen or nid not in graph:
            continue
        seen.append(nid)
        for value in (graph[nid].get("inputs") or {}).values():
            if isinstance(value, list) and len(value) == 2 and isinstance(value[0], str):
                todo.append(value[0])
    return seen
