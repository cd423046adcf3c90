"""Sessions end when people sign out: the cookie is signed, and names a session the store
keeps, so a copied cookie opens nothing once its session ended; "sign out everywhere" ends
them all, and every web server on the store sees it within seconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx2

from salon.config import load_config_dir
from salon.store.sql import SQLStore
from salon.web.app import build_app
from salon.web.links import SESSION, make_token
from salon.web.sessions import CACHE_SECONDS
from tests.web.conftest import ACTIVITY_KEY, ENVIRON, Site
from tests.web.test_activity import csrf_of, sign_in


async def _copied(site: Site) -> httpx2.AsyncClient:
    """Another browser holding a copy of the session cookie."""
    other = httpx2.AsyncClient(base_url=site.url, timeout=10)
    other.cookies.set("salon_session", site.client.cookies["salon_session"])
    return other


async def _sign_out(site: Site, **extra: str) -> None:
    page = await site.client.get("/activity")
    answer = await site.client.post("/activity/logout", data={"csrf": csrf_of(page.text), **extra})
    assert answer.status_code == 303


async def test_signing_out_ends_the_session_for_a_copied_cookie_too(site: Site) -> None:
    await sign_in(site)
    async with await _copied(site) as thief:
        assert (await thief.get("/activity")).status_code == 200
        assert (await thief.get("/config")).status_code == 200
        await _sign_out(site)
        assert (await thief.get("/activity")).status_code == 401
        assert (await thief.get("/activity/rows", params={"after": "0"})).status_code == 401
        assert (await thief.get("/config")).status_code == 401
        assert (await thief.get("/config/log")).status_code == 401


async def test_signing_out_everywhere_ends_every_session(site: Site) -> None:
    await sign_in(site)
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as laptop:
        page = await laptop.get("/activity")
        data = {"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
        assert (await laptop.post("/activity/login", data=data)).status_code == 303
        assert (await laptop.get("/activity")).status_code == 200
        page = await site.client.get("/activity")
        assert "sign out everywhere" in page.text
        await _sign_out(site, everywhere="1")
        assert (await laptop.get("/activity")).status_code == 401
    assert (await site.client.get("/activity")).status_code == 401
    await sign_in(site)  # a new session works
    assert (await site.client.get("/activity")).status_code == 200


async def test_signing_out_everywhere_wants_a_live_session(site: Site) -> None:
    """Anyone may get a CSRF cookie: ending everyone's sessions takes being signed in."""
    await sign_in(site)
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as stranger:
        page = await stranger.get("/activity")
        data = {"csrf": csrf_of(page.text), "everywhere": "1"}
        assert (await stranger.post("/activity/logout", data=data)).status_code == 303
    assert (await site.client.get("/activity")).status_code == 200


async def test_a_cookie_signed_without_a_session_opens_nothing(site: Site) -> None:
    """A cookie of the key alone (as Salon signed them before sessions ended) is no session."""
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
        other.cookies.set("salon_session", make_token(ACTIVITY_KEY, SESSION, 600))
        assert (await other.get("/activity")).status_code == 401


def _server(site: Site, clock: Callable[[], float]) -> Any:
    configs = load_config_dir(site.root)
    app = build_app(
        store=site.store, configs=configs, settings=configs.bots["salon"].web, environ=ENVIRON
    )
    app.state.web.now = clock
    return app


def _browser(app: Any, cookies: httpx2.Cookies | None = None) -> httpx2.AsyncClient:
    transport = httpx2.ASGITransport(app=app, client=("127.0.0.1", 40000))
    return httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1", cookies=cookies)


async def test_web_servers_sharing_the_store_see_sessions_begin_and_end(site: Site) -> None:
    now = [1_900_000_000.0]
    first, second = _server(site, lambda: now[0]), _server(site, lambda: now[0])
    async with _browser(first) as browser:
        page = await browser.get("/activity")
        data = {"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
        assert (await browser.post("/activity/login", data=data)).status_code == 303
        async with _browser(second, browser.cookies) as other:
            # Begun on the first server: the second finds it in the store.
            assert (await other.get("/activity")).status_code == 200
            page = await browser.get("/activity")
            logout = {"csrf": csrf_of(page.text)}
            assert (await browser.post("/activity/logout", data=logout)).status_code == 303
            now[0] += CACHE_SECONDS + 1
            assert (await other.get("/activity")).status_code == 401


async def test_pages_polled_often_read_the_sessions_once_in_a_while(site: Site) -> None:
    now = [1_900_000_000.0]
    async with _browser(_server(site, lambda: now[0])) as browser:
        page = await browser.get("/activity")
        data = {"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
        assert (await browser.post("/activity/login", data=data)).status_code == 303
        reads = _count_reads(site.store)
        for _ in range(20):
            assert (await browser.get("/activity/rows", params={"after": "0"})).status_code == 200
            assert (await browser.get("/static/salon.css")).status_code == 200
            now[0] += CACHE_SECONDS / 10
        assert 1 <= reads() <= 2  # at the first check, then once the cache aged


def _count_reads(store: SQLStore) -> Callable[[], int]:
    """How many times the sessions were read from the store from now on."""
    part = store.sessions
    live = part.live_sessions
    calls = [0]

    async def counted(*args: Any, **kwargs: Any) -> set[str]:
        calls[0] += 1
        return await live(*args, **kwargs)

    part.live_sessions = counted  # type: ignore[method-assign]
    return lambda: calls[0]


async def test_without_the_store_no_session_is_taken_and_sign_in_says_why(site: Site) -> None:
    now = [1_900_000_000.0]
    async with _browser(_server(site, lambda: now[0])) as browser:
        page = await browser.get("/activity")
        data = {"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
        assert (await browser.post("/activity/login", data=data)).status_code == 303
        await site.store.close()
        now[0] += CACHE_SECONDS + 1
        assert (await browser.get("/config")).status_code == 401
        answer = await browser.post("/activity/login", data=data)
        assert answer.status_code == 503
        assert "store cannot be reached" in answer.text
