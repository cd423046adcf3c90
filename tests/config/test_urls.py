"""HTTP endpoints in the config are read as the WHATWG URL standard reads them (pydantic's
URL type), so a URL the check passes is one the HTTP clients can use, and the text stays
as written."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from salon.config import McpServerConfig, ProviderConfig
from salon.config.models import http_url_problem

PROBLEM = "not an http(s) URL with a host"


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://exa mple.com/v1", "invalid international domain name"),
        ("http://999.1.1.1:8080/v1", "invalid IPv4 address"),
        ("http://[::1:8080/v1", "invalid IPv6 address"),
        ("http://127.0.0.1:99999/v1", "invalid port number"),
    ],
)
def test_a_url_no_client_could_use_is_refused_with_the_reason(url: str, why: str) -> None:
    assert http_url_problem(url) == f"{PROBLEM} ({why})"
    with pytest.raises(ValidationError, match=re.escape(f"{PROBLEM} ({why})")):
        ProviderConfig(type="openai", model="m", base_url=url)


@pytest.mark.parametrize("url", ["http:/127.0.0.1/v1", "http:127.0.0.1/v1", "http://", "ftp://h/"])
def test_the_scheme_and_host_must_be_written_out(url: str) -> None:
    assert http_url_problem(url) == PROBLEM


def test_a_missing_scheme_gets_the_hint() -> None:
    assert http_url_problem("localhost:11434/v1") == f"{PROBLEM}: write http://localhost:11434/v1"


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",
        "https://api.example.com",
        "http://[::1]:8080/mcp",
        "https://bücher.example/v1",
        "HTTPS://API.EXAMPLE.COM/v1",
        "http://my_proxy:3128",
    ],
)
def test_usable_urls_pass_and_stay_as_written(url: str) -> None:
    assert http_url_problem(url) is None
    assert McpServerConfig(url=url).url == url
