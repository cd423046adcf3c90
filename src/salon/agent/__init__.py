"""The agent: dispatch (queue, lanes, the activation boundary), the room (what the model
sees) and the conversation (rendering, streaming, tools, output)."""

from salon.agent.activation import should_activate
from salon.agent.conversation.output import ParagraphStream, split_message
from salon.agent.dispatch import Agent

__all__ = ["Agent", "ParagraphStream", "should_activate", "split_message"]
