"""SerpAPI's search endpoint (/search.json) on loopback: Google results and AI overviews.

As SerpAPI documents it: ``api_key`` as a parameter (401 ``{"error": "Invalid API key..."}``
otherwise); ``organic_results`` with ``position``, ``title``, ``link``, ``snippet``; an
``ai_overview`` with ``text_blocks`` (paragraph, heading, list whose items may have only a
``title``, expandable, table, code) and ``references``, or only a ``page_token`` to fetch
with ``engine=google_ai_overview``; an empty search is still HTTP 200, with an ``error``
saying Google returned nothing. A search with the same parameters is served from SerpAPI's
cache for an hour (``no_cache=true`` skips it), page_token and all, while the token itself
expires within minutes (``expire_tokens``): the overview of an expired token is "Fully
empty", an HTTP 200 with Google's "no results" error (SerpAPI public-roadmap #2569, #4289).
"""

from __future__ import annotations

import itertools
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


RICH_OVERVIEW = {  # the kinds of text block a plain paragraph-and-list overview leaves out
    "text_blocks": [
        {"type": "heading", "snippet": "Loops in Python"},
        {
            "type": "list",
            "list": [
                {"title": "for loops"},
                {"title": "while loops:", "snippet": "repeat while a condition holds."},
            ],
        },
        {
            "type": "table",
            "table": [["Loop", "Use"], ["for", "a known sequence"], ["while", "a condition"]],
        },
        {"type": "code_blocks", "language": "python", "code": "for i in range(3):\n    print(i)"},
        {
            "type": "expandable",
            "title": "Tips",
            "text_blocks": [{"type": "paragraph", "snippet": "Prefer for over while."}],
        },
    ],
    "references": [],
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
        self.rich_queries: set[str] = set()  # answered with RICH_OVERVIEW
        self.tokens: dict[str, dict[str, Any]] = {}  # live page_tokens and their overview
        self._cache: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}
        self._ids = itertools.count(1)
        self._token_ids = itertools.count(1)
        self.route("GET", "/search.json", self._search)

    def expire_tokens(self) -> None:
        """Minutes pass: every page_token given so far expires (cached searches keep them)."""
        self.tokens.clear()

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
        metadata = {"id": f"6540ac26b68f8b29100{next(self._ids):05d}", "status": "Success"}
        if q.get("engine") == "google_ai_overview":
            overview = self.tokens.get(q.get("page_token", ""))
            if overview is None:  # expired (or never given): Google shows nothing
                return json_response(
                    {
                        "search_metadata": metadata,
                        "search_information": {"ai_overview_state": "Fully empty"},
                        "error": "Google hasn't returned any results for this query.",
                    }
                )
            return json_response({"search_metadata": metadata, "ai_overview": overview})
        query = q.get("q")
        if not query:
            return json_response({"error": "Missing query `q` parameter."}, 400)
        key = tuple(sorted((k, v) for k, v in q.items() if k not in ("no_cache", "api_key")))
        if q.get("no_cache") != "true" and key in self._cache:
            return json_response(self._cache[key])
        answer = self._answer(query, metadata)
        self._cache[key] = answer
        return json_response(answer)

    def _answer(self, query: str, metadata: dict[str, Any]) -> dict[str, Any]:
        if query in self.empty_queries:
            return {
                "search_metadata": metadata,
                "search_information": {"organic_results_state": "Fully empty"},
                "error": "Google hasn't returned any results for this query.",
            }
        overview: dict[str, Any] = RICH_OVERVIEW if query in self.rich_queries else OVERVIEW
        if query in self.lazy_queries:
            token = f"token-{next(self._token_ids)}"
            self.tokens[token] = overview
            overview = {"page_token": token}
        return {
            "search_metadata": metadata,
            "search_parameters": {"engine": "google", "q": query},
            "ai_overview": overview,
            "organic_results": _organic(query),
        }
