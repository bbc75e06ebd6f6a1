"""Models that follow a script: a queue of replies or a policy function. Used by tests and demos.

They are real `Model`s, so a driver cannot tell them from a provider's.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from kg_mcp.agents.models.base import Message, Model, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage

Policy = Callable[[list[Message], list[ToolSpec]], Reply | Awaitable[Reply]]
_ids = itertools.count(1)


def call(name: str, **arguments: Any) -> ToolCall:
    """A tool call with a fresh id, for scripts: `call("search", entity="wd:Q42")`."""
    return ToolCall(id=f"call_{next(_ids)}", name=name, arguments=arguments)


class ScriptedModel(Model):
    """Replies from a queue (strings, Replies) or from a policy that reads the conversation."""

    def __init__(self, script: Iterable[Reply | str] | Policy = (), name: str = "scripted"):
        self.name = name
        self.policy: Policy | None = script if callable(script) else None
        self.queue: deque[Reply | str] = deque() if callable(script) else deque(script)
        self.seen: list[dict[str, Any]] = []  # every request, for assertions

    def enqueue(self, *replies: Reply | str) -> None:
        self.queue.extend(replies)

    async def complete(self, messages, *, tools=None, sampling: Sampling | None = None, json_schema=None) -> Reply:
        self.seen.append({"messages": list(messages), "tools": list(tools or []), "sampling": sampling, "json_schema": json_schema})
        if self.policy is not None:
            reply = self.policy(list(messages), list(tools or []))
            if isinstance(reply, Awaitable):
                reply = await reply
        elif self.queue:
            reply = self.queue.popleft()
        else:
            raise ModelError(f"{self.name}: the script has no reply left")
        if isinstance(reply, str):
            reply = Reply(text=reply)
        text_tokens = sum(len(m.content.split()) for m in messages)
        reply.usage = reply.usage if reply.usage.requests else Usage(text_tokens, len(reply.text.split()), 1)
        return reply
