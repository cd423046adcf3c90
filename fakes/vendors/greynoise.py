"""GreyNoise's community (/v3/community/{ip}) and IP lookup (/v3/ip/{ip}) APIs on loopback.

As GreyNoise's OpenAPI describes them: the key in a ``key`` header; the community API
answers 200 for a known IP, 404 ``{ip, noise: false, riot: false, message}`` for an unknown
one, 400 for an address that is not routable IPv4, 429 with the plan's limit; the IP lookup
needs a key (401 ``{"message": "Unauthorized"}``) and answers with
``internet_scanner_intelligence`` and ``business_service_intelligence``.
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["GreyNoiseFake"]

SCANNER = "71.6.135.131"
GOOGLE_DNS = "8.8.8.8"


class GreyNoiseFake(VendorFake):
    def __init__(self, key: str = "gn-test-key") -> None:
        super().__init__()
        self.key = key
        self.route("GET", "/v3/community/{ip}", self._community)
        self.route("GET", "/v3/ip/{ip}", self._lookup)

    async def _community(self, request: web.Request) -> web.Response:
        ip = request.match_info["ip"]
        try:
            routable = ipaddress.ip_address(ip).version == 4 and ipaddress.ip_address(ip).is_global
        except ValueError:
            routable = False
        if not routable:
            return json_response({"message": "Request is not a valid routable IPv4 address"}, 400)
        if ip == SCANNER:
            return json_response(
                {
                    "ip": ip,
                    "noise": True,
                    "riot": False,
                    "classification": "malicious",
                    "name": "unknown",
                    "link": f"https://viz.greynoise.io/ip/{ip}",
                    "last_seen": "2026-11-20",
                    "message": "Success",
                }
            )
        if ip == GOOGLE_DNS:
            return json_response(
                {
                    "ip": ip,
                    "noise": False,
                    "riot": True,
                    "classification": "benign",
                    "name": "Google Public DNS",
                    "link": f"https://viz.greynoise.io/riot/{ip}",
                    "last_seen": "2026-11-22",
                    "message": "Success",
                }
            )
        return json_response(
            {
                "ip": ip,
                "noise": False,
                "riot": False,
                "message": "IP not observed scanning the internet or contained in RIOT data set.",
            },
            404,
        )

    async def _lookup(self, request: web.Request) -> web.Response:
        if request.headers.get("key") != self.key:
            return json_response({"message": "Unauthorized"}, 401)
        ip = request.match_info["ip"]
        found = ip == SCANNER
        return json_response(
            {
                "ip": ip,
                "business_service_intelligence": {"found": False, "trust_level": ""},
                "internet_scanner_intelligence": {
                    "ip": ip,
                    "seen": found,
                    "found": found,
                    "classification": "benign" if found else "",
                    "first_seen": "2018-01-28",
                    "last_seen": "2026-11-20",
                    "actor": "Shodan.io",
                    "spoofable": False,
                    "tags": [{"name": "Shodan.io", "intention": "benign"}],
                    "metadata": {
                        "organization": "Shodan",
                        "asn": "AS10439",
                        "source_country": "United States",
                    },
                }
                if found
                else {"found": False, "seen": False},
                "request_metadata": {"restricted_fields": []},
            }
        )
