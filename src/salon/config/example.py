"""The commented example config that ``salon init`` writes."""

from __future__ import annotations

from pathlib import Path

__all__ = ["write_example"]

SHARED_YAML = """\
# shared.yaml: settings every bot in this directory starts from.
# A bot file (bots/<name>.yaml) overrides any key here; mappings are merged key by key.
# Secrets never go in YAML: a key ending in _env names the environment variable to read.

providers:
  # Any OpenAI-compatible server: OpenAI, OpenRouter, Grok, Ollama, vLLM, llama.cpp ...
  openai:
    type: openai
    base_url: https://api.openai.com/v1
    base_url_env: OPENAI_BASE_URL   # when this variable is set, it wins over base_url
    api_key_env: OPENAI_API_KEY     # leave out for servers that need no key
    model: {model}
    retries: 2                      # extra attempts after a 429, 5xx or connection error
    backoff_initial: 1.0            # seconds before the first retry, doubled each time
    backoff_max: 30.0               # cap on one wait
    # headers: {{X-Title: salon}}
    # extra_body: {{top_k: 40}}     # extra JSON fields some servers understand

  anthropic:
    type: anthropic
    api_key_env: ANTHROPIC_API_KEY
    model: claude-sonnet-5-5

# Where the database and the log files go (relative to this directory).
data_dir: data
"""

BOT_YAML = """\
# bots/{bot}.yaml: one bot. The file name is how you pick it: salon chat --bot {bot}
name: {name}            # the bot's inner name: how it appears to the model
provider: openai        # a key under `providers` in shared.yaml
# model: gpt-4o-mini    # overrides the provider's default model

system_prompt: |
  You are {name}, a friendly and concise participant in a group chat.

max_tokens: 1024
# temperature: 0.7

# How much of the room the model sees; whichever limit is reached first wins.
recency_window_messages: 400
recency_window_characters: 100000

platforms:
  terminal:
    user_name: you      # how your lines are labelled for the model
"""


def write_example(root: Path, *, model: str, bot: str = "assistant") -> list[tuple[Path, bool]]:
    """Write the example files, keeping any that exist. Returns (path, written) pairs."""
    files = {
        root / "shared.yaml": SHARED_YAML.format(model=model),
        root / "bots" / f"{bot}.yaml": BOT_YAML.format(bot=bot, name=bot.capitalize()),
    }
    results: list[tuple[Path, bool]] = []
    for path, text in files.items():
        if path.exists():
            results.append((path, False))
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        results.append((path, True))
    return results
