"""GreyNoise IP intelligence: is this address scanning the internet, and who is it?

The community API (``/v3/community/{ip}``) works without a key (a small daily quota) and
with a free one; the IP lookup (``/v3/ip/{ip}``) needs a paid key or an enterprise trial.
The key goes in GreyNoise's ``key`` header. With ``api: auto`` and a key, the IP lookup is
tried first; when it refuses the key (401/403: a free key), the community API answers
instead, and from then on. A 404 from either is an answer ("not observed"), not a failure,
as GreyNoise's own client reads it. Only public IPv4 addresses are looked up: anything else
is refused before a request, because GreyNoise would refuse it anyway and a private address
should not leave the building.
"""

from __future__ import annotations

import ipaddress
import logging
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from salon.config import GreyNoiseIntegration
from salon.integrations._discipline import Clock, Discipline
from salon.integrations._http import VendorError, VendorHttp
from salon.integrations._server import (
    READ_ONLY,
    Lookup,
    expect_shape,
    guarded,
    text_result,
)
from salon.tools.native import Result, ToolSet

__all__ = ["build_greynoise_server", "public_ipv4"]

logger = logging.getLogger(__name__)

SERVICE = "GreyNoise"


def public_ipv4(text: str) -> str:
    """The address in canonical form, or a VendorError saying why it is not looked up."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        raise VendorError(f"{text!r} is not an IP address (expected e.g. 8.8.8.8)") from None
    if address.version != 4:
        raise VendorError(f"{address} is IPv6; GreyNoise looks up IPv4 addresses only")
    if not address.is_global:
        raise VendorError(
            f"{address} is a private, reserved or special-purpose address; GreyNoise only "
            "knows public internet addresses, so it was not looked up"
        )
    return str(address)


class GreyNoise:
    def __init__(self, http: VendorHttp, config: GreyNoiseIntegration, has_key: bool) -> None:
        self.http = http
        self.base = (config.base_url or "https://api.greynoise.io").rstrip("/")
        self.enterprise = config.api == "enterprise" or (config.api == "auto" and has_key)
        self.falls_back = config.api == "auto"  # a free key moves it to the community API
        self.key_env = config.api_key_env

    async def lookup(self, ip: str) -> str:
        if self.enterprise:
            try:
                data = await self.http.get_json(f"{self.base}/v3/ip/{ip}", accept=(404,))
            except VendorError as exc:
                if exc.status not in (401, 403):
                    raise
                if not self.falls_back:
                    raise self._needs_paid(exc) from None
                logger.info(
                    "GreyNoise's IP lookup refused the key (HTTP %s); using the community API",
                    exc.status,
                )
                self.enterprise = False
            else:
                with expect_shape(SERVICE):
                    return _enterprise_text(ip, data)
        data = await self.http.get_json(f"{self.base}/v3/community/{ip}", accept=(404,))
        with expect_shape(SERVICE):
            return _community_text(ip, data)

    def _needs_paid(self, exc: VendorError) -> VendorError:
        said = f": {exc.detail}" if exc.detail else ""
        return VendorError(
            f"GreyNoise refused the IP lookup (HTTP {exc.status}){said}; check the key in "
            f"{self.key_env}: the IP lookup needs a paid one or an enterprise trial "
            "(api: auto falls back to the free community API)",
            status=exc.status,
        )


def _community_text(ip: str, data: dict[str, Any]) -> str:
    if not data.get("noise") and not data.get("riot") and not data.get("classification"):
        message = data.get("message") or "not observed scanning the internet"
        return f"GreyNoise on {ip}: {message} (not a known scanner or business service)"
    lines = [f"GreyNoise on {ip} (community API):"]
    lines.append(f"- classification: {data.get('classification') or 'unknown'}")
    if data.get("name"):
        lines.append(f"- name: {data['name']}")
    lines.append(f"- internet scanner (noise): {'yes' if data.get('noise') else 'no'}")
    lines.append(f"- known business service (RIOT): {'yes' if data.get('riot') else 'no'}")
    if data.get("last_seen"):
        lines.append(f"- last seen: {data['last_seen']}")
    if data.get("link"):
        lines.append(f"- details: {data['link']}")
    return "\n".join(lines)


def _enterprise_text(ip: str, data: dict[str, Any]) -> str:
    scanner = data.get("internet_scanner_intelligence") or {}
    business = data.get("business_service_intelligence") or {}
    if not (scanner.get("found") or scanner.get("seen") or business.get("found")):
        # the 404 of an address in neither data set, or an answer that found nothing
        return (
            f"GreyNoise on {ip} (IP lookup): not observed scanning the internet, and not a "
            "known business service"
        )
    lines = [f"GreyNoise on {ip} (IP lookup):"]
    if scanner.get("found") or scanner.get("seen"):
        lines.append(f"- internet scanner: yes, classified {scanner.get('classification')}")
        for key, label in (
            ("actor", "actor"),
            ("first_seen", "first seen"),
            ("last_seen", "last seen"),
        ):
            if scanner.get(key):
                lines.append(f"- {label}: {scanner[key]}")
        meta = scanner.get("metadata") or {}
        where = ", ".join(
            str(meta[k]) for k in ("organization", "asn", "source_country") if meta.get(k)
        )
        if where:
            lines.append(f"- network: {where}")
        tags = scanner.get("tags") or []
        names = [t.get("name") for t in (tags if isinstance(tags, list) else [tags])]
        if any(names):
            lines.append("- tags: " + ", ".join(str(n) for n in names if n))
    else:
        lines.append("- internet scanner: not observed")
    if business.get("found"):
        lines.append(
            f"- business service: {business.get('name')} ({business.get('category')}), "
            f"trust level {business.get('trust_level')}"
        )
    return "\n".join(lines)


def _client(config: GreyNoiseIntegration, lookup: Lookup) -> tuple[VendorHttp, bool]:
    key = lookup(config.api_key_env) if config.api_key_env else None
    headers = {"key": key} if key else {}
    hint = f"the key in {config.api_key_env}" if config.api_key_env else None
    return VendorHttp(SERVICE, timeout=config.timeout, headers=headers, key_hint=hint), bool(key)


def build_greynoise_server(
    config: GreyNoiseIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    http, has_key = _client(config, lookup)
    greynoise = GreyNoise(http, config, has_key)
    discipline = Discipline(SERVICE, config, clock)
    server = ToolSet(
        "greynoise",
        instructions="IP intelligence from GreyNoise: internet scanners and known services.",
        resources=[http],
    )

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def greynoise_ip_address(
        ip: Annotated[str, Field(min_length=2, max_length=64, description="an IPv4 address")],
    ) -> Result:
        """What GreyNoise knows about an IP address: internet scanner or known service,
        malicious or benign, and when it was last seen."""

        async def run() -> Result:
            address = public_ipv4(ip)
            text = await discipline.cached(
                "greynoise_ip_address", {"ip": address}, lambda: greynoise.lookup(address)
            )
            return text_result(text)

        return await guarded(SERVICE, run)

    return server
