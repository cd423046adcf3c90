"""The configurator's OAuth page: each bot's OAuth MCP servers with their state, a button
that answers with the authorization link, the redirect taken on the web server's
``/config/oauth/callback``, the tokens sealed and stored as ``salon tools auth`` stores
them (and used by the bot's calls). The configurator's rules: signed in, CSRF."""

from __future__ import annotations

import html
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from salon.config import load_config_dir
from salon.store.sql import SQLStore, sqlite_url
from salon.tools.mcp_auth import KEY_ENV
from salon.tools.oauth_desk import OAuthDesk
from salon.web.app import build_app
from tests.tools.test_mcp_oauth import KEY, Guarded, call_echo, guarded
from tests.web.conftest import ENVIRON, Site, serving, write_fleet
from tests.web.test_configurator import csrf_of, sign_in

__all__ = ["guarded"]  # the fixture, used here


@pytest.fixture
async def oauth_site(tmp_path: Path, guarded: Guarded) -> AsyncIterator[Site]:
    root = write_fleet(tmp_path)
    bot = root / "bots" / "salon.yaml"
    servers = f"mcp_servers:\n  guarded: {{url: {guarded.url}, oauth: {{}}}}\n"
    bot.write_text(bot.read_text(encoding="utf-8") + servers, encoding="utf-8")
    (tmp_path / "data").mkdir()
    environ = {**ENVIRON, KEY_ENV: KEY}
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    try:
        async with (
            serving(root, store, environ, oauth_desk=OAuthDesk(store.tokens, environ)) as (_, url),
            httpx2.AsyncClient(base_url=url, timeout=10, follow_redirects=False) as client,
        ):
            yield Site(url, store, root, environ, client)
    finally:
        await store.close()


def _link(page: str) -> str:
    found = re.search(r'<a href="([^"]+)" rel="noreferrer">', page)
    assert found, page
    return html.unescape(found[1])


async def test_the_page_lists_the_server_and_its_link_authorizes_through_the_callback(
    oauth_site: Site, guarded: Guarded
) -> None:
    site = oauth_site
    await sign_in(site)
    page = await site.client.get("/config/oauth")
    assert page.status_code == 200
    assert "guarded" in page.text
    assert "not authorized" in page.text
    started = await site.client.post(
        "/config/oauth/start",
        data={"bot": "salon", "server": "guarded", "csrf": csrf_of(page.text)},
    )
    assert started.status_code == 200
    link = _link(started.text)
    assert "code_challenge_method=S256" in link
    callback = f"{site.url}/config/oauth/callback"
    assert httpx2.URL(link).params["redirect_uri"] == callback
    # The operator's browser follows the link: the authorization server redirects to the
    # web server's callback route (no session cookie: it is SameSite=Strict).
    async with httpx2.AsyncClient(follow_redirects=True, timeout=10) as browser:
        landed = await browser.get(link)
        again = await browser.get(landed.url)  # the state is used up
    assert landed.status_code == 200, landed.text
    assert "salon is authorized at guarded" in landed.text
    assert str(landed.url).startswith(callback)
    (access,) = guarded.authority.access
    sealed = await site.store.tokens.get("salon", "guarded", "tokens")
    assert sealed is not None
    assert access.encode() not in sealed
    assert await call_echo(site.store, guarded) == "hello"
    listed = await site.client.get("/config/oauth")
    assert "authorized, expires at" in listed.text
    assert again.status_code == 400


async def test_nothing_starts_without_a_session_or_the_csrf_token(
    oauth_site: Site, guarded: Guarded
) -> None:
    site = oauth_site
    form = {"bot": "salon", "server": "guarded"}
    refused = await site.client.post("/config/oauth/start", data={**form, "csrf": "x" * 43})
    assert refused.status_code == 401
    await sign_in(site)
    refused = await site.client.post("/config/oauth/start", data={**form, "csrf": "x" * 43})
    assert refused.status_code == 403
    assert guarded.authority.clients == {}  # no registration was made
    stray = await site.client.get("/config/oauth/callback", params={"code": "c", "state": "s"})
    assert stray.status_code == 400
    assert "unknown or over" in stray.text


async def test_a_client_not_on_loopback_reaches_the_callback_and_nothing_else(
    oauth_site: Site,
) -> None:
    """A person opens their link on their own machine (per_user): the callback answers
    them, guarded by the state alone; the page and its button stay loopback only."""
    site = oauth_site
    configs = load_config_dir(site.root)
    app = build_app(
        store=site.store,
        configs=configs,
        settings=configs.bots["salon"].web,
        environ=dict(site.environ),
        oauth_desk=OAuthDesk(site.store.tokens, site.environ),
    )
    transport = httpx2.ASGITransport(app=app, client=("203.0.113.7", 40000))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = await client.get("/config/oauth")
        started = await client.post("/config/oauth/start", data={"bot": "salon"})
        stray = await client.get("/config/oauth/callback", params={"code": "c", "state": "s"})
    assert (page.status_code, started.status_code) == (403, 403)
    assert stray.status_code == 400
    assert "unknown or over" in stray.text
