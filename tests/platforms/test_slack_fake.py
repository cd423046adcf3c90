"""The fake Slack behaves as Slack's documentation says, seen through the real slack_sdk:
what the adapter's tests rely on, checked on its own."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SlackServer

GENERAL = "C0GENERAL"


@pytest.fixture
async def fake_slack() -> AsyncIterator[SlackServer]:
    server = SlackServer(ack_timeout=0.3)
    await server.start()
    yield server
    await server.stop()


async def test_web_api_refuses_what_slack_refuses(fake_slack: SlackServer) -> None:
    bot = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url)
    app = AsyncWebClient(token=APP_TOKEN, base_url=fake_slack.base_url)
    wrong = AsyncWebClient(token="xoxb-wrong", base_url=fake_slack.base_url)
    refusals = {
        "not_allowed_token_type": bot.apps_connections_open(app_token=BOT_TOKEN),
        "invalid_auth": wrong.auth_test(),
        "msg_too_long": bot.chat_postMessage(channel=GENERAL, text="x" * 40_001),
        "no_text": bot.api_call("chat.postMessage", json={"channel": GENERAL}),
        "channel_not_found": bot.chat_postMessage(channel="C0NOPE", text="hi"),
        "invalid_blocks": bot.api_call(
            "chat.postMessage", json={"channel": GENERAL, "text": "x", "blocks": [{"type": "no"}]}
        ),
    }
    for error, request in refusals.items():
        with pytest.raises(SlackApiError) as raised:
            await request
        assert raised.value.response["error"] == error
    alice = fake_slack.user("Alice")
    theirs = await fake_slack.post(GENERAL, alice, "mine")
    with pytest.raises(SlackApiError, match="cant_update_message"):
        await bot.chat_update(channel=GENERAL, ts=theirs["ts"], text="yours now")
    assert (await app.apps_connections_open(app_token=APP_TOKEN))["url"].startswith("ws://")


async def test_rate_limit_is_a_429_with_retry_after(fake_slack: SlackServer) -> None:
    bot = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url)
    fake_slack.rate_limit("chat.postMessage", retry_after=7)
    with pytest.raises(SlackApiError) as raised:
        await bot.chat_postMessage(channel=GENERAL, text="hi")
    assert raised.value.response.status_code == 429
    assert raised.value.response.headers["Retry-After"] == "7"
    assert (await bot.chat_postMessage(channel=GENERAL, text="hi"))["ok"]


async def test_history_pages_newest_first_and_a_thread_from_its_root(
    fake_slack: SlackServer,
) -> None:
    bot = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url)
    alice = fake_slack.user("Alice")
    root = await fake_slack.post(GENERAL, alice, "root")
    await fake_slack.post(GENERAL, alice, "in thread", thread_ts=root["ts"])
    await fake_slack.post(GENERAL, alice, "after")
    page = await bot.conversations_history(channel=GENERAL, limit=1)
    assert [m["text"] for m in page["messages"]] == ["after"]
    assert page["has_more"]
    cursor = page["response_metadata"]["next_cursor"]
    rest = await bot.conversations_history(channel=GENERAL, cursor=cursor)
    assert [m["text"] for m in rest["messages"]] == ["root"]  # replies stay in the thread
    thread = await bot.conversations_replies(channel=GENERAL, ts=root["ts"])
    assert [m["text"] for m in thread["messages"]] == ["root", "in thread"]


async def test_an_unacknowledged_envelope_is_sent_again_with_retry_attempt(
    fake_slack: SlackServer,
) -> None:
    web = AsyncWebClient(base_url=fake_slack.base_url)
    client = SocketModeClient(app_token=APP_TOKEN, web_client=web, ping_interval=30)
    received: asyncio.Queue[SocketModeRequest] = asyncio.Queue()

    async def listener(client: SocketModeClient, request: SocketModeRequest) -> None:
        await received.put(request)
        if request.retry_attempt:  # the first delivery goes unanswered
            await client.send_socket_mode_response(SocketModeResponse(request.envelope_id))

    client.socket_mode_request_listeners.append(listener)  # type: ignore[arg-type]
    await client.connect()
    try:
        await fake_slack.post(GENERAL, fake_slack.user("Alice"), "hello")
        first = await asyncio.wait_for(received.get(), 5)
        again = await asyncio.wait_for(received.get(), 5)
        assert (first.retry_attempt, again.retry_attempt) == (0, 1)
        assert again.retry_reason == "timeout"
        assert again.envelope_id == first.envelope_id
        assert first.payload["event"]["text"] == "hello"
        await fake_slack.wait_ack(first.envelope_id)
        assert received.empty()
    finally:
        await client.close()


async def test_an_upload_takes_its_three_steps_and_refuses_a_skipped_or_short_one(
    fake_slack: SlackServer,
) -> None:
    bot = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url)
    step = await bot.files_getUploadURLExternal(filename="a.png", length=4)
    with pytest.raises(SlackApiError) as raised:  # completed before any bytes arrived
        await bot.files_completeUploadExternal(files=[{"id": step["file_id"]}], channel_id=GENERAL)
    assert raised.value.response["error"] == "file_not_found"
    async with aiohttp.ClientSession() as http:
        async with http.post(str(step["upload_url"]), data=b"abc") as short:
            assert short.status != 200  # not the length promised
        async with http.post(str(step["upload_url"]), data=b"abcd") as whole:
            assert whole.status == 200
    await bot.files_completeUploadExternal(files=[{"id": step["file_id"]}], channel_id=GENERAL)
    (upload,) = fake_slack.uploads
    assert (upload.channel, upload.data, upload.thread_ts) == (GENERAL, b"abcd", None)
    assert fake_slack.messages(GENERAL)[0]["files"][0]["id"] == upload.id
    fake_slack.scopes.discard("files:write")
    with pytest.raises(SlackApiError) as raised:
        await bot.files_getUploadURLExternal(filename="a.png", length=4)
    assert raised.value.response["error"] == "missing_scope"
