"""Salon-native tool sets: tools the hub calls in-process, with no MCP layer between.

A ``ToolSet`` holds typed async (or plain) functions. Each tool's arguments model is built
from its signature with pydantic the way MCP's Python SDK builds it, so the JSON input
schema is the one an MCP client sees when ``salon tools serve`` wraps the set into an MCP
server (``salon.tools.mcp_serve``). Annotations carry MCP's hints; a tool returns text, a
``Result`` (text and images, or an error the model reads), or JSON-able data; a
``salon.errors.ToolError`` it raises becomes an error result. A parameter annotated
``Progress`` receives the hub's progress callback, one annotated ``Caller`` who the call
runs for and where (``salon.tools.caller``); neither is part of the schema. Served over
MCP, where a call carries nothing but arguments, the caller is read from the arguments the
tool names in ``caller_arguments`` (part of its schema; the hub hides them from the model).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
import typing
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from salon.errors import ToolError
from salon.tools.base import Progress
from salon.tools.caller import CALLER_ARGUMENTS, Caller

__all__ = [
    "Annotations",
    "Image",
    "InvalidArguments",
    "NativeTool",
    "Result",
    "ToolSet",
]

logger = logging.getLogger(__name__)

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, slots=True)
class Annotations:
    """MCP's tool annotations (hints): what a call may do to the world."""

    read_only: bool | None = None
    destructive: bool | None = None
    idempotent: bool | None = None
    open_world: bool | None = None


@dataclass(frozen=True, slots=True)
class Image:
    """An image a tool made: bytes, never base64, until a wire needs it."""

    data: bytes
    mime_type: str
    name: str | None = None  # what it is (a direction, a file name), for the channel
    url: str | None = None  # where its vendor publishes it, when it does


@dataclass(frozen=True, slots=True)
class Result:
    """What a call produced: text and images in order, and whether it failed."""

    content: tuple[str | Image, ...] = ()
    is_error: bool = False
    structured: Any = None  # the JSON value when the tool returned data, not content

    @classmethod
    def text(cls, text: str) -> Result:
        return cls((text,))

    @classmethod
    def error(cls, text: str) -> Result:
        return cls((text,), is_error=True)


class InvalidArguments(Exception):
    """The arguments do not fit the tool's schema; the text says where."""


class _Arguments(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)


def _arguments_model(
    fn: Callable[..., Any], skip: set[str], served: tuple[str, ...]
) -> type[BaseModel]:
    """The model MCP's SDK would build for ``fn`` served with the caller arguments
    ``served`` after its own (same fields, title and schema)."""
    signature = inspect.signature(fn, eval_str=True)
    fields: dict[str, Any] = {}
    for param in signature.parameters.values():
        if param.name in skip:
            continue
        annotation = Any if param.annotation is inspect.Parameter.empty else param.annotation
        typed = Annotated[annotation, Field()]  # type: ignore[valid-type]
        has_default = param.default is not inspect.Parameter.empty
        fields[param.name] = (typed, param.default) if has_default else typed
    for name in served:
        kind, default = CALLER_ARGUMENTS[name]
        fields[name] = (Annotated[kind, Field()], default)
    return create_model(f"{fn.__name__}Arguments", __base__=_Arguments, **fields)


def _parameter(fn: Callable[..., Any], kind: type) -> str | None:
    """The name of ``fn``'s parameter annotated ``kind``, if it has one."""
    hints = typing.get_type_hints(fn)
    return next((name for name, hint in hints.items() if hint is kind), None)


def _checked_served(fn: Callable[..., Any], caller: str | None, served: tuple[str, ...]) -> None:
    """Caller arguments only for a tool that takes the caller, and no name twice."""
    if served and caller is None:
        raise ValueError(f"{fn.__name__} names caller arguments but takes no Caller")
    unknown = set(served) - set(CALLER_ARGUMENTS)
    clashing = set(served) & set(inspect.signature(fn).parameters)
    if unknown or clashing:
        raise ValueError(f"{fn.__name__}: bad caller arguments {sorted(unknown | clashing)}")


def _pre_parsed(model: type[BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
    """Lists and objects sent as JSON text are read as JSON, as MCP's SDK does."""
    parsed = dict(arguments)
    for name, value in arguments.items():
        info = model.model_fields.get(name)
        if info is None or not isinstance(value, str) or info.annotation is str:
            continue
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            continue
        if not isinstance(decoded, str | int | float):
            parsed[name] = decoded
    return parsed


def _as_result(value: Any) -> Result:
    if isinstance(value, Result):
        return value
    if isinstance(value, str):
        return Result((value,), structured={"result": value})
    text = json.dumps(value, indent=2, ensure_ascii=False, default=str)
    return Result((text,), structured=value)


def _problems(error: ValidationError) -> str:
    lines = [
        f"{'.'.join(map(str, e['loc'])) or '(arguments)'}: {e['msg']}" for e in error.errors()[:5]
    ]
    return "; ".join(lines)


@dataclass(frozen=True)
class NativeTool:
    name: str
    description: str
    fn: Callable[..., Any]
    arguments: type[BaseModel]
    input_schema: dict[str, Any]
    annotations: Annotations | None
    progress_parameter: str | None
    structured_output: bool | None  # as MCP's ``tool(structured_output=)`` takes it
    caller_parameter: str | None = None
    caller_arguments: tuple[str, ...] = ()  # the caller, when served over MCP

    async def invoke(
        self, arguments: dict[str, Any], progress: Progress | None, caller: Caller | None = None
    ) -> Any:
        """The function's own return value for checked ``arguments``; without a
        ``caller``, the caller is read from its ``caller_arguments``."""
        try:
            model = self.arguments.model_validate(_pre_parsed(self.arguments, arguments))
        except ValidationError as exc:
            raise InvalidArguments(_problems(exc)) from None
        kwargs = {name: getattr(model, name) for name in type(model).model_fields}
        served = {name: kwargs.pop(name) for name in self.caller_arguments}
        if self.progress_parameter is not None:
            kwargs[self.progress_parameter] = progress or _no_progress
        if self.caller_parameter is not None:
            kwargs[self.caller_parameter] = caller or Caller.from_arguments(served)
        value = self.fn(**kwargs)
        return await value if inspect.isawaitable(value) else value

    async def call(
        self,
        arguments: dict[str, Any],
        progress: Progress | None = None,
        caller: Caller | None = None,
    ) -> Result:
        """The tool boundary: a failure is an error result, worded as MCP's SDK words it."""
        try:
            return _as_result(await self.invoke(arguments, progress, caller))
        except ToolError as exc:
            return Result.error(f"Error executing tool {self.name}: {exc}")
        except InvalidArguments:
            raise
        except Exception:
            logger.exception("tool %s failed", self.name)
            return Result.error(f"Error executing tool {self.name}")


async def _no_progress(progress: float, total: float | None, message: str | None) -> None:
    return None


@dataclass
class ToolSet:
    """One server's worth of native tools, and the clients they keep open."""

    name: str
    instructions: str = ""
    resources: Sequence[contextlib.AbstractAsyncContextManager[Any]] = ()
    tools: dict[str, NativeTool] = field(default_factory=dict)

    def tool(
        self,
        *,
        annotations: Annotations | None = None,
        structured_output: bool | None = None,
        caller_arguments: tuple[str, ...] = (),
    ) -> Callable[[F], F]:
        """Register a function as a tool named after it; its docstring describes it.
        ``caller_arguments``: what an MCP client passes for the caller when the set is
        served (names of ``CALLER_ARGUMENTS``)."""

        def register(fn: F) -> F:
            progress, caller = _parameter(fn, Progress), _parameter(fn, Caller)
            _checked_served(fn, caller, caller_arguments)
            skip = {name for name in (progress, caller) if name is not None}
            model = _arguments_model(fn, skip, caller_arguments)
            self.tools[fn.__name__] = NativeTool(
                name=fn.__name__,
                description=fn.__doc__ or "",  # as MCP's SDK gives it
                fn=fn,
                arguments=model,
                input_schema=model.model_json_schema(by_alias=True),
                annotations=annotations,
                progress_parameter=progress,
                structured_output=structured_output,
                caller_parameter=caller,
                caller_arguments=caller_arguments,
            )
            return fn

        return register

    @contextlib.asynccontextmanager
    async def open(self) -> AsyncIterator[ToolSet]:
        """Open the set's clients for as long as it serves; close them after."""
        async with contextlib.AsyncExitStack() as stack:
            for resource in self.resources:
                await stack.enter_async_context(resource)
            yield self

    async def call(
        self,
        name: str,
        arguments: dict[str, Any],
        progress: Progress | None = None,
        caller: Caller | None = None,
    ) -> Result:
        tool = self.tools.get(name)
        if tool is None:
            return Result.error(f"Unknown tool: {name}")
        return await tool.call(arguments, progress, caller)
