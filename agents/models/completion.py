"""Models that continue a text: the interface KG-Reasoner's driver talks to, and a chat-model bridge.

A `TextModel` gets a `TextPrompt` (instructions, the question, and the assistant's text so far)
and stop sequences, and returns the continuation with how it ended. Adapters send the prompt as
one flat text (a completions endpoint) or as a chat whose last message is the assistant's text
so far (a chat endpoint that continues it). `ChatAsText` makes any chat `Model` (Anthropic,
scripted ones) a `TextModel` the second way, cutting the reply at the first stop sequence itself.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

from kg_mcp.agents.models.base import Message, Model, Sampling, Usage


@dataclass(frozen=True)
class TextPrompt:
    system: str  # the instructions
    user: str  # the question, as the user turn
    head: str  # the flat form of system + user, up to where the assistant's text starts
    prefix: str  # the assistant's text so far (the protocol's opening tag, searches, triples)

    @property
    def flat(self) -> str:
        """The whole prompt as one text, for completion endpoints."""
        return self.head + self.prefix

    def messages(self) -> list[Message]:
        """The prompt as a chat whose last turn is the assistant's text, to be continued."""
        return [Message("system", self.system), Message("user", self.user), Message("assistant", self.prefix)]


@dataclass
class TextReply:
    text: str  # the continuation, without the stop sequence that ended it
    finish: str = "stop"  # "stop" (a stop sequence or the end of text) or "length" (out of tokens)
    stop_sequence: str | None = None  # which stop sequence ended it, when known
    ended: bool = False  # True when known to have ended on its own (end of text), not on a stop sequence
    usage: Usage = field(default_factory=Usage)


class TextModel(ABC):
    name: str

    @abstractmethod
    async def generate(self, prompt: TextPrompt, *, stop: list[str], sampling: Sampling | None = None) -> TextReply:
        """Continue `prompt`, stopping before the first of `stop`. Raises ModelError."""


def cut_at_stop(text: str, stop: list[str]) -> tuple[str, str | None]:
    """The text up to the first stop sequence in it, and that sequence (None if there is none).

    >>> cut_at_stop("look <search>Jaws</search> and more", ["</search>", "</answer>"])
    ('look <search>Jaws', '</search>')
    >>> cut_at_stop("no stop here", ["</search>"])
    ('no stop here', None)
    """
    found = [(i, s) for s in stop if (i := text.find(s)) >= 0]
    if not found:
        return text, None
    index, sequence = min(found)
    return text[:index], sequence


class ChatAsText(TextModel):
    """Any chat model as a text model: the assistant's text so far goes as the last (assistant) turn.

    Providers with assistant prefill (Anthropic) continue that turn; others answer with a new
    turn, which is taken as the continuation. The reply is cut at the first stop sequence here.
    """

    def __init__(self, model: Model):
        self.model = model
        self.name = model.name

    async def generate(self, prompt: TextPrompt, *, stop: list[str], sampling: Sampling | None = None) -> TextReply:
        reply = await self.model.complete(prompt.messages(), sampling=sampling)
        text, matched = cut_at_stop(reply.text, stop)
        if matched is not None:
            return TextReply(text, "stop", matched, usage=reply.usage)
        if reply.stop_reason in ("length", "max_tokens"):
            return TextReply(text, "length", usage=reply.usage)
        return TextReply(text, "stop", None, ended=True, usage=reply.usage)
