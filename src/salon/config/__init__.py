"""Configuration: typed models, YAML layers, secrets from the environment."""

from salon.config.loader import ConfigSet, load_config_dir, merge_layers
from salon.config.models import (
    BotConfig,
    DiscordConfig,
    IrcConfig,
    McpServerConfig,
    PlatformsConfig,
    ProviderConfig,
    TerminalConfig,
    ToolPolicy,
    ToolRule,
)
from salon.config.secrets import Redactor, Secrets, resolve_secrets

__all__ = [
    "BotConfig",
    "ConfigSet",
    "DiscordConfig",
    "IrcConfig",
    "McpServerConfig",
    "PlatformsConfig",
    "ProviderConfig",
    "Redactor",
    "Secrets",
    "TerminalConfig",
    "ToolPolicy",
    "ToolRule",
    "load_config_dir",
    "merge_layers",
    "resolve_secrets",
]
