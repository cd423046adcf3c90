from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from mcp import Client
from mcp.types import CallToolResult, ImageContent, TextContent

from fakes.vendors.accuweather import AccuWeatherFake
from fakes.vendors.comfyui import ComfyUIFake
from fakes.vendors.espn import EspnFake
from fakes.vendors.greynoise import GreyNoiseFake
from fakes.vendors.open_meteo import OpenMeteoFake
from fakes.vendors.pixellab import PixelLabFake
from fakes.vendors.serpapi import SerpApiFake
from salon.tools.mcp_serve import to_mcp_server
from salon.tools.native import ToolSet

T = TypeVar("T")
WAIT = 10.0  # seconds any event in these tests may take before the test fails


class ManualClock:
    """Monotonic seconds the test moves by hand (cache expiry without waiting)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def open_meteo() -> AsyncIterator[OpenMeteoFake]:
    async with OpenMeteoFake() as fake:
        yield fake


@pytest.fixture
async def accuweather() -> AsyncIterator[AccuWeatherFake]:
    async with AccuWeatherFake() as fake:
        yield fake


@pytest.fixture
async def espn() -> AsyncIterator[EspnFake]:
    async with EspnFake() as fake:
        yield fake


@pytest.fixture
async def serpapi() -> AsyncIterator[SerpApiFake]:
    async with SerpApiFake() as fake:
        yield fake


@pytest.fixture
async def greynoise() -> AsyncIterator[GreyNoiseFake]:
    async with GreyNoiseFake() as fake:
        yield fake


@pytest.fixture
async def comfyui() -> AsyncIterator[ComfyUIFake]:
    async with ComfyUIFake() as fake:
        yield fake


@pytest.fixture
async def pixellab() -> AsyncIterator[PixelLabFake]:
    async with PixelLabFake() as fake:
        yield fake


def no_secrets(_name: str) -> str | None:
    return None


def secrets_of(values: dict[str, str]) -> Callable[[str], str | None]:
    return values.get


def text_of(result: CallToolResult) -> str:
    return "\n".join(b.text for b in result.content if isinstance(b, TextContent))


def images_of(result: CallToolResult) -> list[ImageContent]:
    return [b for b in result.content if isinstance(b, ImageContent)]


def connect(server: ToolSet) -> Client:
    """An MCP client of the set as ``salon tools serve`` offers it."""
    return Client(to_mcp_server(server), cache=None)


async def within(awaitable: Awaitable[T]) -> T:
    return await asyncio.wait_for(awaitable, WAIT)


ROOT = Path(__file__).resolve().parents[2]
