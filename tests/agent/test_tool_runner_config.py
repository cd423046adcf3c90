"""A channel's runner (``ToolRunner.with_config``): that channel's config over the bot's
tools, store and log, and one memory of a provider that refused tools for all of them."""

from __future__ import annotations

from salon.agent.conversation.toolrunner import ToolRunner
from salon.store.sql import SQLStore
from salon.tools.hub import ToolHub
from tests.conftest import bot_config


async def test_a_channels_runner_has_its_config_and_shares_a_refusal(store: SQLStore) -> None:
    bot = bot_config(default_tool_policy="allow")
    prefill = bot_config(mode="prefill")
    async with ToolHub([]) as hub:
        runner = ToolRunner(bot="salon", config=bot, tools=hub, store=store, log=None)
        assert runner.with_config(bot) is runner
        channel = runner.with_config(prefill)
        other = runner.with_config(bot_config(tool_mode="planner"))
    assert (channel.config, channel.tools, channel.store) == (prefill, hub, store)
    assert channel.text_mode
    assert not runner.text_mode
    assert (channel.bot, channel.log, channel.redact) == (runner.bot, runner.log, runner.redact)
    channel.refused_by_provider = True
    assert runner.refused_by_provider
    assert other.refused_by_provider
    assert runner.with_config(prefill).refused_by_provider
