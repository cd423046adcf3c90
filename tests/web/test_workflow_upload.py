"""The configurator's ComfyUI workflow upload: an API-format workflow with the placeholders
Salon fills replaces the file the bot's ``integrations.comfyui.workflow`` names; anything
else is refused with the reason, and the file stays as it was."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tests.web.conftest import Site
from tests.web.test_configurator import csrf_of, sign_in

GOOD: dict[str, Any] = {
    "3": {
        "class_type": "KSampler",
        "inputs": {"seed": "{{seed}}", "steps": 20, "model": ["4", 0], "positive": ["6", 0]},
    },
    "4": {"class_type": "CheckpointLoaderSimple", "inputs": {"ckpt_name": "sd.safetensors"}},
    "6": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{prompt}}, ink", "clip": ["4", 1]}},
    "7": {"class_type": "CLIPTextEncode", "inputs": {"text": "{{negative_prompt}}"}},
    "5": {
        "class_type": "EmptyLatentImage",
        "inputs": {"width": "{{width}}", "height": "{{height}}"},
    },
    "9": {"class_type": "SaveImage", "inputs": {"images": ["8", 0]}},
}
OLD = '{"1": {"class_type": "SaveImage", "inputs": {"text": "{{prompt}}"}}}'


def contents(path: Path) -> bytes:
    return path.read_bytes()


@pytest.fixture
def workflow(site: Site) -> Path:
    bot = site.root / "bots" / "salon.yaml"
    bot.write_text(
        bot.read_text()
        + "integrations:\n  comfyui: {base_url: 'http://127.0.0.1:8188', workflow: comfy.json}\n"
    )
    path = site.root / "comfy.json"
    path.write_text(OLD, encoding="utf-8")
    return path


async def upload(site: Site, data: bytes, *, token: str | None = None, bot: str = "salon") -> Any:
    if token is None:
        page = await site.client.get("/config/bots")
        token = csrf_of(page.text)
    return await site.client.post(
        "/config/bots/workflow",
        data={"bot": bot, "csrf": token},
        files={"workflow": ("comfy.json", data, "application/json")},
    )


async def test_a_valid_workflow_replaces_the_configured_file(site: Site, workflow: Path) -> None:
    await sign_in(site)
    page = await site.client.get("/config/bots")
    assert 'action="/config/bots/workflow"' in page.text
    data = json.dumps(GOOD, indent=1).encode()
    answer = await upload(site, data)
    assert answer.status_code == 200, answer.text
    assert "comfy.json saved" in answer.text
    assert contents(workflow) == data


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"{not json", "not valid JSON"),
        (b"[1, 2]", "JSON object of nodes"),
        (json.dumps({"nodes": [], "links": []}).encode(), "API format"),
        (json.dumps({"3": {"inputs": {}}}).encode(), "class_type"),
        (json.dumps({"3": {"class_type": "KSampler", "inputs": {"s": 1}}}).encode(), "{{prompt}}"),
        (
            json.dumps(
                {**GOOD, "8": {"class_type": "X", "inputs": {"steps": "{{steps}}"}}}
            ).encode(),
            "{{steps}}",
        ),
        ("\ufeff{}".encode() + b"\xff", "UTF-8"),
    ],
)
async def test_a_bad_workflow_is_refused_with_its_reason(
    site: Site, workflow: Path, data: bytes, why: str
) -> None:
    await sign_in(site)
    answer = await upload(site, data)
    assert answer.status_code == 422
    assert why in answer.text
    assert contents(workflow) == OLD.encode()


async def test_too_large_is_refused(site: Site, workflow: Path) -> None:
    await sign_in(site)
    answer = await upload(site, b"{" + b" " * 3_000_000 + b"}")
    assert answer.status_code == 413
    assert contents(workflow) == OLD.encode()


async def test_the_upload_wants_a_session_and_the_csrf_token(site: Site, workflow: Path) -> None:
    data = json.dumps(GOOD).encode()
    answer = await upload(site, data, token="x" * 43)
    assert answer.status_code == 401
    await sign_in(site)
    answer = await upload(site, data, token="x" * 43)
    assert answer.status_code == 403
    assert contents(workflow) == OLD.encode()


async def test_a_bot_without_a_workflow_key_says_what_to_set(site: Site) -> None:
    await sign_in(site)
    answer = await upload(site, json.dumps(GOOD).encode())
    assert answer.status_code == 422
    assert "integrations.comfyui.workflow" in answer.text


def nested(depth: int) -> bytes:
    """Valid JSON the parser takes, nested deeper than any workflow."""
    inner = '{"a": ' * depth + '{"text": "{{prompt}}"}' + "}" * depth
    return f'{{"1": {{"class_type": "CLIPTextEncode", "inputs": {inner}}}}}'.encode()


@pytest.mark.parametrize("data", [b"[" * 100_000, b'{"1": ' * 100_000, nested(990)])
async def test_a_deeply_nested_file_gets_422_in_one_line_and_the_server_serves_on(
    site: Site, workflow: Path, data: bytes
) -> None:
    await sign_in(site)
    answer = await upload(site, data)
    assert answer.status_code == 422
    (line,) = re.findall(r"not saved: [^<]*", answer.text)
    assert "nested too deeply" in line
    assert contents(workflow) == OLD.encode()
    answer = await upload(site, json.dumps(GOOD).encode())
    assert answer.status_code == 200
