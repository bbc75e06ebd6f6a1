"""Provider-neutral messages, tool calls and replies, and the one method every model has.

Adapters translate these to and from a provider's API; drivers and traces see only these.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

Role = Literal["system", "user", "assistant", "tool"]


@dataclass
class ToolCall:
    id: str
    name: str
    arguments: dict[str, Any]
    # The raw argument text when the model sent something that is not a JSON object.
    malformed: str | None = None


@dataclass
class Message:
    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)  # assistant turns
    tool_call_id: str | None = None  # tool results
    name: str | None = None  # tool results: the tool's name
    is_error: bool = False  # tool results

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass
class Usage:
    input_tokens: int = 0  # every prompt token, those read from or written to the provider's cache included
    output_tokens: int = 0
    requests: int = 0
    cached_input_tokens: int = 0  # of input_tokens: read from the provider's prompt cache (billed lower)
    cache_write_tokens: int = 0  # of input_tokens: written to it (Anthropic bills them higher)

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.requests + other.requests,
            self.cached_input_tokens + other.cached_input_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True)
class Sampling:
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int = 2048


@dataclass
class Reply:
    text: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage = field(default_factory=Usage)
    stop_reason: str = "stop"

    def as_message(self) -> Message:
        return Message(role="assistant", content=self.text, tool_calls=list(self.tool_calls))


class ModelError(Exception):
    """The provider failed after the SDK's own retries (or the reply could not be read)."""


class Model(ABC):
    """A chat model that may call tools. One async method; adapters hold the provider client."""

    name: str

    @abstractmethod
    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: Sampling | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Reply:
        """One model turn. With `json_schema`, the reply text is a JSON object of that schema
        (native structured output where the provider has it; otherwise asked for in the prompt).
        Several tool calls in one reply are allowed. Raises ModelError."""
