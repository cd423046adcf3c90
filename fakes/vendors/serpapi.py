"""SerpAPI's search endpoint (/search.json) on loopback: Google results and AI overviews.

As SerpAPI documents it: ``api_key`` as a parameter (401 ``{"error": "Invalid API key..."}``
otherwise); ``organic_results`` with ``position``, ``title``, ``link``, ``snippet``; an
``ai_overview`` with ``text_blocks`` (paragraph / list) and ``references``, or only a
``page_token`` to fetch with ``engine=google_ai_overview``; an empty search is still HTTP
200, with an ``error`` saying Google returned nothing.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from fakes.vendors.base import VendorFake, json_response

__all__ = ["SerpApiFake"]

OVERVIEW = {
    "text_blocks": [
        {
            "type": "paragraph",
            "snippet": "Pixel art is a form of digital art drawn pixel by pixel.",
            "reference_indexes": [0],
        },
        {
            "type": "list",
            "list": [
                {"snippet": "Sprites are small images used in games.", "reference_indexes": [1]},
                {"snippet": "Palettes are often limited.", "reference_indexes": [0]},
            ],
        },
    ],
    "references": [
        {
            "title": "Pixel art - Wikipedia",
            "link": "https://en.wikipedia.org/wiki/Pixel_art",
            "snippet": "Pixel art is...",
            "source": "Wikipedia",
            "index": 0,
        },
        {
            "title": "Sprites explained",
            "link": "https://example.org/sprites",
            "source": "Example",
            "index": 1,
        },
    ],
}


def _organic(query: str, count: int = 8) -> list[dict[str, Any]]:
    return [
        {
            "position": i,
            "title": f"{query} result {i}",
            "link": f"https://example.org/{i}",
            "displayed_link": f"example.org › {i}",
            "snippet": f"About {query}, part {i}.",
            "source": "Example",
        }
        for i in range(1, count + 1)
    ]


class SerpApiFake(VendorFake):
    def __init__(self, key: str = "serp-test-key") -> None:
        super().__init__()
        self.key = key
        self.lazy_queries: set[str] = set()  # answered with a page_token only
        self.empty_queries: set[str] = set()
        self.route("GET", "/search.json", self._search)

    async def _search(self, request: web.Request) -> web.Response:
        q = request.query
        if q.get("api_key") != self.key:
            return json_response(
                {
                    "error": "Invalid API key. Your API key should be here: "
                    "https://serpapi.com/manage-api-key"
                },
                401,
            )
        metadata = {"id": "6540ac26b68f8b2910019dd5", "status": "Success"}
        if q.get("engine") == "google_ai_overview":
            if q.get("page_token") != "token-1":
                return json_response({"error": "Invalid page_token."}, 400)
            return json_response({"search_metadata": metadata, "ai_overview": OVERVIEW})
        query = q.get("q")
        if not query:
            return json_response({"error": "Missing query `q` parameter."}, 400)
        if query in self.empty_queries:
            return json_response(
                {
                    "search_metadata": metadata,
                    "search_information": {"organic_results_state": "Fully empty"},
                    "error": "Google hasn't returned any results for this query.",
                }
            )
        overview = {"page_token": "token-1"} if query in self.lazy_queries else OVERVIEW
        return json_response(
            {
                "search_metadata": metadata,
                "search_parameters": {"engine": "google", "q": query},
                "ai_overview": overview,
                "organic_results": _organic(query),
            }
        )
