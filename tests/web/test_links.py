"""Signed links and sessions as the server takes them: links signed the way Salon always
signed them (HMAC-SHA256 under a key derived per purpose, ``<value>.<signature>``) sign
in, and nothing but the exact token does; a session cookie must also name a session the
store keeps."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time

import httpx2

from tests.web.conftest import ACTIVITY_KEY, Site


def signed(purpose: bytes, value: str, key: str = ACTIVITY_KEY) -> str:
    """A token as the links were signed before itsdangerous signed them, written out."""
    derived = hmac.new(key.encode(), purpose, hashlib.sha256).digest()
    mac = hmac.new(derived, value.encode(), hashlib.sha256).digest()
    return f"{value}.{base64.urlsafe_b64encode(mac).rstrip(b'=').decode()}"


def in_ten_minutes() -> str:
    return str(int(time.time()) + 600)


async def test_a_link_signed_before_still_signs_in_but_a_session_must_be_kept(
    site: Site,
) -> None:
    link = signed(b"salon activity link", in_ten_minutes())
    response = await site.client.get("/activity", params={"token": link})
    assert response.status_code == 200
    assert "salon_session" in site.client.cookies

    # A session signed before sessions could end names none the store keeps: sign in again.
    session = signed(b"salon activity session", in_ten_minutes())
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
        other.cookies.set("salon_session", session)
        assert (await other.get("/activity")).status_code == 401


async def test_a_config_link_signed_before_still_signs_in_once(site: Site) -> None:
    link = signed(b"salon configurator link", f"{in_ten_minutes()}.n0nce-from-before")
    assert (await site.client.get("/config", params={"token": link})).status_code == 200
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
        again = await other.get("/config", params={"token": link})
        assert again.status_code == 401
        assert "already used" in again.text


async def test_only_the_exact_token_signs_in(site: Site) -> None:
    link = signed(b"salon activity link", in_ten_minutes())
    session = signed(b"salon activity session", in_ten_minutes())
    config = signed(b"salon configurator link", f"{in_ten_minutes()}.another-nonce")
    # Base64 decoders skip what is not base64: none of this may reach one.
    variants = [link + "!", link + "=", link + "%", link + "\u00e9", link + " ", link + "." + "A"]
    for token in variants:
        response = await site.client.get("/activity", params={"token": token})
        assert response.status_code == 401, token
        assert "salon_session" not in site.client.cookies
    for token in (config + "!", config + "=", config + "\u00e9"):
        response = await site.client.get("/config", params={"token": token})
        assert response.status_code == 401, token
        assert "this link is not valid" in response.text.lower(), token
    for cookie in (session + "!", session + "="):
        async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
            other.cookies.set("salon_session", cookie)
            assert (await other.get("/activity")).status_code == 401, cookie


async def test_a_token_for_one_purpose_opens_nothing_else(site: Site) -> None:
    session = signed(b"salon activity session", in_ten_minutes())
    assert (await site.client.get("/activity", params={"token": session})).status_code == 401
    link = signed(b"salon activity link", in_ten_minutes())
    async with httpx2.AsyncClient(base_url=site.url, timeout=10) as other:
        other.cookies.set("salon_session", link)
        assert (await other.get("/activity")).status_code == 401
