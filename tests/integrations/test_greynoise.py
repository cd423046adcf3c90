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
    config = GreyNoiseIntegration(
        base_url=greynoise.base_url, api_key_env="GN_KEY", api="enterprise"
    )
    server = build_greynoise_server(
        config, lookup=secrets_of({"GN_KEY": "expired"}), root=tmp_path, clock=clock
    )
    async with connect(server) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
    assert text_of(result) == (
        "GreyNoise refused the IP lookup (HTTP 401): Unauthorized; check the key in GN_KEY: "
        "the IP lookup needs a paid one or an enterprise trial (api: auto falls back to the "
        "free community API)"
    )


async def test_a_free_key_with_api_auto_falls_back_to_the_community_api_and_stays_there(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = GreyNoiseIntegration(base_url=greynoise.base_url, api_key_env="GN_KEY")
    lookup = secrets_of({"GN_KEY": "gn-free-key"})
    server = build_greynoise_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        scanner = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
        google = await client.call_tool("greynoise_ip_address", {"ip": GOOGLE_DNS})
    assert not scanner.is_error, text_of(scanner)
    assert text_of(scanner).startswith(f"GreyNoise on {SCANNER} (community API):")
    assert "- name: Google Public DNS" in text_of(google)
    assert [r.path for r in greynoise.requests] == [
        f"/v3/ip/{SCANNER}",
        f"/v3/community/{SCANNER}",
        f"/v3/community/{GOOGLE_DNS}",  # the key is known to be free from then on
    ]
    assert all(r.headers["key"] == "gn-free-key" for r in greynoise.requests)


async def test_a_free_key_with_api_enterprise_is_told_what_the_ip_lookup_needs(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = GreyNoiseIntegration(
        base_url=greynoise.base_url, api_key_env="GN_KEY", api="enterprise"
    )
    lookup = secrets_of({"GN_KEY": "gn-free-key"})
    server = build_greynoise_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        result = await client.call_tool("greynoise_ip_address", {"ip": SCANNER})
    assert result.is_error
    assert text_of(result) == (
        "GreyNoise refused the IP lookup (HTTP 403): This endpoint requires an active "
        "subscription or enterprise trial; check the key in GN_KEY: the IP lookup needs a "
        "paid one or an enterprise trial (api: auto falls back to the free community API)"
    )
    assert [r.path for r in greynoise.requests] == [f"/v3/ip/{SCANNER}"]


async def test_an_address_never_observed_is_an_answer_from_the_ip_lookup(
    greynoise: GreyNoiseFake, tmp_path: Path, clock: ManualClock
) -> None:
    config = GreyNoiseIntegration(base_url=greynoise.base_url, api_key_env="GN_KEY")
    lookup = secrets_of({"GN_KEY": "gn-test-key"})
    server = build_greynoise_server(config, lookup=lookup, root=tmp_path, clock=clock)
    async with connect(server) as client:
        unseen = await client.call_tool("greynoise_ip_address", {"ip": "203.0.114.9"})
        google = await client.call_tool("greynoise_ip_address", {"ip": GOOGLE_DNS})
    assert not unseen.is_error, text_of(unseen)
    assert text_of(unseen) == (
        "GreyNoise on 203.0.114.9 (IP lookup): not observed scanning the internet, and not a "
        "known business service"
    )
    assert text_of(google).splitlines() == [
        f"GreyNoise on {GOOGLE_DNS} (IP lookup):",
        "- internet scanner: not observed",
        "- business service: Google Public DNS (public_dns), trust level 1",
    ]
