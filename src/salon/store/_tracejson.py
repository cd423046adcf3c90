"""The JSON text of a trace's body, with each request message encoded once.

A channel's requests repeat the messages of the previous one (the same turn objects: the
providers convert each turn once, ``salon.llm._convert``), so encoding and redacting the
whole request at every activation would redo the same work hundreds of times. The text
this gives is exactly ``redact(json.dumps(body, ensure_ascii=False, default=str))``: a list
is its items' encodings joined by ``", "`` between brackets, and a secret cannot span two
items of a list.
"""

from __future__ import annotations

import json
import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["TraceEncoder"]

_REMEMBERED = 20_000  # encoded messages kept, over all channels
_SHORT = 8  # lists shorter than this are encoded with the rest
_LIST_KEYS = ("messages", "contents")  # OpenAI and Anthropic; Google


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


class TraceEncoder:
    def __init__(self, redact: Callable[[str], str] | None, limit: int = _REMEMBERED) -> None:
        self._redact = redact
        self._limit = limit
        # id -> (the message, its text): holding the message keeps its id from being reused
        self._done: OrderedDict[int, tuple[object, str]] = OrderedDict()
        self._nonce = secrets.token_hex(8)

    def encode(self, body: dict[str, Any]) -> str:
        """The redacted JSON text of ``body`` (a trace's ``body()``; not changed)."""
        lists: list[tuple[str, list[Any]]] = []
        calls = body.get("calls")
        if isinstance(calls, list):
            body = {**body, "calls": [self._set_aside(call, lists) for call in calls]}
        text = self._clean(_dumps(body))
        for token, items in lists:
            spliced = "[" + ", ".join(self._item(item) for item in items) + "]"
            text = text.replace(_dumps(token), spliced, 1)
        return text

    def _set_aside(self, call: Any, lists: list[tuple[str, list[Any]]]) -> Any:
        """``call`` with its request's long message list replaced by a token."""
        request = call.get("request") if isinstance(call, dict) else None
        if not isinstance(request, dict):
            return call
        for key in _LIST_KEYS:
            items = request.get(key)
            if isinstance(items, list) and len(items) >= _SHORT:
                token = f"\x00{self._nonce}-{len(lists)}\x00"
                lists.append((token, items))
                return {**call, "request": {**request, key: token}}
        return call

    def _item(self, item: Any) -> str:
        key = id(item)
        found = self._done.get(key)
        if found is not None and found[0] is item:
            self._done.move_to_end(key)
            return found[1]
        text = self._clean(_dumps(item))
        self._done[key] = (item, text)
        if len(self._done) > self._limit:
            self._done.popitem(last=False)
        return text

    def _clean(self, text: str) -> str:
        return self._redact(text) if self._redact is not None else text
