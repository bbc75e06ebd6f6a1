"""`openai:NAME`: any server that speaks the OpenAI Chat Completions API, through the official SDK.

The same adapter serves OpenAI itself and local OpenAI-compatible servers (vLLM, Ollama,
llama.cpp); only the base URL differs. Retries (429, 5xx, timeouts, with back-off and
Retry-After) are the SDK's; what still fails is raised as ModelError with its HTTP status.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
from typing import Any

import openai
from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage
from kg_mcp.agents.models.json_text import json_object_span
from kg_mcp.agents.models.strict_tools import drop_absent, strict_schema

# Local servers usually ignore the key, but the SDK refuses to start without one.
PLACEHOLDER_KEY = "not-needed"
OPENAI_HOST = "api.openai.com"

# Statuses with which a server says "I do not understand this request" (FastAPI-based ones use 422).
_REJECTED = (400, 422)


def openai_client(
    who: str, base_url: str | None, api_key: str | None, max_retries: int, timeout: float | None
) -> openai.AsyncOpenAI:
    """An SDK client from the arguments, else OPENAI_BASE_URL / OPENAI_API_KEY; a local server
    (a base URL) may go without a key."""
    base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
    api_key = api_key or os.environ.get("OPENAI_API_KEY") or None
    if api_key is None:
        if base_url is None:
            raise ModelError(
                f"{who}: no API key; set OPENAI_API_KEY, or give a base URL "
                "(--base-url or OPENAI_BASE_URL) for a local server that needs none"
            )
        api_key = PLACEHOLDER_KEY
    options: dict[str, Any] = {"api_key": api_key, "base_url": base_url, "max_retries": max_retries}
    if timeout is not None:
        options["timeout"] = timeout
    return openai.AsyncOpenAI(**options)


class OpenAIChatModel(Model):
    """A chat model behind the Chat Completions API.

    With `json_schema`, the request carries `response_format` (type json_schema, not strict);
    a server that rejects it (400/422) is asked again once with the schema in the prompt instead,
    and this instance then stops sending `response_format`.

    Tools go out as the server publishes them: an optional argument is optional (not required),
    so a model leaves it out rather than writing its default on every call. Strict function
    calling (kg_mcp.agents.models.strict_tools), where the provider must check the arguments
    against the schema, lists every argument as required (nullable); it is used only when asked
    for (`strict_tools=True`, or OPENAI_STRICT_TOOLS=1 for a provider that requires it). A server
    that rejects a request with strict tools (400/422) is then asked again once without, and this
    instance offers its tools as they are from then on.

    On OpenAI's own API each request carries a `prompt_cache_key` made from its system prompt and
    tools, so the questions of one run share the provider's prompt cache: the system prompt and
    tool list, the same for every question, are read from the cache after the first request
    rather than processed in full (OpenAI caches prompt prefixes of 1,024 tokens or more on its own;
    the key keeps one run's requests together). Other servers get no key (some refuse fields they
    do not know).
    """

    def __init__(
        self,
        name: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 4,
        timeout: float | None = None,
        strict_tools: bool | None = None,
        prompt_cache_key: bool | None = None,
    ):
        self.name = name
        self.client = openai_client(f"openai:{name}", base_url, api_key, max_retries, timeout)
        self.response_format_supported = True  # until a server says otherwise
        if strict_tools is None:
            strict_tools = os.environ.get("OPENAI_STRICT_TOOLS", "").lower() in ("1", "true", "yes")
        self.strict_tools_supported = strict_tools  # asked for, and not refused by the server yet
        if prompt_cache_key is None:
            prompt_cache_key = self.client.base_url.host == OPENAI_HOST
        self.prompt_cache_key = prompt_cache_key

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
        request = {"model": self.name, "messages": to_api_messages(messages)}
        if tools:
            request["tools"] = [to_api_tool(t, strict=self.strict_tools_supported) for t in tools]
        if self.prompt_cache_key:
            request["prompt_cache_key"] = cache_key(messages, tools)
        request.update(sampling_options(sampling or Sampling()))
        if json_schema is None:
            return from_api_reply(await self._create(request, tools), tools)
        if self.response_format_supported:
            native = {**request, "response_format": response_format(json_schema)}
            try:
                return as_json_reply(from_api_reply(await self._create(native, tools), tools))
            except ModelError as e:
                if getattr(e, "status", None) not in _REJECTED:
                    raise
            fallback = await self._create(with_json_instruction(request, json_schema), tools)
            # Only now is it clear the 400 was about response_format, not the conversation.
            self.response_format_supported = False
            return as_json_reply(from_api_reply(fallback, tools))
        return as_json_reply(from_api_reply(await self._create(with_json_instruction(request, json_schema), tools), tools))

    async def _create(self, request: dict[str, Any], tools: list[ToolSpec] | None) -> Any:
        strict = any(t["function"].get("strict") for t in request.get("tools", ()))
        try:
            return await self._send(request)
        except ModelError as e:
            if not strict or getattr(e, "status", None) not in _REJECTED:
                raise
        completion = await self._send({**request, "tools": [to_api_tool(t) for t in tools or ()]})
        self.strict_tools_supported = False  # only now is it clear the 400 was about strict tools
        return completion

    async def _send(self, request: dict[str, Any]) -> Any:
        try:
            return await self.client.chat.completions.create(**request)
        except openai.APIError as e:
            raise model_error(f"openai:{self.name}", e) from e


def model_error(who: str, e: Exception) -> ModelError:
    """A ModelError for a final SDK error, with `.status` (HTTP status, or None) for callers that care."""
    status = getattr(e, "status_code", None)
    message = getattr(e, "message", None) or str(e)
    where = f"HTTP {status}" if status is not None else type(e).__name__
    error = ModelError(f"{who}: {where}: {message}")
    error.status = status  # type: ignore[attr-defined]
    return error


def to_api_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as Chat Completions messages."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    # What OpenAI itself sends back with tool calls; servers accept it.
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": argument_text(c)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def argument_text(call: ToolCall) -> str:
    """The arguments as the model sent them: its raw text when it was malformed, so the history is true."""
    return call.malformed if call.malformed is not None else json.dumps(call.arguments)


def cache_key(messages: list[Message], tools: list[ToolSpec] | None) -> str:
    """The same for every request that starts with the same system prompt and tools.

    >>> cache_key([Message("system", "S"), Message("user", "q1")], None) == cache_key([Message("system", "S")], None)
    True
    """
    system = "\n".join(m.content for m in messages if m.role == "system")
    names = ",".join(t.name for t in tools or ())
    return "kg-mcp-" + hashlib.sha256(f"{system}\n{names}".encode()).hexdigest()[:24]


def to_api_tool(tool: ToolSpec, *, strict: bool = False) -> dict[str, Any]:
    """A tool for Chat Completions; with `strict`, in strict mode when its schema allows."""
    function = {"name": tool.name, "description": tool.description, "parameters": tool.input_schema}
    schema = strict_schema(tool.input_schema) if strict else None
    if schema is not None:
        function.update(parameters=schema, strict=True)
    return {"type": "function", "function": function}


def sampling_options(sampling: Sampling) -> dict[str, Any]:
    """Only the settings that are set: servers differ in what they accept, defaults are theirs."""
    options: dict[str, Any] = {"max_tokens": sampling.max_tokens}  # not max_completion_tokens: see module doc
    for key in ("temperature", "top_p", "seed"):
        value = getattr(sampling, key)
        if value is not None:
            options[key] = value
    return options


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    # Not strict: strict mode demands additionalProperties=false and all-required schemas.
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema, "strict": False}}


def json_instruction(schema: dict[str, Any]) -> str:
    return (
        "Answer with exactly one JSON object and nothing else (no prose, no code fence). "
        f"It must follow this JSON schema:\n{json.dumps(schema)}"
    )


def with_json_instruction(request: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The request with the schema asked for in words.

    Added to the last user message when there is one at the end, since many local chat templates
    reject two user turns in a row or a system turn that is not first.
    """
    messages = [dict(m) for m in request["messages"]]
    last = messages[-1] if messages else None
    if last is not None and last["role"] == "user" and isinstance(last.get("content"), str):
        last["content"] = f"{last['content']}\n\n{json_instruction(schema)}"
    else:
        messages.append({"role": "user", "content": json_instruction(schema)})
    return {**request, "messages": messages}


_fresh_ids = itertools.count(1)


def from_api_reply(completion: Any, tools: list[ToolSpec] | None = None) -> Reply:
    """A Chat Completions response as a Reply; nulls for optional arguments of `tools` left out."""
    if not getattr(completion, "choices", None):
        raise ModelError(f"the server's reply has no choices: {completion!r:.300}")
    choice = completion.choices[0]
    message = choice.message
    calls = [parse_tool_call(c) for c in (message.tool_calls or [])]
    schemas = {t.name: t.input_schema for t in tools or ()}
    for c in calls:
        if c is not None and c.name in schemas and c.malformed is None:
            c.arguments = drop_absent(c.arguments, schemas[c.name])
    usage = completion.usage
    details = getattr(usage, "prompt_tokens_details", None) if usage else None
    return Reply(
        text=message.content or "",
        tool_calls=[c for c in calls if c is not None],
        usage=Usage(
            input_tokens=(getattr(usage, "prompt_tokens", None) or 0) if usage else 0,
            output_tokens=(getattr(usage, "completion_tokens", None) or 0) if usage else 0,
            requests=1,
            cached_input_tokens=(getattr(details, "cached_tokens", None) or 0) if details else 0,
        ),
        stop_reason=choice.finish_reason or "stop",
    )


def parse_tool_call(call: Any) -> ToolCall | None:
    """One tool call; arguments that are not a JSON object come back as `malformed` raw text."""
    function = getattr(call, "function", None)
    if function is None:  # a non-function ("custom") tool call: we never offer those
        return None
    # Some local servers omit ids; the conversation still needs one to pair the result with.
    call_id = call.id or f"call_{next(_fresh_ids)}"
    raw = function.arguments
    if raw is None or not raw.strip():
        # Servers send "" for a call without arguments.
        return ToolCall(id=call_id, name=function.name, arguments={})
    try:
        arguments = json.loads(raw)
    except ValueError:
        arguments = None
    if not isinstance(arguments, dict):
        return ToolCall(id=call_id, name=function.name, arguments={}, malformed=raw)
    return ToolCall(id=call_id, name=function.name, arguments=arguments)


def as_json_reply(reply: Reply) -> Reply:
    """The reply with its text cut down to the JSON object in it, when there is one.

    Models asked in words often wrap the object in a code fence or a sentence.
    """
    reply.text = extract_json_object(reply.text)
    return reply


def extract_json_object(text: str) -> str:
    """The first JSON object in `text`, as written; `text` unchanged when there is none.

    >>> extract_json_object('Here: ```json\\n{"a": [1, 2]}\\n``` done')
    '{"a": [1, 2]}'
    >>> extract_json_object('no json')
    'no json'
    """
    span = json_object_span(text)
    return text if span is None else text[span[0] : span[1]]
