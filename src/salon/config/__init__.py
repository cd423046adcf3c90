"""Configuration: typed models, YAML layers, secrets from the environment."""

from salon.config.loader import ConfigSet, load_config_dir, merge_layers
from salon.config.models import BotConfig, PlatformsConfig, ProviderConfig, TerminalConfig
from salon.config.secrets import Redactor, Secrets, resolve_secrets

__all__ = [
    "BotConfig",
    "ConfigSet",
    "PlatformsConfig",
    "ProviderConfig",
    "Redactor",
    "Secrets",
    "TerminalConfig",
    "load_config_dir",
    "merge_layers",
    "resolve_secrets",
]
