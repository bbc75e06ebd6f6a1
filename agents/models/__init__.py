"""Models by name: `openai:NAME`, `anthropic:NAME`, `openai-completions:NAME` (text continuation,
for KG-Reasoner), or any name registered (scripted models in tests).

An OpenAI-compatible local server (vLLM, Ollama, llama.cpp) is the OpenAI adapter with another
base URL (`--base-url` or OPENAI_BASE_URL), not an adapter of its own.
"""

from __future__ import annotations

from collections.abc import Callable

from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage

__all__ = [
    "Message",
    "Model",
    "ModelError",
    "Reply",
    "Sampling",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "get_model",
    "register_model",
    "unregister_model",
]

Factory = Callable[..., Model]
_registered: dict[str, Factory] = {}


def register_model(name: str, factory: Factory) -> None:
    """Make `get_model(name)` return `factory(name, **options)`; a full name or a `provider` prefix."""
    _registered[name] = factory


def unregister_model(name: str) -> None:
    _registered.pop(name, None)


def get_model(spec: str, *, base_url: str | None = None, api_key: str | None = None, max_retries: int = 4) -> Model:
    """The model named `provider:NAME`. Raises ValueError for an unknown provider."""
    provider, _, name = spec.partition(":")
    if spec in _registered:
        return _registered[spec](spec, base_url=base_url, api_key=api_key, max_retries=max_retries)
    if provider in _registered:
        return _registered[provider](name, base_url=base_url, api_key=api_key, max_retries=max_retries)
    if not name:
        raise ValueError(f"name a model as provider:NAME (openai:gpt-4o-mini, anthropic:claude-sonnet-4-5), not {spec!r}")
    if provider == "openai":
        from kg_mcp.agents.models.openai_chat import OpenAIChatModel

        return OpenAIChatModel(name, base_url=base_url, api_key=api_key, max_retries=max_retries)
    if provider == "openai-completions":  # the /v1/completions API, for text-continuing drivers (kgr)
        from kg_mcp.agents.models.openai_completions import OpenAITextModel

        return OpenAITextModel(name, mode="completions", base_url=base_url, api_key=api_key, max_retries=max_retries)
    if provider == "anthropic":
        from kg_mcp.agents.models.anthropic_messages import AnthropicModel

        return AnthropicModel(name, base_url=base_url, api_key=api_key, max_retries=max_retries)
    raise ValueError(f"unknown model provider {provider!r}: use openai:NAME, anthropic:NAME or openai-completions:NAME")
