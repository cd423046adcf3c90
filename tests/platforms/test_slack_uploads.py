"""Files a tool made, uploaded to Slack (files.getUploadURLExternal, the bytes POSTed to
the upload URL, files.completeUploadExternal) after the answer's text; without
``files:write`` they stay link lines."""

from __future__ import annotations

import logging

import pytest

from fakes.slack_server import SlackServer
from salon.llm import FakeProvider
from salon.model import Attachment, ChannelRef
from tests.platforms import test_slack
from tests.platforms.test_slack import GENERAL, StartSlack

fake_slack, start_slack = test_slack.fake_slack, test_slack.start_slack  # the fixtures

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


def sprite() -> Attachment:
    return Attachment(
        filename="cat.png",
        content_type="image/png",
        size=len(PNG),
        url="https://images.example/cat.png",
        data=PNG,
    )


async def test_an_image_is_uploaded_into_the_thread_after_the_text(
    fake_slack: SlackServer, start_slack: StartSlack
) -> None:
    _, platform = await start_slack(FakeProvider([]))
    alice = fake_slack.user("Alice")
    root = await fake_slack.post(GENERAL, alice, "draw me a cat")
    thread = ChannelRef(platform="slack", id=f"{GENERAL}-{root['ts']}", name="general")
    unkept = Attachment(filename="gone.png", content_type="image/png", size=0)
    await platform.send(thread, "here it is", files=[sprite(), unkept])
    (upload,) = fake_slack.uploads
    assert (upload.channel, upload.thread_ts) == (GENERAL, root["ts"])
    assert (upload.name, upload.data) == ("cat.png", PNG)
    text, shared = fake_slack.messages(GENERAL)
    assert text["text"] == "here it is\n[gone.png: (not kept)]"  # no bytes: a line
    assert shared["files"][0]["id"] == upload.id
    assert shared["thread_ts"] == root["ts"]


async def test_without_files_write_the_image_stays_a_link_and_a_warning_is_logged(
    fake_slack: SlackServer, start_slack: StartSlack, caplog: pytest.LogCaptureFixture
) -> None:
    fake_slack.scopes.discard("files:write")
    _, platform = await start_slack(FakeProvider([]))
    general = ChannelRef(platform="slack", id=GENERAL, name="general")
    with caplog.at_level(logging.WARNING):
        await platform.send(general, "here it is", files=[sprite()])
    assert fake_slack.uploads == []
    text, link = fake_slack.messages(GENERAL)
    assert text["text"] == "here it is"
    assert link["text"] == "[cat.png: https://images.example/cat.png]"
    warned = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert any("files:write" in line for line in warned), warned
