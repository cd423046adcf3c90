"""A bot before it is built: where its files and database are, its config and secrets
picked from a directory, and whether its local model can run here. The CLI and the
composition root (``salon.app``) share these; none of them starts anything."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path

from salon.config import BotConfig, ConfigSet, Secrets, resolve_secrets
from salon.errors import ConfigError, ConfigProblem
from salon.store.sql import SQLStore, sqlite_url

__all__ = ["data_dir", "database_url", "load_bot", "local_model_problems", "store_for"]


def data_dir(root: Path, config: BotConfig) -> Path:
    path = Path(config.data_dir)
    return path if path.is_absolute() else root / path


def database_url(root: Path, config: BotConfig) -> str:
    """The store's URL; a relative SQLite path is under the config directory, as
    ``data_dir`` is (its directory made when missing)."""
    if config.database_url:
        scheme, sep, path = config.database_url.partition(":///")
        relative = path and not path.startswith(("/", ":memory:"))
        if sep and scheme.lower().split("+")[0] == "sqlite" and relative:
            file = root / path
            file.parent.mkdir(parents=True, exist_ok=True)
            return f"{scheme}:///{file}"
        return config.database_url
    directory = data_dir(root, config)
    directory.mkdir(parents=True, exist_ok=True)
    return sqlite_url(directory / "salon.db")


def store_for(
    root: Path,
    config: BotConfig,
    environ: Mapping[str, str] | None = None,
    *,
    owner: str | None = None,
    secrets: Secrets | None = None,
    redact: Callable[[str], str] | None = None,
) -> SQLStore:
    """The bot's store: its URL, with the password from ``database_password_env`` (from
    ``secrets`` when given, else the environment), and every secret redacted in it
    (``secrets``' values, or what ``redact`` takes out)."""
    env_name = config.database_password_env
    password = None
    if env_name:
        env = os.environ if environ is None else environ
        password = secrets.get(env_name) if secrets is not None else env.get(env_name)
        if not password:
            reason = f"environment variable {env_name} is not set (the database's password)"
            raise ConfigError([ConfigProblem("(environment)", "database_password_env", reason)])
    if redact is None and secrets is not None:
        redact = secrets.redactor()
    return SQLStore(database_url(root, config), password=password, owner=owner, redact=redact)


def load_bot(
    configs: ConfigSet,
    name: str | None,
    environ: Mapping[str, str] | None = None,
    *,
    tools_only: bool = False,
) -> tuple[str, BotConfig, Secrets]:
    """Pick a bot and resolve its secrets; raises ConfigError before anything connects."""
    key, config = configs.bot(name)
    env = os.environ if environ is None else environ
    secrets = resolve_secrets(
        config, env, configs.locator(key), tools_only=tools_only, variables=configs.variables(key)
    )
    if not tools_only and (problems := local_model_problems(configs, key)):
        raise ConfigError(problems)
    return key, config, secrets


def local_model_problems(configs: ConfigSet, key: str) -> list[ConfigProblem]:
    """Each local provider the bot uses that cannot run here (no extra, no model file)."""
    locate = configs.locator(key)
    seen: set[str] = set()
    problems: list[ConfigProblem] = []
    for config in configs.configs_in_use(key):
        name, settings = config.provider, config.provider_config()
        if name in seen or settings.type != "local":
            continue
        seen.add(name)
        from salon.llm.local import local_problem  # the local engine, for a local model only

        found = local_problem(settings)
        if found is not None:
            problems.append(locate(f"providers.{name}.{found[0]}", found[1]))
    return problems
