"""The configurator: loopback only, CSRF on every POST, edits judged like `salon check`."""

from __future__ import annotations

import html
import re
from pathlib import Path

import httpx2
import pytest

from salon.cli import main
from salon.config import load_config_dir
from salon.web.app import build_app
from tests.web.conftest import ENVIRON, Site


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found
    return found[1]


async def open_editor(site: Site, name: str = "bots/salon.yaml") -> str:
    page = await site.client.get("/config/edit", params={"file": name})
    assert page.status_code == 200
    return csrf_of(page.text)


async def test_the_overview_shows_each_key_with_the_file_it_came_from(site: Site) -> None:
    page = await site.client.get("/config")
    assert page.status_code == 200
    assert "bots/salon.yaml" in page.text
    row = re.search(
        r"<th>system_prompt</th><td><pre>(.*?)</pre></td><td class=\"layer\">(.*?)<", page.text
    )
    assert row is not None
    assert row[1] == "You are calm."
    assert row[2] == "bots/salon.yaml"
    assert re.search(r"<th>providers \*</th>.*?<td class=\"layer\">shared.yaml<", page.text, re.S)


async def test_a_valid_edit_is_written(site: Site) -> None:
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
    await open_editor(site)
    before = (site.root / "bots" / "salon.yaml").read_text()
    for token in ("", "x" * 43):
        response = await site.client.post(
            "/config/edit", data={"file": "bots/salon.yaml", "text": "name: X\n", "csrf": token}
        )
        assert response.status_code == 403
    assert (site.root / "bots" / "salon.yaml").read_text() == before


async def test_a_post_from_another_origin_is_refused(site: Site) -> None:
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
    transport = httpx2.ASGITransport(app=app, client=("203.0.113.7", 40000))
    async with httpx2.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        response = await client.get("/config")
        assert response.status_code == 403
        assert "loopback" in response.text
        local = httpx2.ASGITransport(app=app, client=("127.0.0.1", 40000))
    async with httpx2.AsyncClient(transport=local, base_url="http://127.0.0.1") as client:
        assert (await client.get("/config")).status_code == 200


async def test_only_the_directory_s_config_files_can_be_opened(site: Site) -> None:
    for name in ("../secrets.yaml", "/etc/passwd", "data/salon.db", "bots/other.yaml"):
        response = await site.client.get("/config/edit", params={"file": name})
        assert response.status_code == 404


async def test_the_overview_shows_an_edit_a_running_bot_could_not_apply(site: Site) -> None:
    from dataclasses import replace

    from tests.web.test_health_metrics_events import beat

    reason = "config/bots/salon.yaml:2: system_prompt: unclosed flow sequence"
    await site.store.beat(replace(beat(), reload_error=reason))
    page = await site.client.get("/config")
    assert f"The running bot says: {reason}" in page.text


async def test_a_public_url_that_is_no_url_is_refused_like_salon_check_does(site: Site) -> None:
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
