"""ComfyUI: queue a workflow, follow it over a real WebSocket, fetch the images."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from pathlib import Path

from mcp.server.mcpserver import MCPServer

from fakes.vendors.comfyui import ComfyUIFake, RunPlan
from fakes.vendors.images import tiny_png
from salon.config import ComfyUIIntegration
from salon.integrations.comfyui import build_comfyui_server, fill_template
from tests.integrations.conftest import ManualClock, connect, images_of, no_secrets, text_of, within

WORKFLOW = Path(__file__).with_name("workflow.json")


def _server(fake: ComfyUIFake, tmp_path: Path, clock: ManualClock, **settings: object) -> MCPServer:
    shutil.copy(WORKFLOW, tmp_path / "workflow.json")
    config = ComfyUIIntegration(base_url=fake.base_url, workflow="workflow.json", **settings)  # type: ignore[arg-type]
    return build_comfyui_server(config, lookup=no_secrets, root=tmp_path, clock=clock)


async def test_a_generation_reports_progress_and_returns_the_image(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    async with connect(_server(comfyui, tmp_path, clock)) as client:
        result = await client.call_tool(
            "generate_image",
            {"prompt": "a castle", "negative_prompt": "fog", "width": 770, "seed": 7},
            progress_callback=progress,
        )
    text = text_of(result)
    assert not result.is_error, text
    assert text == "ComfyUI made 1 image(s) for 'a castle' (768x1024, seed 7): salon_00001_.png"
    (image,) = images_of(result)
    assert image.mime_type == "image/png"
    assert image.meta == {"salon/name": "salon_00001_.png"}
    assert base64.b64decode(image.data) == tiny_png(4, 4, 40)
    assert seen == [
        (0, None, "queued"),
        (0.25, None, "step 1/4"),
        (0.5, None, "step 2/4"),
        (0.75, None, "step 3/4"),
        (1.0, None, "step 4/4"),
    ]
    queued = next(r for r in comfyui.requests if r.path == "/prompt")
    graph = queued.body["prompt"]
    assert graph["3"]["inputs"]["seed"] == 7
    assert graph["5"]["inputs"] == {"width": 768, "height": 1024, "batch_size": 1}
    assert graph["6"]["inputs"]["text"] == "a castle"
    assert graph["7"]["inputs"]["text"] == "blurry, fog"
    socket = next(r for r in comfyui.requests if r.path == "/ws")
    assert socket.query["clientId"] == queued.body["client_id"]
    view = next(r for r in comfyui.requests if r.path == "/view")
    assert view.query == {"filename": "salon_00001_.png", "subfolder": "", "type": "output"}


async def test_an_older_server_ends_with_executing_and_the_images_come_from_history(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    comfyui.plan = RunPlan(
        ending="executing_null",
        announce_outputs=False,
        history_late=True,
        filenames=["a.png", "b.png"],
    )
    async with connect(_server(comfyui, tmp_path, clock)) as client:
        result = await client.call_tool("generate_image", {"prompt": "a castle"})
    assert not result.is_error, text_of(result)
    assert len(images_of(result)) == 2
    looks = [r.path for r in comfyui.requests if r.path.startswith("/history")]
    assert len(looks) == 2  # empty at first; again after the status that follows the write
    assert "a.png, b.png" in text_of(result)


async def test_an_error_in_the_workflow(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    comfyui.plan = RunPlan(
        error={
            "node_id": "3",
            "node_type": "KSampler",
            "executed": ["4", "5"],
            "exception_message": "Allocation on device\nThis error means you ran out of memory on your GPU.",
            "exception_type": "torch.OutOfMemoryError",
            "traceback": ["..."],
            "current_inputs": {},
            "current_outputs": {},
        }
    )
    async with connect(_server(comfyui, tmp_path, clock)) as client:
        result = await client.call_tool("generate_image", {"prompt": "a castle"})
    assert result.is_error
    assert text_of(result).startswith("ComfyUI failed in KSampler: Allocation on device")


async def test_a_workflow_comfyui_refuses(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    graph = json.loads(WORKFLOW.read_text())
    graph["4"]["inputs"]["ckpt_name"] = "{{model}}"  # a placeholder Salon does not fill
    (tmp_path / "odd.json").write_text(json.dumps(graph))
    config = ComfyUIIntegration(base_url=comfyui.base_url, workflow=str(tmp_path / "odd.json"))
    server = build_comfyui_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("generate_image", {"prompt": "a castle"})
    assert result.is_error
    assert text_of(result) == (
        "ComfyUI rejected the request (HTTP 400): Prompt outputs failed validation "
        "Value not in list: ckpt_name: '{{model}}' not in (list of length 3)"
    )


async def test_outputs_comfyui_accepts_run_and_their_images_are_collected(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    graph = json.loads(WORKFLOW.read_text())
    graph["10"] = {
        "class_type": "ImageScale",
        "inputs": {"image": ["8", 0], "upscale_method": "{{method}}", "width": 2048},
    }
    graph["11"] = {
        "class_type": "SaveImage",
        "inputs": {"filename_prefix": "big", "images": ["10", 0]},
    }
    graph["12"] = {
        "class_type": "SaveImage",
        "inputs": {"filename_prefix": "salon_12", "images": ["8", 0]},
    }
    (tmp_path / "two.json").write_text(json.dumps(graph))
    config = ComfyUIIntegration(base_url=comfyui.base_url, workflow=str(tmp_path / "two.json"))
    server = build_comfyui_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await within(client.call_tool("generate_image", {"prompt": "a castle", "seed": 7}))
    text = text_of(result)
    assert not result.is_error, text  # ComfyUI queued the run: 200 with node_errors
    assert text == (
        "ComfyUI made 2 image(s) for 'a castle' (1024x1024, seed 7): salon_00001_.png, "
        "salon_12_00001_.png\n"
        "Left out: output 11, because node 10 (ImageScale) failed validation: Value not in "
        "list: upscale_method: '{{method}}' not in (list of length 3)"
    )
    assert [base64.b64decode(i.data) for i in images_of(result)] == [
        tiny_png(4, 4, 40),
        tiny_png(4, 4, 50),
    ]


async def test_a_run_past_the_timeout_is_abandoned_and_the_socket_closed(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    gate = asyncio.Event()
    comfyui.plan = RunPlan(gate=gate)
    async with connect(_server(comfyui, tmp_path, clock, timeout=0.5)) as client:
        result = await client.call_tool("generate_image", {"prompt": "a castle"})
    assert result.is_error
    assert text_of(result).startswith("ComfyUI did not finish within 0.5 seconds")
    assert comfyui.sockets == {}
    gate.set()


async def test_too_large_is_refused_before_queueing(
    comfyui: ComfyUIFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_server(comfyui, tmp_path, clock)) as client:
        result = await client.call_tool("generate_image", {"prompt": "a castle", "width": 4096})
    assert result.is_error
    assert text_of(result) == "4096 pixels is too large; at most 2048 per side"
    assert comfyui.requests == []


async def test_comfyui_not_running(tmp_path: Path, clock: ManualClock) -> None:
    fake = ComfyUIFake()
    await fake.start()
    base = fake.base_url
    await fake.stop()
    shutil.copy(WORKFLOW, tmp_path / "workflow.json")
    config = ComfyUIIntegration(base_url=base, workflow="workflow.json")
    server = build_comfyui_server(config, lookup=no_secrets, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await within(client.call_tool("generate_image", {"prompt": "a castle"}))
    assert result.is_error
    assert text_of(result) == (
        "could not follow ComfyUI over its WebSocket; check its base_url and that it runs"
    )


def test_placeholders_keep_numbers_numbers() -> None:
    template = {"a": "{{seed}}", "b": ["x {{prompt}} y", "{{prompt}}"], "c": 3}
    assert fill_template(template, {"seed": 5, "prompt": "hi"}) == {
        "a": 5,
        "b": ["x hi y", "hi"],
        "c": 3,
    }
