"""OpenAI-compatible text continuation through the official SDK, for KG-Reasoner's tag protocol.

Two ways to reach a server, same `TextModel` interface:

- `mode="completions"` (`--model openai-completions:NAME`): POST /v1/completions with the whole
  prompt as one text and `stop` sequences. What vLLM, llama.cpp and Ollama serve for raw
  prompts, and what a model trained on the protocol expects: the text continues exactly.
- `mode="chat"` (`--model openai:NAME` with `--agent kgr`): POST /v1/chat/completions with the
  instructions, the question, and the assistant's text so far as a final assistant message,
  plus `stop`. The request asks vLLM to continue that message rather than open a new one
  (`continue_final_message`, `add_generation_prompt` in the body); a server that rejects those
  fields (HTTP 400/422) is asked again without them, and this instance stops sending them.
  Without them a server answers with a new assistant turn, which is taken as the continuation.

Servers drop the stop sequence that ended a reply and most do not say which one it was; vLLM
does (`stop_reason`), and is believed when it does. Replies are also cut at the first stop
sequence here, for servers that ignore `stop`. Retries are the SDK's; what still fails is a
ModelError with its HTTP status.
"""

from __future__ import annotations

from typing import Any, Literal

import openai
from kg_mcp.agents.models.base import Model, ModelError, Sampling, Usage
from kg_mcp.agents.models.completion import TextModel, TextPrompt, TextReply, cut_at_stop
from kg_mcp.agents.models.openai_chat import OpenAIChatModel, model_error, openai_client, sampling_options

Mode = Literal["completions", "chat"]
CONTINUE_FIELDS = {"continue_final_message": True, "add_generation_prompt": False}
_REJECTED = (400, 422)


class OpenAITextModel(TextModel, Model):
    """A text-continuing model behind an OpenAI-compatible server (see the module doc for the modes).

    It is also a `Model` so that `get_model` can hand it out, but it only continues text: chat
    turns with tools are refused with a ModelError that says so.
    """

    def __init__(
        self,
        name: str,
        *,
        mode: Mode = "completions",
        base_url: str | None = None,
        api_key: str | None = None,
        max_retries: int = 4,
        timeout: float | None = None,
        client: openai.AsyncOpenAI | None = None,
    ):
        self.name = name
        self.mode = mode
        self.client = client or openai_client(f"openai-completions:{name}", base_url, api_key, max_retries, timeout)
        self.continue_fields_supported = True  # until a server says otherwise (chat mode)

    @classmethod
    def from_chat_model(cls, model: OpenAIChatModel) -> OpenAITextModel:
        """Chat mode over the same client (base URL, key, retries) as an `openai:NAME` model."""
        return cls(model.name, mode="chat", client=model.client)

    async def aclose(self) -> None:
        await self.client.close()

    async def complete(self, messages, *, tools=None, sampling=None, json_schema=None):
        raise ModelError(
            f"{self.name}: a text-completion model (openai-completions:) continues text for --agent kgr only; "
            "use openai:NAME for the chat-based agents"
        )

    async def generate(self, prompt: TextPrompt, *, stop: list[str], sampling: Sampling | None = None) -> TextReply:
        options = {"model": self.name, "stop": list(stop), **sampling_options(sampling or Sampling())}
        if self.mode == "completions":
            completion = await self._call(self.client.completions.create, {**options, "prompt": prompt.flat})
            choice = _first_choice(completion)
            return _reply(choice.text or "", choice, completion, stop)
        messages = [{"role": m.role, "content": m.content} for m in prompt.messages()]
        request = {**options, "messages": messages}
        if self.continue_fields_supported:
            try:
                completion = await self._call(self.client.chat.completions.create, {**request, "extra_body": CONTINUE_FIELDS})
            except ModelError as e:
                if getattr(e, "status", None) not in _REJECTED:
                    raise
                completion = await self._call(self.client.chat.completions.create, request)
                # Only now is it clear that the 400 was about the continuation fields.
                self.continue_fields_supported = False
        else:
            completion = await self._call(self.client.chat.completions.create, request)
        choice = _first_choice(completion)
        return _reply(choice.message.content or "", choice, completion, stop)

    async def _call(self, create, request: dict[str, Any]) -> Any:
        try:
            return await create(**request)
        except openai.APIError as e:
            raise model_error(f"openai-completions:{self.name}" if self.mode == "completions" else f"openai:{self.name}", e) from e


def _first_choice(completion: Any) -> Any:
    if not getattr(completion, "choices", None):
        raise ModelError(f"the server's reply has no choices: {completion!r:.300}")
    return completion.choices[0]


def _reply(text: str, choice: Any, completion: Any, stop: list[str]) -> TextReply:
    usage = completion.usage
    counted = Usage(
        input_tokens=(getattr(usage, "prompt_tokens", None) or 0) if usage else 0,
        output_tokens=(getattr(usage, "completion_tokens", None) or 0) if usage else 0,
        requests=1,
    )
    text, cut = cut_at_stop(text, stop)
    if cut is not None:  # the server ignored `stop`
        return TextReply(text, "stop", cut, usage=counted)
    finish = choice.finish_reason or "stop"
    if finish == "length":
        return TextReply(text, "length", usage=counted)
    extra = getattr(choice, "model_extra", None) or {}
    if "stop_reason" in extra:  # vLLM: the stop string that matched, or null / a token id for end of text
        said = extra["stop_reason"]
        if isinstance(said, str) and said in stop:
            return TextReply(text, "stop", said, usage=counted)
        return TextReply(text, "stop", None, ended=True, usage=counted)
    return TextReply(text, "stop", None, usage=counted)


def text_model_for(model: Model | TextModel) -> TextModel:
    """The text model a driver needs, from whatever `get_model` gave.

    A text model as it is; an `openai:NAME` chat model in chat mode over its own client; any
    other chat model through `ChatAsText`.
    """
    from kg_mcp.agents.models.completion import ChatAsText

    if isinstance(model, TextModel):
        return model
    if isinstance(model, OpenAIChatModel):
        return OpenAITextModel.from_chat_model(model)
    return ChatAsText(model)
