"""Web search through SerpAPI: Google's results, with Google's AI overview when it has one.

SerpAPI takes its key as the ``api_key`` parameter (it is redacted from logs like every
secret). When Google lazy-loads the AI overview, the search answer carries only an
``ai_overview.page_token``, fetched at once with the ``google_ai_overview`` engine. The token
expires within minutes, but SerpAPI serves a repeated search from its cache for an hour,
stale token included: when the overview comes back empty, the search is made once more with
``no_cache=true`` for a fresh token (once only; then the results stand alone, saying so).
The overview keeps every kind of block (paragraphs, headings, list items with only a title,
tables, code, expandable sections). Results are trimmed to title, link and snippet.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import Field

from salon.config import SearchIntegration
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

__all__ = ["SerpApi", "build_search_server"]

SERVICE = "SerpAPI"
_OVERVIEW_CHARS = 2500
_SNIPPET_CHARS = 300
_CODE_BLOCKS = ("code_blocks", "code_block", "code")
_TABLE_ROWS = 20


class SerpApi:
    def __init__(self, http: VendorHttp, config: SearchIntegration, key: str) -> None:
        self.http = http
        self.url = (config.base_url or "https://serpapi.com").rstrip("/") + "/search.json"
        self.config = config
        self._key = key

    async def search(self, query: str, count: int) -> str:
        params = {
            "engine": "google",
            "q": query,
            "hl": self.config.language,
            "gl": self.config.country,
            "api_key": self._key,
        }
        data = await self.http.get_json(self.url, params=params)
        overview, missing = await self._full_overview(data)
        if missing:  # maybe SerpAPI's cache handed back an expired token: once, past it
            fresh = await self.http.get_json(self.url, params={**params, "no_cache": "true"})
            overview, missing = await self._full_overview(fresh)
            data = fresh if isinstance(fresh, dict) else data
        with expect_shape(SERVICE):
            text = _format(query, overview, data.get("organic_results") or [], count)
        if missing:
            head, _, rest = text.partition("\n")
            text = f"{head}\n(Google's AI overview for this search could not be fetched.)\n{rest}"
        return text.rstrip("\n")

    async def _full_overview(self, data: Any) -> tuple[dict[str, Any], bool]:
        """(the overview, whether Google announced one that could not be fetched)."""
        with expect_shape(SERVICE):
            overview = data.get("ai_overview") or {}
        token = overview.get("page_token")
        if not token or overview.get("text_blocks"):
            return overview, False
        fetched = await self._overview(str(token))
        return fetched, not fetched.get("text_blocks")

    async def _overview(self, token: str) -> dict[str, Any]:
        params = {"engine": "google_ai_overview", "page_token": token, "api_key": self._key}
        try:
            data = await self.http.get_json(self.url, params=params)
        except VendorError:
            return {}  # the results still stand without the overview
        overview = data.get("ai_overview") if isinstance(data, dict) else None
        return overview if isinstance(overview, dict) else {}


def _item_text(block: dict[str, Any]) -> str:
    """A block's words: its title (a list item may have only that), then its snippet."""
    title = str(block.get("title") or "").strip()
    snippet = str(block.get("snippet") or "").strip()
    if title and snippet:
        return f"{title} {snippet}" if title[-1] in ":.?!" else f"{title}: {snippet}"
    return title or snippet


def _table(block: dict[str, Any], indent: str) -> list[str]:
    rows = block.get("table")
    if not isinstance(rows, list):
        rows = []
    cells = [[str(c) for c in row] for row in rows if isinstance(row, list)]
    if not cells:  # only the formatted form: a list of {column: value}
        formatted = [r for r in block.get("formatted") or [] if isinstance(r, dict)]
        if formatted:
            cells = [list(formatted[0])] + [[str(v) for v in r.values()] for r in formatted]
    return [f"{indent}{' | '.join(row)}" for row in cells[:_TABLE_ROWS]]


def _code(block: dict[str, Any], indent: str) -> list[str]:
    code = str(block.get("code") or block.get("snippet") or "")
    if not code.strip():
        return []
    fence = f"{indent}```"
    body = [f"{indent}{line}" for line in code.splitlines()]
    return [f"{fence}{block.get('language') or ''}", *body, fence]


def _blocks(blocks: list[dict[str, Any]], depth: int = 0) -> list[str]:
    lines: list[str] = []
    indent = "  " * depth
    for block in blocks:
        kind = block.get("type")
        if kind == "table":
            lines.extend(_table(block, indent))
        elif kind in _CODE_BLOCKS:
            lines.extend(_code(block, indent))
        elif text := _item_text(block):
            prefix = "- " if (depth and kind != "paragraph") or kind == "list_item" else ""
            lines.append(f"{indent}{prefix}{text}")
        for item in block.get("list") or []:
            lines.extend(_blocks([item], depth + 1))
        if block.get("text_blocks"):
            lines.extend(_blocks(block["text_blocks"], depth + 1))
    return lines


def _format(query: str, overview: dict[str, Any], results: list[dict[str, Any]], count: int) -> str:
    lines = [f"Google results for {query!r} (SerpAPI):"]
    text = "\n".join(_blocks(overview.get("text_blocks") or []))
    if text:
        lines += ["AI overview:", text[:_OVERVIEW_CHARS]]
        sources = [r for r in overview.get("references") or [] if r.get("link")][:5]
        lines += [f"  source: {r.get('title', '')} <{r['link']}>" for r in sources]
    trimmed = [r for r in results if r.get("link")][:count]
    if trimmed:
        lines.append("Results:")
    for i, result in enumerate(trimmed, 1):
        snippet = str(result.get("snippet") or "")[:_SNIPPET_CHARS]
        lines.append(f"{i}. {result.get('title', '')} <{result['link']}>")
        if snippet:
            lines.append(f"   {snippet}")
    if not trimmed and not text:
        lines.append("Google returned no results for this query.")
    return "\n".join(lines)


def build_search_server(
    config: SearchIntegration, *, lookup: Lookup, root: Path, clock: Clock
) -> ToolSet:
    key = lookup(config.api_key_env)
    if not key:  # salon.config.integrations keeps such a config from being built
        raise ValueError(f"search needs its key in {config.api_key_env}")
    http = VendorHttp(SERVICE, timeout=config.timeout, key_hint=f"the key in {config.api_key_env}")
    serpapi = SerpApi(http, config, key)
    discipline = Discipline(SERVICE, config, clock)
    server = ToolSet(
        "search",
        instructions="Web search: Google results and Google's AI overview (SerpAPI).",
        resources=[http],
    )

    @server.tool(annotations=READ_ONLY, structured_output=False)
    async def web_search(
        query: Annotated[str, Field(min_length=1, max_length=400, description="what to search")],
        results: Annotated[
            int | None, Field(ge=1, le=10, description="how many results (default 5)")
        ] = None,
    ) -> Result:
        """Search the web with Google: the AI overview when there is one, then the results
        (title, link, snippet)."""
        count = results or config.results

        async def run() -> Result:
            text = await discipline.cached(
                "web_search",
                {"query": query, "results": count},
                lambda: serpapi.search(query.strip(), count),
            )
            return text_result(text)

        return await guarded(SERVICE, run)

    return server
