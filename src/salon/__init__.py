"""Salon: a runtime for LLM agents that live in group chats."""

__version__ = "0.1.0"
