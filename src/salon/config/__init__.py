"""Configuration: typed models, YAML layers, secrets from the environment."""

from salon.config.channels import ChannelConfigs, PinnedConfig, Resolved, parse_config_message
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
    "ChannelConfigs",
    "ConfigSet",
    "DiscordConfig",
    "IrcConfig",
    "McpServerConfig",
    "PinnedConfig",
    "PlatformsConfig",
    "ProviderConfig",
    "Redactor",
    "Resolved",
    "Secrets",
    "TerminalConfig",
    "ToolPolicy",
    "ToolRule",
    "load_config_dir",
    "merge_layers",
    "parse_config_message",
    "resolve_secrets",
]
