"""The activity page over HTTP: keys, links, sessions, CSRF, what it shows, what it hides."""

from __future__ import annotations

import re
import time
from typing import Any

import httpx2

from salon.config import load_config_dir
from salon.web.app import build_app
from salon.web.context import MAX_FAILED_LOGINS_OVERALL, Lockout
from salon.web.links import LINK, activity_link, make_token
from salon.web.pages import money
from tests.web.conftest import ACTIVITY_KEY, ENVIRON, PROVIDER_KEY, TRIGGER_TOKEN, Site
from tests.web.data import sample_traces, write_sample


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "no CSRF token in the page"
    return found[1]


async def sign_in(site: Site) -> None:
    page = await site.client.get("/activity")
    assert page.status_code == 401
    response = await site.client.post(
        "/activity/login", data={"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
    )
    assert response.status_code == 303
    assert response.headers["location"] == "/activity"


async def test_the_page_wants_the_key_and_refuses_a_wrong_one(site: Site) -> None:
    await write_sample(site.store)
    page = await site.client.get("/activity")
    assert page.status_code == 401
    assert "Activity key" in page.text
    assert "when is the deploy?" not in page.text
    wrong = await site.client.post(
        "/activity/login", data={"key": "guess", "csrf": csrf_of(page.text)}
    )
    assert wrong.status_code == 401
    assert "not the activity key" in wrong.text
    assert "salon_session" not in site.client.cookies


async def test_the_key_gives_a_strict_http_only_session(site: Site) -> None:
    await write_sample(site.store)
    page = await site.client.get("/activity")
    response = await site.client.post(
        "/activity/login", data={"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
    )
    cookie = response.headers["set-cookie"].lower()
    assert "salon_session=" in cookie
    assert "httponly" in cookie
    assert "samesite=strict" in cookie
    page = await site.client.get("/activity")
    assert page.status_code == 200
    assert "cache break: edited message" in page.text
    # Cache writes that went unread, per channel and per day.
    assert "Wasted cache writes" in page.text
    assert re.search(r"<td>discord:1001</td><td>1,234</td>", page.text)
    assert "1,234 tokens" in page.text  # today's
    assert "<svg" in page.text
    assert "outcome-error" in page.text


async def test_a_login_without_the_csrf_token_or_from_another_site_is_refused(site: Site) -> None:
    page = await site.client.get("/activity")
    token = csrf_of(page.text)
    missing = await site.client.post("/activity/login", data={"key": ACTIVITY_KEY})
    assert missing.status_code == 403
    wrong = await site.client.post("/activity/login", data={"key": ACTIVITY_KEY, "csrf": "x" * 43})
    assert wrong.status_code == 403
    elsewhere = await site.client.post(
        "/activity/login",
        data={"key": ACTIVITY_KEY, "csrf": token},
        headers={"Origin": "http://evil.example"},
    )
    assert elsewhere.status_code == 403
    assert "salon_session" not in site.client.cookies


async def test_a_signed_link_sets_the_cookie_from_a_page_of_this_site(site: Site) -> None:
    link = activity_link(site.url, ACTIVITY_KEY, 15)
    response = await site.client.get(link)
    assert response.status_code == 200
    assert response.headers["referrer-policy"] == "no-referrer"
    assert 'http-equiv="refresh"' in response.text
    assert "samesite=strict" in response.headers["set-cookie"].lower()
    assert (await site.client.get("/activity")).status_code == 200


async def test_an_expired_or_forged_link_is_refused(site: Site) -> None:
    expired = make_token(ACTIVITY_KEY, LINK, 60, now=time.time() - 3600)
    forged = make_token("another key", LINK, 600)
    for token in (expired, forged, "123.abc", "nonsense"):
        response = await site.client.get("/activity", params={"token": token})
        assert response.status_code == 401
        assert "not valid or has expired" in response.text
        assert (
            "set-cookie" not in response.headers
            or "salon_session" not in response.headers["set-cookie"]
        )
    assert (await site.client.get("/activity")).status_code == 401


async def test_a_trace_opens_whole_with_its_request_tools_and_cache_break(site: Site) -> None:
    ids = await write_sample(site.store)
    unauthorised = await site.client.get(f"/activity/traces/{ids[-3]}?fragment=1")
    assert unauthorised.status_code == 401
    await sign_in(site)
    broken = await site.client.get(f"/activity/traces/{ids[-3]}?fragment=1")
    assert broken.status_code == 200
    assert "cache break: edited message at message 0 (m-old-1)" in broken.text
    assert "cache ttl: system.0 1h, messages.1.content.0 5m" in broken.text
    assert "stable 1h, tail 5m: 6 gaps, 2 within 5m" in broken.text  # why
    assert "Bob: the deploy moved to monday" in broken.text  # the request as a transcript
    assert "cache breakpoint" in broken.text
    assert "the exact request (JSON)" in broken.text
    approved = await site.client.get(f"/activity/traces/{ids[-2]}")
    assert "approval: approved by Alice" in approved.text
    assert (await site.client.get("/activity/traces/999999")).status_code == 404


async def test_new_rows_come_after_the_newest_shown(site: Site) -> None:
    ids = await write_sample(site.store)
    await sign_in(site)
    newer = await site.client.get("/activity/rows", params={"after": ids[-2]})
    assert newer.text.count('class="trace') == 1
    assert f'data-id="{ids[-1]}"' in newer.text
    none = await site.client.get("/activity/rows", params={"after": ids[-1]})
    assert none.text == ""


async def test_new_rows_bring_the_cards_when_an_activation_is_newer_than_they_count(
    site: Site,
) -> None:
    ids = await write_sample(site.store)
    await sign_in(site)
    page = await site.client.get("/activity")
    assert f'id="cards" data-seen="{ids[-1]}"' in page.text
    newer = await site.client.get("/activity/rows", params={"after": ids[-2], "seen": ids[-2]})
    assert newer.text.startswith(f'<div class="cards" id="cards" data-seen="{ids[-1]}">')
    assert "<b>16</b><span>activations</span>" in newer.text
    # Counted already, or under a filter that hides the new row: no rows, and cards only
    # when something is newer than what they count.
    same = await site.client.get("/activity/rows", params={"after": ids[-1], "seen": ids[-1]})
    assert same.text == ""
    hidden = await site.client.get(
        "/activity/rows", params={"after": ids[-1], "seen": ids[-2], "bot": "another"}
    )
    assert hidden.text.startswith('<div class="cards"')
    assert 'class="trace' not in hidden.text


def test_money_keeps_three_significant_digits_below_a_dollar() -> None:
    shown = [money(v) for v in (0, 0.0000234, 0.0215, 0.004, 0.5, 0.9996, 12.3456, 1234.5)]
    assert shown == [
        "$0",
        "$0.0000234",
        "$0.0215",
        "$0.004",
        "$0.50",
        "$1.00",
        "$12.35",
        "$1,234.50",
    ]
    assert money(None) == "-"
    assert money(1e-12) == "<$0.000000001"


async def test_the_page_loads_nothing_from_elsewhere(site: Site) -> None:
    await write_sample(site.store)
    await sign_in(site)
    page = await site.client.get("/activity")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    detail = await site.client.get("/activity/traces/14")
    for shown in (page.text, detail.text):
        for url in re.findall(r'(?:src|href)="([^"]+)"', shown):
            assert url.startswith(("/", "#")), url
        assert " style=" not in shown  # the policy allows no inline styles: they would not apply
        assert "<script>" not in shown
    assert (await site.client.get("/static/salon.css")).status_code == 200
    assert (await site.client.get("/static/salon.js")).status_code == 200


async def test_no_secret_value_appears_in_any_page(site: Site) -> None:
    leaky = sample_traces()[-1]
    leaky.answer = f"the key is {PROVIDER_KEY}, the token {TRIGGER_TOKEN}"
    leaky.error = f"failed with {ACTIVITY_KEY}"
    await site.store.write_traces([*sample_traces(), leaky])
    pages = [await site.client.get(p) for p in ("/activity", "/health", "/metrics")]
    await sign_in(site)
    pages += [await site.client.get("/activity")]
    pages += [await site.client.get(f"/activity/traces/{i}") for i in range(1, 17)]
    pages += [await site.client.get("/config")]
    for response in pages:
        for secret in (ACTIVITY_KEY, TRIGGER_TOKEN, PROVIDER_KEY):
            assert secret not in response.text, response.url


async def test_without_a_key_the_page_says_how_to_turn_it_on(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from salon.store.sql import SQLStore, sqlite_url
    from tests.web.conftest import serving, write_fleet

    root = write_fleet(tmp_path)
    (tmp_path / "data").mkdir()
    store = SQLStore(sqlite_url(tmp_path / "data" / "salon.db"))
    await store.open()
    environ = {k: v for k, v in ENVIRON.items() if k != "SALON_ACTIVITY_KEY"}
    try:
        async with (
            serving(root, store, environ) as (_, url),
            httpx2.AsyncClient(base_url=url) as client,
        ):
            response = await client.get("/activity")
    finally:
        await store.close()
    assert response.status_code == 503
    assert "SALON_ACTIVITY_KEY" in response.text


async def test_sign_in_pauses_after_many_wrong_keys(site: Site) -> None:
    page = await site.client.get("/activity")
    token = csrf_of(page.text)
    for _ in range(10):
        wrong = await site.client.post("/activity/login", data={"key": "guess", "csrf": token})
        assert wrong.status_code == 401
    paused = await site.client.post("/activity/login", data={"key": ACTIVITY_KEY, "csrf": token})
    assert paused.status_code == 429
    assert "try again in a minute" in paused.text
    assert "salon_session" not in site.client.cookies


async def test_an_id_that_is_no_id_is_a_clear_answer_not_a_crash(site: Site) -> None:
    await write_sample(site.store)
    await sign_in(site)
    for after in ("²", "9" * 5000, "-3"):
        rows = await site.client.get("/activity/rows", params={"after": after})
        assert rows.status_code == 422, after
        assert rows.text == "after must be the id of a timeline row"
        rows = await site.client.get("/activity/rows", params={"after": "0", "seen": after})
        assert rows.status_code == 422, after
        assert rows.text == "seen must be the id of a timeline row"
    for trace_id in ("9" * 30, "9" * 5000):
        response = await site.client.get(f"/activity/traces/{trace_id}")
        assert response.status_code == 404
        assert "No such trace." in response.text
    assert (await site.client.get("/activity/rows", params={"after": "0"})).status_code == 200


def _app(site: Site) -> Any:
    configs = load_config_dir(site.root)
    return build_app(
        store=site.store, configs=configs, settings=configs.bots["salon"].web, environ=ENVIRON
    )


async def _sign_in_from(app: Any, address: str, key: str, headers: dict[str, str]) -> int:
    """One sign-in from a browser at ``address``: the status of the POST."""
    transport = httpx2.ASGITransport(app=app, client=(address, 40000))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        page = await client.get("/activity", headers=headers)
        data = {"key": key, "csrf": csrf_of(page.text)}
        return (await client.post("/activity/login", data=data, headers=headers)).status_code


async def test_wrong_keys_pause_sign_in_for_their_client_only(site: Site) -> None:
    app = _app(site)
    for _ in range(10):
        assert await _sign_in_from(app, "203.0.113.7", "guess", {}) == 401
    assert await _sign_in_from(app, "203.0.113.7", ACTIVITY_KEY, {}) == 429
    assert await _sign_in_from(app, "198.51.100.2", ACTIVITY_KEY, {}) == 303


async def test_behind_a_proxy_on_this_machine_the_forwarded_client_counts(site: Site) -> None:
    app = _app(site)
    guesser = {"X-Forwarded-For": "10.9.9.9, 203.0.113.7"}  # the proxy's entry is the last
    for _ in range(10):
        assert await _sign_in_from(app, "127.0.0.1", "guess", guesser) == 401
    assert await _sign_in_from(app, "127.0.0.1", ACTIVITY_KEY, guesser) == 429
    spoofed = {"X-Forwarded-For": "203.0.113.7, 198.51.100.2"}
    assert await _sign_in_from(app, "127.0.0.1", ACTIVITY_KEY, spoofed) == 303
    assert await _sign_in_from(app, "127.0.0.1", ACTIVITY_KEY, {}) == 303
    # A forwarding header from a client elsewhere is its own word: the peer counts.
    for _ in range(10):
        assert await _sign_in_from(app, "192.0.2.1", "guess", {"X-Forwarded-For": "1.2.3.4"}) == 401
    assert (
        await _sign_in_from(app, "192.0.2.1", ACTIVITY_KEY, {"X-Forwarded-For": "5.6.7.8"}) == 429
    )


async def test_many_clients_guessing_pause_sign_in_for_everyone(site: Site) -> None:
    app = _app(site)
    for n in range(MAX_FAILED_LOGINS_OVERALL):
        assert await _sign_in_from(app, f"203.0.{n // 200}.{n % 200}", "guess", {}) == 401
    assert await _sign_in_from(app, "198.51.100.2", ACTIVITY_KEY, {}) == 429


def test_an_ipv6_client_is_its_network() -> None:
    """Anyone with one IPv6 address has a /64 of them: the /64 is one client."""
    lockout = Lockout(now=lambda: 1000.0)
    for n in range(10):
        lockout.failed(f"2001:db8:1:2::{n + 1}")
    assert lockout.paused("2001:db8:1:2:ffff::9")
    assert not lockout.paused("2001:db8:1:3::1")
