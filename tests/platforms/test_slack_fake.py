"""The fake Slack behaves as Slack's documentation says, seen through the real slack_sdk:
what the adapter's tests rely on, checked on its own."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable

import aiohttp
import pytest
from aiohttp import web
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from fakes.slack_server import APP_TOKEN, BOT_TOKEN, SIGNING_SECRET, SlackServer
from fakes.slack_web import SlackError

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
        "invalid_metadata_format": bot.chat_postMessage(
            channel=GENERAL, text="x", metadata={"event_payload": {"key": "k"}}
        ),
    }
    for error, request in refusals.items():
        with pytest.raises(SlackApiError) as raised:
            await request
        assert raised.value.response["error"] == error
    long_section = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    with pytest.raises(SlackApiError, match="invalid_blocks"):  # Block Kit: 3,000 at most
        await bot.chat_postMessage(channel=GENERAL, text="x", blocks=long_section)
    alice = fake_slack.user("Alice")
    theirs = await fake_slack.post(GENERAL, alice, "mine")
    with pytest.raises(SlackApiError, match="cant_update_message"):
        await bot.chat_update(channel=GENERAL, ts=theirs["ts"], text="yours now")
    assert (await app.apps_connections_open(app_token=APP_TOKEN))["url"].startswith("ws://")


async def test_message_metadata_is_kept_and_shown_only_when_asked_for(
    fake_slack: SlackServer,
) -> None:
    bot = AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.base_url)
    metadata = {"event_type": "salon_answer", "event_payload": {"key": "k1"}}
    root = await bot.chat_postMessage(channel=GENERAL, text="root", metadata=metadata)
    await bot.chat_postMessage(
        channel=GENERAL, text="reply", thread_ts=root["ts"], metadata=metadata
    )
    plain = await bot.conversations_history(channel=GENERAL)
    assert all("metadata" not in m for m in plain["messages"])
    full = await bot.conversations_history(channel=GENERAL, include_all_metadata=True)
    assert [m["metadata"] for m in full["messages"]] == [metadata]
    thread = await bot.conversations_replies(
        channel=GENERAL, ts=root["ts"], include_all_metadata=True
    )
    assert [m["metadata"] for m in thread["messages"]] == [metadata, metadata]


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


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@pytest.fixture
async def endpoint() -> AsyncIterator[Callable[[Handler], Awaitable[str]]]:
    """An app's Request URL on loopback, answering with the handler a test gives."""
    runners: list[web.AppRunner] = []

    async def serve(handler: Handler) -> str:
        app = web.Application()
        app.router.add_post("/slack/events", handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        runners.append(runner)
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}/slack/events"

    yield serve
    for runner in runners:
        await runner.cleanup()


async def test_a_request_url_is_saved_only_once_it_answers_the_challenge(
    fake_slack: SlackServer, endpoint: Callable[[Handler], Awaitable[str]]
) -> None:
    async def deaf(request: web.Request) -> web.StreamResponse:
        return web.Response(text="ok")

    async def answers(request: web.Request) -> web.StreamResponse:
        data = await request.json()
        return web.json_response({"challenge": data["challenge"]})

    with pytest.raises(SlackError, match="url_verification_failed"):
        await fake_slack.set_request_url(await endpoint(deaf))
    assert fake_slack.http.request_url is None
    url = await endpoint(answers)
    await fake_slack.set_request_url(url)
    assert fake_slack.http.request_url == url


async def test_over_http_every_request_is_signed_and_an_unanswered_event_sent_again(
    fake_slack: SlackServer, endpoint: Callable[[Handler], Awaitable[str]]
) -> None:
    verifier = SignatureVerifier(SIGNING_SECRET)
    seen: asyncio.Queue[tuple[dict[str, str], dict[str, object]]] = asyncio.Queue()
    never = asyncio.Event()

    async def app(request: web.Request) -> web.StreamResponse:
        body = await request.read()
        headers = dict(request.headers)
        stamp, signature = headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
        if not verifier.is_valid(body, stamp, signature):
            return web.Response(status=401)
        if request.content_type == "application/json":
            data = json.loads(body)
        else:
            data = dict(await request.post())
        if data.get("type") == "url_verification":
            return web.Response(text=str(data["challenge"]))
        await seen.put((headers, data))
        if data.get("type") == "event_callback" and "X-Slack-Retry-Num" not in headers:
            await never.wait()  # the first delivery goes unanswered
        return web.Response()

    await fake_slack.set_request_url(await endpoint(app))
    await fake_slack.post(GENERAL, fake_slack.user("Alice"), "hello")
    first, data = await asyncio.wait_for(seen.get(), 5)
    again, repeated = await asyncio.wait_for(seen.get(), 5)
    assert "X-Slack-Retry-Num" not in first
    assert (again["X-Slack-Retry-Num"], again["X-Slack-Retry-Reason"]) == ("1", "http_timeout")
    assert repeated == data
    assert data["event"]["text"] == "hello"  # type: ignore[index]
    await fake_slack.wait_for(lambda: fake_slack.redelivered == 1)
    await fake_slack.command(fake_slack.user("Alice"), GENERAL, "/ask", "why?")
    _, command = await asyncio.wait_for(seen.get(), 5)
    assert (command["command"], command["text"]) == ("/ask", "why?")
    assert seen.empty()
    never.set()  # the abandoned first request ends, and the server stops at once
