"""A fake model provider on loopback that speaks the OpenAI Chat Completions and Anthropic Messages JSON.

Point the real SDKs (our adapters) at it to test whole agent runs without a network::

    from providers import FakeProvider, error, replies
    from kg_mcp.agents.models import Reply, get_model
    from kg_mcp.agents.models.scripted import call

    with FakeProvider(replies(Reply("", [call("search", entity="kg:Jaws")]), "Final answer: 1975")) as fake:
        model = get_model("openai:fake", base_url=fake.base_url_openai)         # or
        model = get_model("anthropic:fake", base_url=fake.base_url_anthropic)
        ...
        assert fake.requests[-1].messages()[-1].role == "tool"

A *policy* decides every answer. It is called with one `Request` (`.api` is "openai" or
"anthropic", `.body` the JSON body as a dict, `.messages()` the conversation parsed back into
provider-neutral `Message`s) and returns a `Reply` (or a plain string: a text reply), which the
server writes in that API's JSON, or an `HTTPReply` for an error or any literal answer
(`error(429, retry_after=1)`, `error(500)`, `error(400, "bad response_format")`).

Endpoints: POST /v1/chat/completions (OpenAI), POST /v1/messages (Anthropic), and POST
/v1/completions (OpenAI's text completions, answered as vLLM does: cut at `stop`, `stop_reason` set). Every request is
recorded in `fake.requests` (headers with lower-case names, body) in arrival order. A policy that
raises is answered with a 400 (which SDKs do not retry) carrying the exception's text, and the
exception is kept in `fake.errors`.
"""

from __future__ import annotations

import functools
import itertools
import json
import threading
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from kg_mcp.agents.models.base import Message, Reply, ToolCall

Api = Literal["openai", "anthropic"]
ROUTES: dict[str, Api] = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic", "/v1/completions": "openai"}


@dataclass
class HTTPReply:
    """A literal answer: `status`, `headers`, and `body` (a dict is sent as JSON).

    With no body, the server writes that API's error JSON carrying `message`.
    """

    status: int
    message: str = "fake provider error"
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] | str | None = None


def error(
    status: int, message: str = "fake provider error", *, retry_after: float | None = None
) -> HTTPReply:
    """An error answer in the API's own shape; `retry_after` (seconds) adds a Retry-After header."""
    headers = {} if retry_after is None else {"Retry-After": f"{retry_after:g}"}
    return HTTPReply(status, message, headers)


@dataclass
class Request:
    """One request the server received."""

    api: Api
    path: str
    headers: dict[str, str]  # names in lower case
    body: dict[str, Any]

    def messages(self) -> list[Message]:
        """The conversation in the request, as provider-neutral messages (tool results named)."""
        parsed = openai_messages(self.body) if self.api == "openai" else anthropic_messages(self.body)
        return name_tool_results(parsed)

    def tool_names(self) -> list[str]:
        """Names of the tools offered."""
        if self.api == "openai":
            return [t["function"]["name"] for t in self.body.get("tools", [])]
        return [t["name"] for t in self.body.get("tools", [])]


Policy = Callable[[Request], "Reply | HTTPReply | str"]


def replies(*items: Reply | HTTPReply | str) -> Policy:
    """A policy that answers with `items` in order, then with a 400 saying the queue is empty."""
    queue: deque[Reply | HTTPReply | str] = deque(items)
    lock = threading.Lock()

    def policy(request: Request) -> Reply | HTTPReply | str:
        with lock:
            if queue:
                return queue.popleft()
        return error(400, "fake provider: no reply left in the queue")

    return policy


class FakeProvider:
    """The server. A context manager; `start()`/`close()` for fixtures that prefer them."""

    def __init__(self, policy: Policy | Iterable[Reply | HTTPReply | str] = ()):
        self.policy: Policy = policy if callable(policy) else replies(*policy)
        self.requests: list[Request] = []
        self.errors: list[BaseException] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url_openai(self) -> str:
        """Base URL for the OpenAI SDK (it appends /chat/completions)."""
        return f"{self.origin}/v1"

    @property
    def base_url_anthropic(self) -> str:
        """Base URL for the Anthropic SDK (it appends /v1/messages)."""
        return self.origin

    @property
    def origin(self) -> str:
        if self._server is None:
            raise RuntimeError("FakeProvider is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> FakeProvider:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, and tests close servers often.
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-provider",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def answer(self, request: Request) -> tuple[int, dict[str, str], bytes]:
        """(status, headers, body) for one request: record it, ask the policy, render its answer."""
        with self._lock:
            self.requests.append(request)
            serial = next(self._ids)
        try:
            outcome = self.policy(request)
        except Exception as e:  # noqa: BLE001 - the test must see it, not a hung client
            self.errors.append(e)
            outcome = error(400, f"fake provider: the policy raised {type(e).__name__}: {e}")
        if isinstance(outcome, str):
            outcome = Reply(text=outcome)
        if isinstance(outcome, HTTPReply):
            body = outcome.body if outcome.body is not None else error_body(request.api, outcome)
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            return outcome.status, {"Content-Type": "application/json", **outcome.headers}, data
        render = openai_reply if request.api == "openai" else anthropic_reply
        if request.path.split("?")[0] == "/v1/completions":
            render = functools.partial(completions_reply, stop=request.body.get("stop"))
        data = json.dumps(render(outcome, model=request.body.get("model", "fake"), serial=serial)).encode()
        return 200, {"Content-Type": "application/json"}, data


class _Handler(BaseHTTPRequestHandler):
    fake: FakeProvider

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        api = ROUTES.get(self.path.split("?")[0])
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if api is None:
            missing = b'{"error": {"message": "no such endpoint"}}'
            self._send(404, {"Content-Type": "application/json"}, missing)
            return
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_unparsed": raw.decode(errors="replace")}
        headers = {k.lower(): v for k, v in self.headers.items()}
        self._send(*self.fake.answer(Request(api=api, path=self.path, headers=headers, body=body)))

    def _send(self, status: int, headers: dict[str, str], data: bytes) -> None:
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - keep test output clean
        pass


# --- rendering replies -------------------------------------------------------------------------

_ANTHROPIC_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    529: "overloaded_error",
}


def error_body(api: Api, reply: HTTPReply) -> dict[str, Any]:
    if api == "openai":
        return {"error": {"message": reply.message, "type": "fake_error", "param": None, "code": None}}
    kind = _ANTHROPIC_ERROR_TYPES.get(reply.status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": reply.message}}


def _stop_reason(reply: Reply, *, default: str, tools: str) -> str:
    # Reply's default "stop" means "whatever this API says for a normal end".
    if reply.stop_reason != "stop":
        return reply.stop_reason
    return tools if reply.tool_calls else default


def openai_reply(reply: Reply, *, model: str, serial: int) -> dict[str, Any]:
    """A Reply as a Chat Completions response. A call's `malformed` text is sent as its arguments."""
    message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {
                    "name": c.name,
                    "arguments": c.malformed if c.malformed is not None else json.dumps(c.arguments),
                },
            }
            for c in reply.tool_calls
        ]
    return {
        "id": f"chatcmpl-fake-{serial}",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": _stop_reason(reply, default="stop", tools="tool_calls"),
                "logprobs": None,
            }
        ],
        "usage": {
            "prompt_tokens": reply.usage.input_tokens,
            "completion_tokens": reply.usage.output_tokens,
            "total_tokens": reply.usage.input_tokens + reply.usage.output_tokens,
            "prompt_tokens_details": {"cached_tokens": reply.usage.cached_input_tokens},
        },
    }


def completions_reply(reply: Reply, *, model: str, serial: int, stop: str | list[str] | None = None) -> dict[str, Any]:
    """A Reply as a (legacy) Completions response, the way vLLM answers one: the text is cut before
    the first of the request's `stop` sequences, and `stop_reason` names that sequence (null when
    the text ended by itself)."""
    sequences = [stop] if isinstance(stop, str) else list(stop or [])
    text, matched = reply.text, None
    found = [(i, s) for s in sequences if (i := text.find(s)) >= 0]
    if found:
        index, matched = min(found)
        text = text[:index]
    finish = "stop" if matched else _stop_reason(reply, default="stop", tools="stop")
    return {
        "id": f"cmpl-fake-{serial}",
        "object": "text_completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "text": text, "finish_reason": finish, "logprobs": None, "stop_reason": matched}],
        "usage": {
            "prompt_tokens": reply.usage.input_tokens,
            "completion_tokens": reply.usage.output_tokens,
            "total_tokens": reply.usage.input_tokens + reply.usage.output_tokens,
        },
    }


def anthropic_reply(reply: Reply, *, model: str, serial: int) -> dict[str, Any]:
    """A Reply as a Messages response. A call's `malformed` text is sent as its (string) input."""
    content: list[dict[str, Any]] = [{"type": "text", "text": reply.text}] if reply.text else []
    content += [
        {
            "type": "tool_use",
            "id": c.id,
            "name": c.name,
            "input": c.malformed if c.malformed is not None else c.arguments,
        }
        for c in reply.tool_calls
    ]
    return {
        "id": f"msg_fake_{serial}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": _stop_reason(reply, default="end_turn", tools="tool_use"),
        "stop_sequence": None,
        # The Messages API counts cache reads and writes apart from input_tokens.
        "usage": {
            "input_tokens": reply.usage.input_tokens - reply.usage.cached_input_tokens - reply.usage.cache_write_tokens,
            "output_tokens": reply.usage.output_tokens,
            "cache_read_input_tokens": reply.usage.cached_input_tokens,
            "cache_creation_input_tokens": reply.usage.cache_write_tokens,
        },
    }


# --- reading requests back -------------------------------------------------------------------


def _text(content: Any) -> str:
    """Text of a string or of a list of content parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content if isinstance(part, dict))


def openai_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    for m in body.get("messages", []):
        role = m.get("role")
        if role == "tool":
            out.append(Message("tool", _text(m.get("content")), tool_call_id=m.get("tool_call_id")))
        elif role == "assistant":
            calls = []
            for c in m.get("tool_calls") or []:
                raw = c["function"].get("arguments") or "{}"
                try:
                    arguments, malformed = json.loads(raw), None
                except ValueError:
                    arguments, malformed = {}, raw
                calls.append(ToolCall(c.get("id", ""), c["function"]["name"], arguments, malformed))
            out.append(Message("assistant", _text(m.get("content")), tool_calls=calls))
        else:
            # "developer" is OpenAI's newer name for system.
            out.append(Message("system" if role == "developer" else role, _text(m.get("content"))))
    return out


def anthropic_messages(body: dict[str, Any]) -> list[Message]:
    out: list[Message] = []
    if body.get("system"):
        out.append(Message("system", _text(body["system"])))
    for m in body.get("messages", []):
        blocks = m.get("content")
        if isinstance(blocks, str):
            blocks = [{"type": "text", "text": blocks}]
        if m.get("role") == "assistant":
            uses = [b for b in blocks if b.get("type") == "tool_use"]
            calls = [ToolCall(b["id"], b["name"], b.get("input") or {}) for b in uses]
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            out.append(Message("assistant", text, tool_calls=calls))
            continue
        for b in blocks:  # a user turn: tool results and text, each its own message, in order
            if b.get("type") == "tool_result":
                out.append(
                    Message(
                        "tool",
                        _text(b.get("content")),
                        tool_call_id=b.get("tool_use_id"),
                        is_error=bool(b.get("is_error")),
                    )
                )
            elif b.get("type") == "text":
                out.append(Message("user", b.get("text", "")))
    return out


def name_tool_results(messages: list[Message]) -> list[Message]:
    """Fill each tool result's `name` from the call it answers (the APIs send only the id)."""
    names = {c.id: c.name for m in messages for c in m.tool_calls}
    for m in messages:
        if m.role == "tool" and m.name is None:
            m.name = names.get(m.tool_call_id or "")
    return messages
