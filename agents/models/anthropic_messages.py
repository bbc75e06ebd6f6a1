"""`anthropic:NAME`: Claude models through the official SDK's Messages API.

Retries (429, 529 overloaded, 5xx, timeouts, with back-off and Retry-After) are the SDK's; what
still fails is raised as ModelError with its HTTP status.
"""

from __future__ import annotations

import json
import os
from typing import Any

import anthropic
from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage

RESPOND_TOOL = "respond"
CACHED = {"type": "ephemeral"}  # a prompt-cache breakpoint (the default five minutes)
PLACEHOLDER_KEY = "not-needed"
ANSWER_DESCRIPTION = "Give the answer."

# Our own default: an explicit timeout also stops the SDK from refusing non-streaming requests
# with a large max_tokens (it estimates they could exceed 10 minutes).
DEFAULT_TIMEOUT_S = 600.0


class AnthropicModel(Model):
    """A Claude model behind the Messages API.

    With `json_schema`, the model is made to call a tool named "respond" (another name if one of
    the caller's tools has it) whose input schema is that schema; the reply's text is that tool's
    input as JSON and the reply has no tool calls.
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 4,
        timeout: float | None = None,
    ):
        self.name = name
        base_url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or None
        api_key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        credentials: dict[str, str] = {}
        if api_key is not None:
            credentials["api_key"] = api_key
        elif os.environ.get("ANTHROPIC_AUTH_TOKEN"):
            credentials["auth_token"] = os.environ["ANTHROPIC_AUTH_TOKEN"]
        elif base_url is not None:
            # A proxy or test server; and without any credential the SDK would go looking for profiles.
            credentials["api_key"] = PLACEHOLDER_KEY
        else:
            raise ModelError(
                f"anthropic:{name}: no API key; set ANTHROPIC_API_KEY, or give a base URL "
                "(--base-url or ANTHROPIC_BASE_URL) for a server that needs none"
            )
        self.client = anthropic.AsyncAnthropic(
            **credentials,
            base_url=base_url,
            max_retries=max_retries,
            timeout=timeout if timeout is not None else DEFAULT_TIMEOUT_S,
        )

    async def aclose(self) -> None:
        """Close the HTTP connections the client holds."""
        await self.client.close()

    async def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec] | None = None,
        sampling: Sampling | None = None,
        json_schema: dict[str, Any] | None = None,
    ) -> Reply:
        sampling = sampling or Sampling()
        system, turns = to_api_messages(messages)
        request: dict[str, Any] = {"model": self.name, "max_tokens": sampling.max_tokens, "messages": turns}
        if system:
            # The system prompt and the tools before it are the same for every question of a run: one
            # cache breakpoint after them, and each later request reads them from the prompt cache
            # (billed at a tenth) instead of in full. Prompts under the model's minimum are not cached.
            request["system"] = [{"type": "text", "text": system, "cache_control": CACHED}]
        api_tools = [to_api_tool(t) for t in tools or []]
        respond = None
        if json_schema is not None:
            respond = respond_tool_name(tools or [])
            # The caller's tools stay declared: the API wants them when the history has tool blocks.
            answer_tool = {"name": respond, "description": ANSWER_DESCRIPTION, "input_schema": json_schema}
            api_tools.append(answer_tool)
            request["tool_choice"] = {"type": "tool", "name": respond}
        if api_tools:
            request["tools"] = api_tools
        # The installed SDK names neither, so they go as extra body fields; the API has no seed.
        # A model that refuses them answers 400, a ModelError: runs must not silently change settings.
        settings = (("temperature", sampling.temperature), ("top_p", sampling.top_p))
        extra = {k: v for k, v in settings if v is not None}
        if extra:
            request["extra_body"] = extra
        try:
            message = await self.client.messages.create(**request)
        except anthropic.APIError as e:
            raise model_error(f"anthropic:{self.name}", e) from e
        return from_api_reply(message, respond_tool=respond)


def model_error(who: str, e: anthropic.APIError) -> ModelError:
    """A ModelError for a final SDK error, with `.status` (HTTP status, or None) for callers that care."""
    status = getattr(e, "status_code", None)
    where = f"HTTP {status}" if status is not None else type(e).__name__
    error = ModelError(f"{who}: {where}: {e.message or e}")
    error.status = status  # type: ignore[attr-defined]
    return error


def to_api_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """Our messages as (system text, Messages API turns).

    System messages go to `system`. Tool results become `tool_result` blocks of a user turn, and
    adjacent turns of one role are merged, so consecutive tool results (and any user text after
    them) make ONE user turn, as the API expects after a turn with several tool uses.
    """
    system: list[str] = []
    turns: list[dict[str, Any]] = []

    def add(role: str, blocks: list[dict[str, Any]]) -> None:
        if not blocks:  # the API rejects empty turns and empty text blocks
            return
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})

    for m in messages:
        if m.role == "system":
            if m.content:
                system.append(m.content)
        elif m.role == "tool":
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
            if m.content:
                result["content"] = m.content
            if m.is_error:
                result["is_error"] = True
            add("user", [result])
        elif m.role == "assistant":
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments} for c in m.tool_calls
            ]
            add("assistant", blocks)
        else:
            add("user", [{"type": "text", "text": m.content}] if m.content else [])
    return "\n\n".join(system), turns


def to_api_tool(tool: ToolSpec) -> dict[str, Any]:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema}


def respond_tool_name(tools: list[ToolSpec]) -> str:
    """"respond", or a variant no caller tool uses."""
    taken = {t.name for t in tools}
    name, n = RESPOND_TOOL, 1
    while name in taken:
        n += 1
        name = f"{RESPOND_TOOL}_{n}"
    return name


def from_api_reply(message: Any, *, respond_tool: str | None = None) -> Reply:
    """A Messages API response as a Reply; with `respond_tool`, that tool's input is the text."""
    texts: list[str] = []
    calls: list[ToolCall] = []
    answer: str | None = None
    for block in message.content or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            texts.append(block.text)
        elif kind == "tool_use":
            if respond_tool is not None and block.name == respond_tool:
                answer = json.dumps(block.input)
            elif isinstance(block.input, dict):
                calls.append(ToolCall(id=block.id, name=block.name, arguments=block.input))
            else:  # only a non-Anthropic server could send this; let the driver tell the model
                raw = block.input if isinstance(block.input, str) else json.dumps(block.input)
                calls.append(ToolCall(id=block.id, name=block.name, arguments={}, malformed=raw))
    stop_reason = message.stop_reason or "end_turn"
    if respond_tool is not None:
        # The forced call is the answer, not a tool call the driver should run.
        calls = []
        if stop_reason == "tool_use":
            stop_reason = "end_turn"
    usage = message.usage
    return Reply(
        text=answer if answer is not None else "".join(texts),
        tool_calls=calls,
        usage=Usage(
            input_tokens(usage),
            getattr(usage, "output_tokens", None) or 0,
            requests=1,
            cached_input_tokens=getattr(usage, "cache_read_input_tokens", None) or 0,
            cache_write_tokens=getattr(usage, "cache_creation_input_tokens", None) or 0,
        ),
        stop_reason=stop_reason,
    )


def input_tokens(usage: Any) -> int:
    """All prompt tokens: the API counts cache reads and writes apart from `input_tokens`."""
    if usage is None:
        return 0
    names = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    return sum(getattr(usage, n, None) or 0 for n in names)
