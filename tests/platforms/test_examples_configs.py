"""Every YAML file of ``examples/`` is a valid config layer (each bot in each guild that
has layers, as ``salon run`` combines them), every ``.config`` message and ``yaml`` block
their READMEs show is accepted, and the personal assistant's compose file mounts a config
that keeps its SQLite database on the volume."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from salon.config import BotConfig, load_config_dir
from salon.config.channels import PinnedConfig
from tests.config.test_doc_snippets import _as_bot
from tests.platforms.test_examples import EXAMPLES

NAMES = sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir())
NOT_LAYERS = {"compose.yaml", "container/shared.yaml"}  # read by Docker; checked below
BLOCK = re.compile(r"^```([a-z]*)\n(.*?)^```$", re.S | re.M)


def _layer_files(root: Path, base: Path) -> set[str]:
    configs = load_config_dir(root)
    files = {layer.file for layers in configs.layers.values() for layer in layers}
    files |= {layer.file for layer in configs.guilds.values()}
    files |= {la.file for overlays in configs.bot_guilds.values() for la in overlays.values()}
    return {Path(f).resolve().relative_to(base.resolve()).as_posix() for f in files}


def _config_dirs(root: Path) -> list[Path]:
    """The example's config directory and its variants (any directory in it with bots/,
    such as sprite-orchestrator/isolated)."""
    return sorted({p.parent for p in root.rglob("bots") if p.is_dir()})


@pytest.mark.parametrize("example", NAMES)
def test_every_yaml_file_is_a_layer_that_validates(example: str) -> None:
    root = EXAMPLES / example
    layers: set[str] = set()
    for directory in _config_dirs(root):
        configs = load_config_dir(directory)  # raises with every problem of every file
        for name in configs.bots:
            for config in configs.configs_in_use(name):  # the bot in each guild with layers
                assert isinstance(config, BotConfig)
        layers |= _layer_files(directory, root)
    found = {p.relative_to(root).as_posix() for p in root.rglob("*.yaml")}
    assert found - NOT_LAYERS == layers


def _readme_blocks(example: str) -> list[tuple[str, str]]:
    text = (EXAMPLES / example / "README.md").read_text(encoding="utf-8")
    return [(m[1], m[2]) for m in BLOCK.finditer(text)]


@pytest.mark.parametrize("example", NAMES)
def test_the_readmes_pinned_configs_and_yaml_blocks_are_accepted(example: str) -> None:
    configs = load_config_dir(EXAMPLES / example)
    for language, block in _readme_blocks(example):
        if language == "yaml":
            BotConfig.model_validate(_as_bot(yaml.safe_load(block)))
        elif block.startswith(".config"):
            targets = block.split("\n", 1)[0].split()[1:]
            for key, config in configs.bots.items():
                if targets and config.name not in targets:
                    continue
                resolver = configs.channel_configs(key)
                for guild in [None, *sorted(resolver.guild_ids)]:
                    resolved = resolver.resolve(guild, [PinnedConfig("1", block)])
                    assert resolved.rejected == (), (key, guild, resolved.rejected)


def test_chapterx_has_every_layer_the_seed_names() -> None:
    root = EXAMPLES / "chapterx"
    configs = load_config_dir(root)
    assert {"shared.yaml", "guilds/900000000000000001.yaml"} <= _layer_files(root, root)
    assert set(configs.bot_guilds["muse"]) == {"900000000000000001"}
    modes = {key: config.mode for key, config in configs.bots.items()}
    assert modes == {"muse": "prefill", "echo": "chat"}
    assert [b for _, b in _readme_blocks("chapterx") if b.startswith(".history")]


def _compose() -> dict[str, Any]:
    text = (EXAMPLES / "personal-assistant" / "compose.yaml").read_text(encoding="utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


def test_the_compose_file_keeps_the_sqlite_database_on_its_volume(tmp_path: Path) -> None:
    """The config as the container sees it (the bind mounts under /config), loaded: its
    data directory, where SQLite lives, is the named volume."""
    example = EXAMPLES / "personal-assistant"
    compose = _compose()
    (service,) = compose["services"].values()
    config_dir = tmp_path / "config"
    volumes: dict[str, str] = {}
    for mount in service["volumes"]:
        source, target = mount.split(":")[:2]
        if target.startswith("/config/"):
            destination = config_dir / target.removeprefix("/config/")
            destination.parent.mkdir(parents=True, exist_ok=True)
            copy = shutil.copytree if (example / source).is_dir() else shutil.copyfile
            copy(example / source, destination)
        volumes[target] = source
    config = load_config_dir(config_dir).bots["assistant"]
    assert config.data_dir == "/data"
    assert config.database_url is None  # SQLite in data_dir
    assert volumes["/data"] in compose["volumes"]  # a named volume, not a bind mount
    assert config.web is not None
    assert config.web.host == "0.0.0.0"
    assert f"127.0.0.1:{config.web.port}:{config.web.port}" in service["ports"]
    secrets = {"DISCORD_TOKEN", "OPENROUTER_API_KEY", config.web.trigger_token_env}
    assert secrets <= set(service["environment"])
    dockerfile = example / service["build"]["context"] / service["build"]["dockerfile"]
    assert "nodejs" in dockerfile.read_text(encoding="utf-8")  # for npx, the MCP server


def test_the_readmes_plain_docker_command_mounts_what_compose_does() -> None:
    readme = (EXAMPLES / "personal-assistant" / "README.md").read_text(encoding="utf-8")
    (command,) = [b for _, b in _readme_blocks("personal-assistant") if "docker run" in b]
    (service,) = _compose()["services"].values()
    for mount in service["volumes"]:
        source, target = mount.split(":")[:2]
        shown = source.replace("./", "$PWD/", 1) if source.startswith("./") else source
        assert f"{shown}:{target}" in command, mount
    for name in service["environment"]:
        assert f"-e {name}" in command
    assert "max_concurrent_activations: 1" in readme
