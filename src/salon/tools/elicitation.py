"""A server's question during a call (MCP elicitation), put to the person the call runs
for: the form the server sent as ``FormField``s, and the SDK's elicitation callback.

The SDK does not say which call a question belongs to, so it goes to the person whose
calls are in flight on that connection; when calls of several people (or of one person in
several channels) are, nobody can be told apart and the question is declined.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from typing import Any

import mcp_types
from mcp.client.session import ClientRequestContext

from salon.model import FormField, with_defaults
from salon.tools.link import CallContext

__all__ = ["Asking", "form"]

logger = logging.getLogger(__name__)

_KINDS = frozenset({"string", "number", "integer", "boolean"})


def _choices(schema: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """An enum's values and their titles: ``enum`` (with ``enumNames``, the older
    spelling), or ``oneOf``/``anyOf`` of ``const`` with ``title`` (SEP-1330)."""
    if isinstance(schema.get("enum"), list):
        values = tuple(str(v) for v in schema["enum"])
        names = schema.get("enumNames")
        if isinstance(names, list) and len(names) == len(values):
            return values, tuple(str(n) for n in names)
        return values, ()
    for key in ("oneOf", "anyOf"):
        options = schema.get(key)
        if isinstance(options, list) and all(isinstance(o, dict) and "const" in o for o in options):
            values = tuple(str(o["const"]) for o in options)
            return values, tuple(str(o.get("title") or o["const"]) for o in options)
    return None


def form(schema: dict[str, Any]) -> tuple[FormField, ...] | None:
    """The fields of a requested schema (flat properties of the four primitive types, or
    single-choice enums); None for a form Salon cannot show (nested, multi-choice)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return None
    required = set(schema.get("required") or ())
    fields = []
    for name, prop in properties.items():
        if not isinstance(prop, dict) or prop.get("type") not in _KINDS:
            return None
        choices = _choices(prop)
        default = prop.get("default")
        fields.append(
            FormField(
                name=str(name),
                kind=str(prop["type"]),
                title=str(prop.get("title") or ""),
                description=str(prop.get("description") or ""),
                options=choices[0] if choices else (),
                labels=choices[1] if choices else (),
                required=name in required,
                default=default if isinstance(default, str | int | float | bool) else None,
            )
        )
    return tuple(fields)


class Asking:
    """The calls in flight on one server's connection that may be asked a question."""

    def __init__(self, server: str) -> None:
        self._server = server
        self._calls: list[CallContext] = []

    @contextlib.contextmanager
    def during(self, context: CallContext) -> Iterator[None]:
        self._calls.append(context)
        try:
            yield
        finally:
            self._calls.remove(context)

    async def callback(
        self, context: ClientRequestContext, params: mcp_types.ElicitRequestParams
    ) -> mcp_types.ElicitResult:
        """The SDK's elicitation callback: the person's answer, or decline."""
        if isinstance(params, mcp_types.ElicitRequestURLParams):
            logger.info("MCP server %s asked to open a link: declined", self._server)
            return mcp_types.ElicitResult(action="decline")
        fields = form(params.requested_schema)
        if fields is None:
            logger.warning("MCP server %s sent a form Salon cannot show: declined", self._server)
            return mcp_types.ElicitResult(action="decline")
        asking = [c for c in self._calls if c.elicit is not None]
        if len({c.asker for c in asking}) != 1:
            logger.warning(
                "MCP server %s asked a question with %d people's calls in flight: declined",
                self._server,
                len({c.asker for c in asking}),
            )
            return mcp_types.ElicitResult(action="decline")
        elicit = asking[-1].elicit
        assert elicit is not None
        answer = await elicit(self._server, params.message, fields)
        if answer.action != "accept":
            return mcp_types.ElicitResult(action=answer.action)
        content = with_defaults(fields, answer.content)
        return mcp_types.ElicitResult(action="accept", content=dict(content))
