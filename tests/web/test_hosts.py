"""DNS rebinding and cross-site sign-ins: every route answers only to this server's own
host names, and a sign-in sent by another site never counts toward the lockout."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest

from salon.config import WebConfig
from salon.store.sql import SQLStore, sqlite_url
from tests.web.conftest import ACTIVITY_KEY, TRIGGER_TOKEN, Site, serving, write_fleet

# A page of rebind.example whose name now resolves to 127.0.0.1: the browser sends its own
# host name, and its Origin, with every request it makes to this server.
REBOUND = "rebind.example"


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found[1]


def rebound(site: Site) -> dict[str, str]:
    port = httpx2.URL(site.url).port
    return {"Host": f"{REBOUND}:{port}", "Origin": f"http://{REBOUND}:{port}"}


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/"),
        ("GET", "/health"),
        ("GET", "/metrics"),
        ("GET", "/activity"),
        ("POST", "/activity/login"),
        ("POST", "/bots/salon/events"),
        ("GET", "/static/salon.js"),
        ("GET", "/no/such/page"),
    ],
)
async def test_a_rebound_host_name_is_refused_on_every_route(
    site: Site, method: str, path: str
) -> None:
    headers = {**rebound(site), "Authorization": f"Bearer {TRIGGER_TOKEN}"}
    body = b'{"channel": "irc:#salon", "text": "hi"}' if "events" in path else b""
    response = await site.client.request(method, path, headers=headers, content=body)
    assert response.status_code == 403
    assert response.text.splitlines() == [
        "this server does not answer to that host name (see web.allowed_hosts)"
    ]
    assert await site.store.inbox.take_events("salon", "test") == []


async def test_a_rebound_page_cannot_lock_sign_in(site: Site) -> None:
    headers = rebound(site)
    page = await site.client.get("/activity", headers=headers)
    token = csrf_of(page.text) if page.status_code == 401 else "x" * 43
    for _ in range(12):
        await site.client.post(
            "/activity/login", data={"key": "guess", "csrf": token}, headers=headers
        )
    page = await site.client.get("/activity")
    response = await site.client.post(
        "/activity/login", data={"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
    )
    assert response.status_code == 303


@pytest.mark.parametrize("fetch_site", ["cross-site", "same-site"])
async def test_a_sign_in_from_another_site_is_refused_before_it_counts(
    site: Site, fetch_site: str
) -> None:
    """Browsers say where a request comes from in Sec-Fetch-Site (sent to localhost and
    https addresses); a POST from anywhere but this page is refused without counting."""
    page = await site.client.get("/activity")
    token = csrf_of(page.text)
    for _ in range(12):
        response = await site.client.post(
            "/activity/login",
            data={"key": "guess", "csrf": token},
            headers={"Sec-Fetch-Site": fetch_site},
        )
        assert response.status_code == 403
        assert "another site" in response.text
    response = await site.client.post(
        "/activity/login",
        data={"key": ACTIVITY_KEY, "csrf": token},
        headers={"Sec-Fetch-Site": "same-origin"},
    )
    assert response.status_code == 303


@pytest.fixture
async def listed(tmp_path: Path) -> AsyncIterator[str]:
    root = write_fleet(tmp_path)
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    settings = WebConfig(public_url="https://salon.example.org", allowed_hosts=["salon"])
    try:
        async with serving(root, store, settings=settings, host="0.0.0.0") as (server, _):
            yield f"http://127.0.0.1:{server.port}"
    finally:
        await store.close()


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8787",  # the image's HEALTHCHECK
        "localhost",
        "[::1]:8787",
        "salon.example.org",  # web.public_url, through the proxy
        "SALON.example.org:443",
        "salon:8787",  # web.allowed_hosts: a compose service name Prometheus scrapes
        "192.0.2.10:8787",  # an address: no page elsewhere can make a browser send it
        "[2001:db8::7]:8787",
    ],
)
async def test_monitoring_reaches_health_and_metrics_by_the_names_it_uses(
    listed: str, host: str
) -> None:
    async with httpx2.AsyncClient(base_url=listed, timeout=10) as client:
        for path in ("/health", "/metrics"):
            response = await client.get(path, headers={"Host": host})
            assert response.status_code in (200, 503), (path, host)
            assert "allowed_hosts" not in response.text


async def test_a_name_not_listed_is_refused_even_when_bound_to_every_address(listed: str) -> None:
    async with httpx2.AsyncClient(base_url=listed, timeout=10) as client:
        for host in ("salon.example.org.evil.example", "evil.example", "", "salon2"):
            response = await client.get("/health", headers={"Host": host})
            assert response.status_code in (400, 403), host
