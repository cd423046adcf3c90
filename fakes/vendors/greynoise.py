"""GreyNoise's community (/v3/community/{ip}) and IP lookup (/v3/ip/{ip}) APIs on loopback.

As GreyNoise's OpenAPI and docs describe them: the key in a ``key`` header; the community
API answers 200 for a known IP, 404 ``{ip, noise: false, riot: false, message}`` for an
unknown one, 400 for an address that is not routable IPv4, 429 with the plan's limit; the
IP lookup "requires an active Subscription or Enterprise Trial": an unknown key is 401
``{"message": "Unauthorized"}``, a free (community) key is refused too (403 here; GreyNoise
does not document which of the two), and it answers with ``internet_scanner_intelligence``
and ``business_service_intelligence`` for an IP in either data set, 404 for one in neither
(the official client, pygreynoise, reads that 404 as an answer).
"""

from __future__ import annotations

import ipaddress

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["GreyNoiseFake"]

SCANNER = "71.6.135.131"
GOOGLE_DNS = "8.8.8.8"


class GreyNoiseFake(VendorFake):
    def __init__(self, key: str = "gn-test-key", community_key: str = "gn-free-key") -> None:
        super().__init__()
        self.key = key  # a paid key (or an enterprise trial)
        self.community_key = community_key  # a free account's key
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
        key = request.headers.get("key")
        if key == self.community_key:
            message = "This endpoint requires an active subscription or enterprise trial"
            return json_response({"message": message}, 403)
        if key != self.key:
            return json_response({"message": "Unauthorized"}, 401)
        ip = request.match_info["ip"]
        found = ip == SCANNER
        if not found and ip != GOOGLE_DNS:
            return json_response({"message": "Not Found"}, 404)
        business = {
            "found": True,
            "category": "public_dns",
            "name": "Google Public DNS",
            "trust_level": "1",
        }
        return json_response(
            {
                "ip": ip,
                "business_service_intelligence": business
                if ip == GOOGLE_DNS
                else {"found": False, "trust_level": ""},
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
