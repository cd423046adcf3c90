"""Configuration: typed models, YAML layers, secrets from the environment."""

from salon.config.channels import ChannelConfigs, PinnedConfig, Resolved, parse_config_message
from salon.config.loader import ConfigSet, load_config_dir, merge_layers
from salon.config.models import (
    BotConfig,
    ComfyUIIntegration,
    DiscordConfig,
    GreyNoiseIntegration,
    IntegrationConfig,
    IntegrationsConfig,
    IrcConfig,
    McpServerConfig,
    NflIntegration,
    PixelLabIntegration,
    PlatformsConfig,
    ProviderConfig,
    SearchIntegration,
    TerminalConfig,
    ToolPolicy,
    ToolRule,
    WeatherIntegration,
)
from salon.config.secrets import Redactor, Secrets, resolve_secrets

__all__ = [
    "BotConfig",
    "ChannelConfigs",
    "ComfyUIIntegration",
    "ConfigSet",
    "DiscordConfig",
    "GreyNoiseIntegration",
    "IntegrationConfig",
    "IntegrationsConfig",
    "IrcConfig",
    "McpServerConfig",
    "NflIntegration",
    "PinnedConfig",
    "PixelLabIntegration",
    "PlatformsConfig",
    "ProviderConfig",
    "Redactor",
    "Resolved",
    "SearchIntegration",
    "Secrets",
    "TerminalConfig",
    "ToolPolicy",
    "ToolRule",
    "WeatherIntegration",
    "load_config_dir",
    "merge_layers",
    "parse_config_message",
    "resolve_secrets",
]
