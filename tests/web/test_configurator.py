"""The configurator: loopback only, CSRF on every POST, edits judged like `salon check`."""

from __future__ import annotations

import html
import re
import time
from pathlib import Path

import httpx2
import pytest

from salon.cli import main
from salon.config import load_config_dir
from salon.web.app import build_app
from salon.web.links import CONFIG_LINK_SECONDS, LINK, config_token, make_token, session_token
from tests.web.conftest import ACTIVITY_KEY, ENVIRON, Site


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found[1]


async def sign_in(site: Site) -> None:
    """With a link such as `salon config-link` prints."""
    response = await site.client.get("/config", params={"token": config_token(ACTIVITY_KEY)})
    assert response.status_code == 200


async def open_editor(site: Site, name: str = "bots/salon.yaml") -> str:
    page = await site.client.get("/config/edit", params={"file": name})
    assert page.status_code == 200
    return csrf_of(page.text)


async def test_the_overview_shows_each_key_with_the_file_it_came_from(site: Site) -> None:
    await sign_in(site)
    page = await site.client.get("/config")
    assert page.status_code == 200
    assert "bots/salon.yaml" in page.text
    row = re.search(
        r"<th>system_prompt</th><td class=\"set\"><pre>(.*?)</pre></td><td class=\"layer\">(.*?)<",
        page.text,
    )
    assert row is not None
    assert row[1] == "You are calm."
    assert row[2] == "bots/salon.yaml"
    assert re.search(r"<th>providers \*</th>.*?<td class=\"layer\">shared.yaml<", page.text, re.S)


async def test_a_valid_edit_is_written(site: Site) -> None:
    await sign_in(site)
    token = await open_editor(site)
    text = (site.root / "bots" / "salon.yaml").read_text().replace("calm", "cheerful")
    response = await site.client.post(
        "/config/edit", data={"file": "bots/salon.yaml", "text": text, "csrf": token}
    )
    assert response.status_code == 200
    assert "Saved." in response.text
    assert "ok: bot salon (Salon) via test, model test-model" in response.text
    assert "You are cheerful." in (site.root / "bots" / "salon.yaml").read_text()


@pytest.mark.parametrize(
    "broken",
    [
        "name: Salon\nmax_tokens: -5\n",
        "name: Salon\nsystem_prompt: [unclosed\n",
        "name: Salon\nno_such_key: 1\n",
        "name: Salon\nprovider: nowhere\n",
    ],
)
async def test_a_broken_edit_shows_the_check_lines_and_writes_nothing(
    site: Site, broken: str, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    await sign_in(site)
    before = (site.root / "bots" / "salon.yaml").read_text()
    token = await open_editor(site)
    response = await site.client.post(
        "/config/edit", data={"file": "bots/salon.yaml", "text": broken, "csrf": token}
    )
    assert response.status_code == 422
    assert (site.root / "bots" / "salon.yaml").read_text() == before
    # The same directory with the edit in it, checked by `salon check`:
    (site.root / "bots" / "salon.yaml").write_text(broken)
    try:
        with pytest.MonkeyPatch.context() as patch:
            for name, value in ENVIRON.items():
                patch.setenv(name, value)
            assert main(["check", str(site.root)]) == 2
    finally:
        (site.root / "bots" / "salon.yaml").write_text(before)
    expected = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert expected
    shown = re.findall(r"<li>(error: .*?)</li>", response.text)
    assert [html.unescape(x) for x in shown] == expected


async def test_a_post_without_the_csrf_token_is_refused(site: Site) -> None:
    await sign_in(site)
    await open_editor(site)
    before = (site.root / "bots" / "salon.yaml").read_text()
    for token in ("", "x" * 43):
        response = await site.client.post(
            "/config/edit", data={"file": "bots/salon.yaml", "text": "name: X\n", "csrf": token}
        )
        assert response.status_code == 403
    assert (site.root / "bots" / "salon.yaml").read_text() == before


async def test_a_post_from_another_origin_is_refused(site: Site) -> None:
    await sign_in(site)
    token = await open_editor(site)
    response = await site.client.post(
        "/config/edit",
        data={"file": "bots/salon.yaml", "text": "name: X\n", "csrf": token},
        headers={"Origin": "http://evil.example"},
    )
    assert response.status_code == 403


@pytest.mark.parametrize(
    "headers",
    [
        {"X-Forwarded-For": "203.0.113.9"},
        {"Forwarded": "for=203.0.113.9"},
        {"X-Real-IP": "203.0.113.9"},
        {"Host": "salon.example.com"},
        {"Host": "evil.example:8787"},
    ],
)
async def test_a_forwarded_or_foreign_host_request_is_refused(
    site: Site, headers: dict[str, str]
) -> None:
    await sign_in(site)
    for path in ("/config", "/config/edit?file=bots/salon.yaml"):
        response = await site.client.get(path, headers=headers)
        assert response.status_code == 403, path
        assert "salon.yaml" not in response.text


async def test_a_client_not_on_loopback_is_refused(site: Site) -> None:
    app = build_app(
        store=site.store,
        configs=load_config_dir(site.root),
        settings=load_config_dir(site.root).bots["salon"].web,
        environ=ENVIRON,
    )
    begun = await app.state.web.sessions.begin(600)
    session = {"salon_session": session_token(ACTIVITY_KEY, begun, 600)}  # signed in, even
    transport = httpx2.ASGITransport(app=app, client=("203.0.113.7", 40000))
    async with httpx2.AsyncClient(
        transport=transport, base_url="http://127.0.0.1", cookies=session
    ) as client:
        response = await client.get("/config")
        assert response.status_code == 403
        assert "loopback" in response.text
        local = httpx2.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with httpx2.AsyncClient(
        transport=local, base_url="http://127.0.0.1", cookies=session
    ) as client:
        assert (await client.get("/config")).status_code == 200


async def test_only_the_directory_s_config_files_can_be_opened(site: Site) -> None:
    await sign_in(site)
    for name in ("../secrets.yaml", "/etc/passwd", "data/salon.db", "bots/other.yaml"):
        response = await site.client.get("/config/edit", params={"file": name})
        assert response.status_code == 404


async def test_the_overview_shows_an_edit_a_running_bot_could_not_apply(site: Site) -> None:
    await sign_in(site)
    from dataclasses import replace

    from tests.web.test_health_metrics_events import beat

    reason = "config/bots/salon.yaml:2: system_prompt: unclosed flow sequence"
    await site.store.health.beat(replace(beat(), reload_error=reason))
    page = await site.client.get("/config")
    assert f"The running bot says: {reason}" in page.text


async def test_a_public_url_that_is_no_url_is_refused_like_salon_check_does(site: Site) -> None:
    await sign_in(site)
    token = await open_editor(site, "shared.yaml")
    text = (
        (site.root / "shared.yaml").read_text().replace('"http://127.0.0.1:8787"', "salon.example")
    )
    response = await site.client.post(
        "/config/edit", data={"file": "shared.yaml", "text": text, "csrf": token}
    )
    assert response.status_code == 422
    assert (
        "web.public_url: not an http(s) URL with a host: write http://salon.example"
        in html.unescape(response.text)
    )


def config_link(site: Site, capsys: pytest.CaptureFixture[str]) -> str:
    """What `salon config-link DIR --port P` prints, run where the server's key is set."""
    port = httpx2.URL(site.url).port
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ENVIRON.items():
            patch.setenv(name, value)
        capsys.readouterr()
        assert main(["config-link", str(site.root), "--port", str(port)]) == 0
    out, err = capsys.readouterr()
    (link,) = out.splitlines()
    assert link.startswith(f"http://127.0.0.1:{port}/config?token=")
    assert "once" in err
    assert "5 minutes" in err
    return link


async def test_the_configurator_wants_a_session_even_from_this_machine(site: Site) -> None:
    """Any local user reaches loopback: being local is no credential."""
    before = (site.root / "bots" / "salon.yaml").read_text()
    for path in ("/config", "/config/edit?file=bots/salon.yaml"):
        response = await site.client.get(path)
        assert response.status_code == 401, path
        assert "You are calm." not in response.text
        assert "salon config-link" in response.text
    page = await site.client.get("/activity")  # a CSRF cookie and token, but no session
    token = csrf_of(page.text)
    response = await site.client.post(
        "/config/edit", data={"file": "bots/salon.yaml", "text": "name: X\n", "csrf": token}
    )
    assert response.status_code == 401
    assert (site.root / "bots" / "salon.yaml").read_text() == before


async def test_the_cli_s_link_signs_in_once(site: Site, capsys: pytest.CaptureFixture[str]) -> None:
    link = config_link(site, capsys)
    response = await site.client.get(link)
    assert response.status_code == 200
    assert response.headers["referrer-policy"] == "no-referrer"
    assert 'content="0; url=/config"' in response.text
    assert "samesite=strict" in response.headers["set-cookie"].lower()
    assert (await site.client.get("/config")).status_code == 200
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
        again = await other.get(link)
        assert again.status_code == 401
        assert "already used" in again.text
        assert "salon_session" not in other.cookies
        assert (await other.get("/config")).status_code == 401


async def test_an_expired_or_forged_config_link_is_refused(site: Site) -> None:
    made = time.time() - CONFIG_LINK_SECONDS - 1
    expired = config_token(ACTIVITY_KEY, now=made)
    forged = config_token("another key")
    activity = make_token(ACTIVITY_KEY, LINK, 600)  # an /activity link is not one
    # Made before this server started: an earlier server may have taken it already.
    early = config_token(ACTIVITY_KEY, now=time.time() - 60)
    cases = [
        (expired, "this link has expired"),
        (forged, "this link is not valid"),
        (activity, "this link is not valid"),
        (early, "made before the web server started"),
        ("1.2.3", "this link is not valid"),
        ("nonsense", "this link is not valid"),
    ]
    for token, reason in cases:
        response = await site.client.get("/config", params={"token": token})
        assert response.status_code == 401, token
        assert reason in response.text.lower(), token
        assert "salon_session" not in site.client.cookies


def test_the_link_command_says_when_the_key_is_not_set(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.web.conftest import write_fleet

    root = write_fleet(tmp_path)
    monkeypatch.delenv("SALON_ACTIVITY_KEY", raising=False)
    assert main(["config-link", str(root)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("error: SALON_ACTIVITY_KEY is not set")


async def test_a_file_linking_outside_the_directory_is_not_editable(
    site: Site, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "elsewhere.yaml"
    outside.write_text("name: Elsewhere\nsystem_prompt: private-0ut5ide\n")
    (site.root / "bots" / "elsewhere.yaml").symlink_to(outside)
    await site.client.get(config_link(site, capsys))
    overview = await site.client.get("/config")
    assert 'href="/config/edit?file=bots/elsewhere.yaml"' not in overview.text
    assert "bots/elsewhere.yaml links outside the config directory" in overview.text
    assert "private-0ut5ide" not in overview.text
    response = await site.client.get("/config/edit", params={"file": "bots/elsewhere.yaml"})
    assert response.status_code == 404
    assert "private-0ut5ide" not in response.text
    token = await open_editor(site)
    response = await site.client.post(
        "/config/edit",
        data={"file": "bots/elsewhere.yaml", "text": "name: Mine\n", "csrf": token},
    )
    assert response.status_code == 404
    assert "private-0ut5ide" in outside.read_text()
    assert (site.root / "bots" / "elsewhere.yaml").is_symlink()


async def test_the_key_signs_in_from_the_configurator_s_form_and_goes_back_there(
    site: Site,
) -> None:
    page = await site.client.get("/config")
    assert page.status_code == 401
    assert 'name="next" value="/config"' in page.text
    form = {"key": ACTIVITY_KEY, "csrf": csrf_of(page.text)}
    elsewhere = await site.client.post("/activity/login", data={**form, "next": "//evil.example"})
    assert elsewhere.headers["location"] == "/activity"  # only this site's own pages
    response = await site.client.post("/activity/login", data={**form, "next": "/config"})
    assert response.status_code == 303
    assert response.headers["location"] == "/config"
    assert (await site.client.get("/config")).status_code == 200


async def test_without_the_activity_key_the_configurator_says_what_to_set(
    tmp_path: Path,
) -> None:
    from salon.store.sql import SQLStore, sqlite_url
    from tests.web.conftest import serving, write_fleet

    root = write_fleet(tmp_path)
    store = SQLStore(sqlite_url(tmp_path / "salon.db"))
    await store.open()
    environ = {k: v for k, v in ENVIRON.items() if k != "SALON_ACTIVITY_KEY"}
    try:
        async with (
            serving(root, store, environ) as (_, url),
            httpx2.AsyncClient(base_url=url, timeout=10) as client,
        ):
            response = await client.get("/config")
    finally:
        await store.close()
    assert response.status_code == 503
    assert "SALON_ACTIVITY_KEY" in response.text
    assert "You are calm." not in response.text
