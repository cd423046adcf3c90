"""A real uvicorn serving the web app on 127.0.0.1, over a store and a config directory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx2
import pytest

from salon.config import WebConfig, load_config_dir
from salon.sockets import bind
from salon.store.sql import SQLStore, sqlite_url
from salon.web.app import build_app
from salon.web.oauth import OAuthDesk
from salon.web.server import WebServer

ACTIVITY_KEY = "act-K3y-7f2Qm9LpX"
TRIGGER_TOKEN = "trg-T0k3n-4Vn8sWq"
PROVIDER_KEY = "sk-pr0v1der-Zz91"
ENVIRON = {
    "SALON_ACTIVITY_KEY": ACTIVITY_KEY,
    "SALON_TRIGGER_TOKEN": TRIGGER_TOKEN,
    "TEST_API_KEY": PROVIDER_KEY,
}

SHARED = """\
providers:
  test: {type: openai, model: test-model, api_key_env: TEST_API_KEY}
provider: test
web: {port: 8787, public_url: "http://127.0.0.1:8787"}
"""
BOT = """\
name: Salon
system_prompt: You are calm.
platforms:
  irc: {server: 127.0.0.1, nick: salon, channels: ["#salon"]}
"""


@dataclass
class Site:
    url: str
    store: SQLStore
    root: Path
    environ: dict[str, str]
    client: httpx2.AsyncClient


def write_fleet(tmp_path: Path) -> Path:
    root = tmp_path / "config"
    (root / "bots").mkdir(parents=True)
    data = tmp_path / "data"
    (root / "shared.yaml").write_text(SHARED + f"data_dir: {data}\n", encoding="utf-8")
    (root / "bots" / "salon.yaml").write_text(BOT, encoding="utf-8")
    return root


@asynccontextmanager
async def serving(
    root: Path,
    store: SQLStore,
    environ: Mapping[str, str] = ENVIRON,
    settings: WebConfig | None = None,
    host: str = "127.0.0.1",
    *,
    oauth_desk: OAuthDesk | None = None,
) -> AsyncIterator[tuple[WebServer, str]]:
    configs = load_config_dir(root)
    app = build_app(
        store=store,
        configs=configs,
        settings=settings or configs.bots["salon"].web,
        environ=dict(environ),
        oauth_desk=oauth_desk,
    )
    server = WebServer(app, bind(host, 0))
    task = asyncio.create_task(server.run())
    try:
        await asyncio.wait_for(server.started.wait(), 10)
        yield server, server.url
    finally:
        server.stop()
        await asyncio.wait_for(task, 10)
        server.close()


@pytest.fixture
async def site(tmp_path: Path) -> AsyncIterator[Site]:
    root = write_fleet(tmp_path)
    (tmp_path / "data").mkdir()
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        async with (
            serving(root, store) as (_, url),
            httpx2.AsyncClient(base_url=url, timeout=10, follow_redirects=False) as client,
        ):
            yield Site(url, store, root, dict(ENVIRON), client)
    finally:
        await store.close()
