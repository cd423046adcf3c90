"""GreyNoise IP lookups: community API by default, enterprise with a key."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp.server.mcpserver import MCPServer

from fakes.vendors.base import Reply
from fakes.vendors.greynoise import GOOGLE_DNS, SCANNER, GreyNoiseFake
from salon.config import GreyNoiseIntegration
from salon.integrations.greynoise import build_greynoise_server
from tests.integrations.conftest import ManualClock, connect, no_secrets, secrets_of, text_of


def _community(fake: GreyNoiseFake, tmp_path: Path, clock: ManualClock) -> MCPServer:
    config = GreyNoiseIntegration(base_url=fake.base_url)
    return build_greynoise_server(config, lookup=no_secrets, root=tmp_path, clock=clock)


async def test_a_known_scanner(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_community(greynoise, tmp_path, clock)) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": f" {SCANNER} "})
    assert text_of(result).splitlines() == [
        f"GreyNoise on {SCANNER} (community API):",
        "- classification: malicious",
        "- name: unknown",
        "- internet scanner (noise): yes",
        "- known business service (RIOT): no",
        "- last seen: 2026-11-20",
        f"- details: https://viz.greynoise.io/ip/{SCANNER}",
    ]
    (seen,) = greynoise.requests
    assert seen.path == f"/v3/community/{SCANNER}"
    assert "key" not in seen.headers


async def test_a_known_service_and_an_unseen_address(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    async with connect(_community(greynoise, tmp_path, clock)) as client:
        google = await client.call_tool("greynoise_ip_address", {"ip": GOOGLE_DNS})
        unseen = await client.call_tool("greynoise_ip_address", {"ip": "203.0.114.9"})
    assert "- name: Google Public DNS" in text_of(google)
    assert "- known business service (RIOT): yes" in text_of(google)
    assert not unseen.is_error  # a 404 from the community API is an answer
    assert text_of(unseen) == (
        "GreyNoise on 203.0.114.9: IP not observed scanning the internet or contained in RIOT "
        "data set. (not a known scanner or business service)"
    )


@pytest.mark.parametrize(
    ("ip", "reason"),
    [
        ("not-an-ip", "'not-an-ip' is not an IP address"),
        ("2001:4860:4860::8888", "2001:4860:4860::8888 is IPv6"),
        ("192.168.1.20", "192.168.1.20 is a private, reserved or special-purpose address"),
        ("127.0.0.1", "127.0.0.1 is a private"),
        ("100.64.0.1", "100.64.0.1 is a private"),
        ("198.51.100.7", "198.51.100.7 is a private"),
    ],
)
async def test_addresses_that_are_not_looked_up(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock, ip: str, reason: str
) -> None:
    async with connect(_community(greynoise, tmp_path, clock)) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": ip})
    assert result.is_error
    assert text_of(result).startswith(reason)
    assert greynoise.requests == []


async def test_the_daily_community_limit(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    limit = {
        "plan": "unauthenticated",
        "rate-limit": "100-lookups/day",
        "plan_url": "https://greynoise.io/pricing",
        "message": "You have hit your daily rate limit of 100 requests per day.",
    }
    greynoise.script("/v3/community/{ip}", Reply(status=429, json=limit))
    async with connect(_community(greynoise, tmp_path, clock)) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
    assert result.is_error
    assert text_of(result) == (
        "GreyNoise is rate-limiting requests (HTTP 429): You have hit your daily rate limit of "
        "100 requests per day.; try again later"
    )


async def test_the_enterprise_lookup_with_a_key(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = GreyNoiseIntegration(base_url=greynoise.base_url, api_key_env="GN_KEY")
    lookup = secrets_of({"GN_KEY": "gn-test-key"})
    server = build_greynoise_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
    assert text_of(result).splitlines() == [
        f"GreyNoise on {SCANNER} (IP lookup):",
        "- internet scanner: yes, classified benign",
        "- actor: Shodan.io",
        "- first seen: 2018-01-28",
        "- last seen: 2026-11-20",
        "- network: Shodan, AS10439, United States",
        "- tags: Shodan.io",
    ]
    (seen,) = greynoise.requests
    assert seen.path == f"/v3/ip/{SCANNER}"
    assert seen.headers["key"] == "gn-test-key"


async def test_a_refused_enterprise_key(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = GreyNoiseIntegration(base_url=greynoise.base_url, api_key_env="GN_KEY")
    server = build_greynoise_server(
        config, lookup=secrets_of({"GN_KEY": "expired"}), root=tmp_path, clock=clock
    )
    async with connect(server) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
    assert (
        text_of(result)
        == "GreyNoise refused the request (HTTP 401): Unauthorized; check the key in GN_KEY"
    )
