"""The commented example config that ``salon init`` writes."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

__all__ = ["PLATFORMS", "PROVIDERS", "write_example"]

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
    model: {anthropic_model}

  # A small model run inside Salon (scripts/install --local): no key, no server. It is
  # there to try Salon with, not for good answers: switch the bot to a real provider soon.
  local:
    type: local
    model: SmolLM2-135M-Instruct    # a label; the file is model_path
    # model_path: ~/models/qwen2.5-1.5b-instruct-q4_k_m.gguf   # any GGUF file
    context_length: 4096            # tokens the model sees; the oldest text is cut to fit
    max_tokens: 256                 # cap on one answer
    # temperature: 0.2              # sampling; a bot's own temperature wins
    # repeat_penalty: 1.1           # 1 turns it off: the small model then repeats itself
    # threads: 4                    # CPU threads (default: all, less one on 4 or fewer)

# Where the database and the log files go (relative to this directory).
data_dir: data
"""

BOT_YAML = """\
# bots/{bot}.yaml: one bot. The file name is how you pick it: salon chat --bot {bot}
name: {name}            # the bot's inner name: how it appears to the model
provider: {provider}{pad}# a key under `providers` in shared.yaml: openai, anthropic or local
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


PLATFORM_YAML = {
    "discord": """\
  # Discord: a bot application (docs/CONFIGURATION.md, "Platforms"). In the Developer
  # Portal: New Application; on its Bot page, Reset Token (that is DISCORD_TOKEN) and turn
  # on the Message Content intent (Discord refuses the bot's connection without it); then
  # invite it with OAuth2 > URL Generator, scope bot.
  discord:
    token_env: DISCORD_TOKEN          # the bot's token, read from the environment
    monitored_channels: []            # channel ids answered without a mention: ["123456789"]
    # mentions: {{everyone: false, roles: []}}   # who its messages may notify
""",
    "irc": """\
  # IRC: one network (docs/CONFIGURATION.md, "Platforms"). The bot answers when named, to
  # !ask and in private messages.
  irc:
    server: irc.example.org           # the network's server
    port: 6697
    tls: true
    nick: {bot}
    channels: ["#salon"]              # joined at start
    commands: ["!ask"]                # "!ask what is new?" addresses the bot
    # sasl_username: {bot}            # log in to the network's services (SASL PLAIN)
    # sasl_password_env: IRC_SASL_PASSWORD
""",
    "matrix": """\
  # Matrix: a bot account on your homeserver (docs/CONFIGURATION.md, "Matrix").
  matrix:
    homeserver: https://matrix.example.org   # the client-server API of the bot's server
    user_id: "@{bot}:example.org"            # the bot's MXID
    access_token_env: MATRIX_ACCESS_TOKEN    # its access token, read from the environment
    # password_env: MATRIX_PASSWORD          # or a password login (the token is kept in data/)
    rooms: []                                # room ids joined at start: ["!abc:example.org"]
    monitored_rooms: []                      # room ids answered without a mention
    invite_from_users: []                    # MXIDs whose invites it accepts
    invite_from_servers: []                  # or whole servers: ["example.org"]
    approval_power_level: 50                 # who may approve a tool call with a reaction
""",
    "slack": """\
  # Slack, in Socket Mode (no public URL). Create the app from the manifest in
  # docs/CONFIGURATION.md ("Slack"), install it, and set both tokens in the environment.
  slack:
    bot_token_env: SLACK_BOT_TOKEN    # xoxb-…: OAuth & Permissions, after installing
    app_token_env: SLACK_APP_TOKEN    # xapp-…: Basic Information, scope connections:write
    # monitored_channels: [C0123456789]   # channel ids answered without a mention
    # progress_interval: 2.0          # seconds between edits of a progress message
    # rate_limit_wait_max: 60         # longest Retry-After waited out before giving up
    # max_images: 5                   # newest images read (scope files:read)
    # mode: http                      # the Events API over HTTP instead of Socket Mode:
    #                                 # SLACK_SIGNING_SECRET, listens on 127.0.0.1:3000
    #                                 # behind a TLS proxy (docs/CONFIGURATION.md, "Slack")
""",
}
"""A commented section per platform ``salon init --platform`` adds to the bot's file."""

PLATFORMS = tuple(PLATFORM_YAML)
PROVIDERS = ("openai", "anthropic", "local")
DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
DEFAULT_ANTHROPIC_MODEL = "claude-sonnet-5-5"


def write_example(
    root: Path,
    *,
    model: str | None = None,
    bot: str = "assistant",
    provider: str = "openai",
    platforms: Sequence[str] = (),
) -> list[tuple[Path, bool]]:
    """Write the example files, keeping any that exist; the bot uses ``provider`` (with
    ``model``, for openai and anthropic), on the terminal and each of ``platforms``.
    Returns (path, written) pairs."""
    openai_model = model if model and provider == "openai" else DEFAULT_OPENAI_MODEL
    anthropic_model = model if model and provider == "anthropic" else DEFAULT_ANTHROPIC_MODEL
    shared = SHARED_YAML.format(model=openai_model, anthropic_model=anthropic_model)
    pad = " " * max(1, 24 - len(f"provider: {provider}"))
    files = {
        root / "shared.yaml": shared,
        root / "bots" / f"{bot}.yaml": BOT_YAML.format(
            bot=bot, name=bot.capitalize(), provider=provider, pad=pad
        )
        + "".join(PLATFORM_YAML[p].format(bot=bot) for p in dict.fromkeys(platforms)),
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
