"""The agent: queue, activation rules, per-channel serialization, output streaming."""

from salon.agent.activation import should_activate
from salon.agent.loop import Agent
from salon.agent.output import ParagraphStream, split_message

__all__ = ["Agent", "ParagraphStream", "should_activate", "split_message"]
