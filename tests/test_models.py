"""The OpenAI and Anthropic adapters, through the real SDKs, against the loopback fake provider."""

from __future__ import annotations

import json
import time

import pytest
from kg_mcp.agents.models import Message, ModelError, Reply, Sampling, ToolCall, ToolSpec, Usage, get_model
from kg_mcp.agents.models.anthropic_messages import AnthropicModel
from kg_mcp.agents.models.openai_chat import OpenAIChatModel
from kg_mcp.agents.models.scripted import call
from providers import FakeProvider, HTTPReply, Request, error, replies

APIS = ["openai", "anthropic"]
KEY = "sk-test-123"
SEARCH = ToolSpec("search", "Find.", {"type": "object", "properties": {"q": {"type": "string"}}})
LOOKUP = ToolSpec("lookup", "Facts.", {"type": "object", "properties": {"id": {"type": "string"}}})
SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    """A developer's own keys and URLs must not leak into these tests."""
    for name in (
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "OPENAI_CUSTOM_HEADERS",
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_CUSTOM_HEADERS",
    ):
        monkeypatch.delenv(name, raising=False)


def model_for(api: str, fake: FakeProvider, *, max_retries: int = 2, api_key: str | None = KEY):
    base_url = fake.base_url_openai if api == "openai" else fake.base_url_anthropic
    return get_model(f"{api}:fake-model", base_url=base_url, api_key=api_key, max_retries=max_retries)


def user(text: str) -> list[Message]:
    return [Message("user", text)]


# --- replies -----------------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_text_reply_with_usage(api):
    with FakeProvider([Reply("Paris.", usage=Usage(input_tokens=12, output_tokens=3))]) as fake:
        reply = await model_for(api, fake).complete(user("Capital of France?"))
    assert reply.text == "Paris."
    assert reply.tool_calls == []
    assert reply.usage == Usage(12, 3, 1)
    assert reply.stop_reason == ("stop" if api == "openai" else "end_turn")
    assert fake.requests[0].body["model"] == "fake-model"


@pytest.mark.parametrize("api", APIS)
async def test_missing_usage_counts_zero_tokens(api):
    raw = {
        "openai": {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}
            ],
        },
        "anthropic": {
            "id": "x",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
        },
    }[api]
    with FakeProvider([HTTPReply(200, body=raw)]) as fake:
        reply = await model_for(api, fake).complete(user("hello"))
    assert reply.text == "hi"
    assert reply.usage == Usage(0, 0, 1)


@pytest.mark.parametrize("api", APIS)
async def test_two_tool_calls_then_two_results(api):
    first = Reply("Let me look.", [call("search", q="Jaws"), call("lookup", id="kg:Jaws")])
    with FakeProvider([first, "Released in 1975."]) as fake:
        model = model_for(api, fake)
        conversation = [Message("system", "You answer questions."), Message("user", "When was Jaws out?")]
        reply = await model.complete(conversation, tools=[SEARCH, LOOKUP])
        assert [(c.name, c.arguments) for c in reply.tool_calls] == [
            ("search", {"q": "Jaws"}),
            ("lookup", {"id": "kg:Jaws"}),
        ]
        assert all(c.malformed is None for c in reply.tool_calls)
        assert reply.stop_reason == ("tool_calls" if api == "openai" else "tool_use")
        a, b = reply.tool_calls
        conversation += [
            reply.as_message(),
            Message("tool", '["kg:Jaws"]', tool_call_id=a.id, name="search"),
            Message("tool", "no such entity", tool_call_id=b.id, name="lookup", is_error=True),
        ]
        final = await model.complete(conversation, tools=[SEARCH, LOOKUP])
    assert final.text == "Released in 1975."

    sent = fake.requests[1].body
    if api == "openai":
        assert [m["role"] for m in sent["messages"]] == ["system", "user", "assistant", "tool", "tool"]
        assistant = sent["messages"][2]
        assert assistant["content"] == "Let me look."
        assert [
            (c["id"], c["type"], c["function"]["name"], json.loads(c["function"]["arguments"]))
            for c in assistant["tool_calls"]
        ] == [(a.id, "function", "search", {"q": "Jaws"}), (b.id, "function", "lookup", {"id": "kg:Jaws"})]
        assert [(m["tool_call_id"], m["content"]) for m in sent["messages"][3:]] == [
            (a.id, '["kg:Jaws"]'),
            (b.id, "no such entity"),
        ]
        assert [t["function"]["name"] for t in sent["tools"]] == ["search", "lookup"]
        assert sent["tools"][0] == {
            "type": "function",
            # as published: the optional argument stays optional (strict mode: tests/test_strict_tools.py)
            "function": {"name": "search", "description": "Find.", "parameters": SEARCH.input_schema},
        }
    else:
        assert sent["system"] == [{"type": "text", "text": "You answer questions.", "cache_control": {"type": "ephemeral"}}]
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        assert sent["messages"][1]["content"] == [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": a.id, "name": "search", "input": {"q": "Jaws"}},
            {"type": "tool_use", "id": b.id, "name": "lookup", "input": {"id": "kg:Jaws"}},
        ]
        assert sent["messages"][2]["content"] == [
            {"type": "tool_result", "tool_use_id": a.id, "content": '["kg:Jaws"]'},
            {"type": "tool_result", "tool_use_id": b.id, "content": "no such entity", "is_error": True},
        ]
        assert sent["tools"][0] == {
            "name": "search",
            "description": SEARCH.description,
            "input_schema": SEARCH.input_schema,
        }

    # The fake reads either API back into neutral messages, tool results named by their calls.
    neutral = fake.requests[1].messages()
    assert [m.role for m in neutral] == ["system", "user", "assistant", "tool", "tool"]
    assert [(m.name, m.is_error) for m in neutral[3:]] == [
        ("search", False),
        ("lookup", api == "anthropic"),  # OpenAI's tool messages have no error flag
    ]
    assert fake.requests[1].tool_names() == ["search", "lookup"]


async def test_anthropic_merges_user_text_after_tool_results():
    with FakeProvider(["ok"]) as fake:
        conversation = [
            Message("user", "q"),
            Message("assistant", "", tool_calls=[ToolCall("t1", "search", {})]),
            Message("tool", "[]", tool_call_id="t1"),
            Message("user", "Two steps left."),
        ]
        await model_for("anthropic", fake).complete(conversation, tools=[SEARCH])
    turns = fake.requests[0].body["messages"]
    assert [t["role"] for t in turns] == ["user", "assistant", "user"]
    assert turns[1]["content"] == [{"type": "tool_use", "id": "t1", "name": "search", "input": {}}]
    assert [b["type"] for b in turns[2]["content"]] == ["tool_result", "text"]


@pytest.mark.parametrize("api", APIS)
async def test_malformed_tool_arguments_are_kept_raw(api):
    bad = ToolCall("c1", "search", {}, malformed='{"q": "Jaws"')
    with FakeProvider([Reply("", [bad, call("lookup", id="x")])]) as fake:
        reply = await model_for(api, fake).complete(user("q"), tools=[SEARCH, LOOKUP])
    first, second = reply.tool_calls
    assert (first.name, first.arguments, first.malformed) == ("search", {}, '{"q": "Jaws"')
    assert (second.arguments, second.malformed) == ({"id": "x"}, None)


async def test_openai_empty_arguments_mean_no_arguments():
    with FakeProvider([Reply("", [ToolCall("c1", "search", {}, malformed="")])]) as fake:
        reply = await model_for("openai", fake).complete(user("q"), tools=[SEARCH])
    assert (reply.tool_calls[0].arguments, reply.tool_calls[0].malformed) == ({}, None)


async def test_openai_sends_malformed_arguments_back_as_written():
    bad = ToolCall("c1", "search", {}, malformed="{oops")
    with FakeProvider(["ok"]) as fake:
        conversation = [
            *user("q"),
            Message("assistant", "", tool_calls=[bad]),
            Message("tool", "bad JSON", tool_call_id="c1"),
        ]
        await model_for("openai", fake).complete(conversation, tools=[SEARCH])
    assistant = fake.requests[0].body["messages"][1]
    assert assistant["content"] is None
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{oops"


# --- request settings ---------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_sampling_reaches_the_request(api):
    with FakeProvider(["a", "b"]) as fake:
        model = model_for(api, fake)
        await model.complete(user("q"), sampling=Sampling(temperature=0.3, top_p=0.9, seed=7, max_tokens=123))
        await model.complete(user("q"))
    full, default = fake.requests[0].body, fake.requests[1].body
    assert (full["temperature"], full["top_p"], full["max_tokens"]) == (0.3, 0.9, 123)
    if api == "openai":
        assert full["seed"] == 7
    else:
        assert "seed" not in full  # the Messages API has none
    # Unset settings are left to the server; max_tokens always has a value.
    assert not {"temperature", "top_p", "seed"} & default.keys()
    assert default["max_tokens"] == 2048
    assert "tools" not in default


@pytest.mark.parametrize("api", APIS)
async def test_api_key_is_sent(api):
    with FakeProvider(["ok"]) as fake:
        await model_for(api, fake).complete(user("q"))
    headers = fake.requests[0].headers
    if api == "openai":
        assert headers["authorization"] == f"Bearer {KEY}"
    else:
        # Older SDKs send x-api-key; the installed one sends the key as a bearer token.
        assert headers.get("x-api-key") == KEY or headers.get("authorization") == f"Bearer {KEY}"
        assert "anthropic-version" in headers


@pytest.mark.parametrize("api", APIS)
async def test_keys_from_the_environment(api, monkeypatch):
    monkeypatch.setenv(f"{api.upper()}_API_KEY", "sk-from-env")
    with FakeProvider(["ok"]) as fake:
        await model_for(api, fake, api_key=None).complete(user("q"))
    headers = fake.requests[0].headers
    assert "sk-from-env" in (headers.get("authorization", "") + headers.get("x-api-key", ""))


@pytest.mark.parametrize("api", APIS)
async def test_base_url_from_the_environment_needs_no_key(api, monkeypatch):
    with FakeProvider(["from env"]) as fake:
        url = fake.base_url_openai if api == "openai" else fake.base_url_anthropic
        monkeypatch.setenv(f"{api.upper()}_BASE_URL", url)
        model = get_model(f"{api}:local", max_retries=0)
        reply = await model.complete(user("q"))
    assert reply.text == "from env"
    assert len(fake.requests) == 1


@pytest.mark.parametrize("api", APIS)
def test_no_key_and_no_base_url_is_a_clear_error(api):
    with pytest.raises(ModelError, match=f"{api.upper()}_API_KEY"):
        get_model(f"{api}:x")


# --- structured output ------------------------------------------------------------------------


async def test_openai_json_schema_uses_response_format():
    with FakeProvider(['{"answer": "1975"}']) as fake:
        reply = await model_for("openai", fake).complete(user("When?"), json_schema=SCHEMA)
    assert json.loads(reply.text) == {"answer": "1975"}
    assert fake.requests[0].body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "reply", "schema": SCHEMA, "strict": False},
    }


async def test_anthropic_json_schema_forces_the_respond_tool():
    forced = Reply("", [ToolCall("r1", "respond", {"answer": "1975"})])
    with FakeProvider([forced]) as fake:
        reply = await model_for("anthropic", fake).complete(user("When?"), tools=[SEARCH], json_schema=SCHEMA)
    assert json.loads(reply.text) == {"answer": "1975"}
    assert reply.tool_calls == []
    assert reply.stop_reason == "end_turn"
    body = fake.requests[0].body
    assert body["tool_choice"] == {"type": "tool", "name": "respond"}
    assert [t["name"] for t in body["tools"]] == ["search", "respond"]
    assert body["tools"][1]["input_schema"] == SCHEMA


async def test_openai_falls_back_when_response_format_is_rejected():
    def policy(request: Request):
        if "response_format" in request.body:
            return error(400, "response_format is not supported")
        return 'Sure: ```json\n{"answer": "1975"}\n```'

    with FakeProvider(policy) as fake:
        model = model_for("openai", fake)
        reply = await model.complete(user("When?"), json_schema=SCHEMA)
        assert json.loads(reply.text) == {"answer": "1975"}
        assert len(fake.requests) == 2
        retry = fake.requests[1].body
        assert "response_format" not in retry
        # The schema is asked for in the last user message, not in a new turn.
        assert [m["role"] for m in retry["messages"]] == ["user"]
        assert retry["messages"][0]["content"].startswith("When?")
        assert json.dumps(SCHEMA) in retry["messages"][0]["content"]

        # The model remembers: the next structured request goes straight to the prompt form.
        await model.complete(user("Again?"), json_schema=SCHEMA)
    assert len(fake.requests) == 3
    assert "response_format" not in fake.requests[2].body


async def test_openai_other_400s_are_errors_and_keep_response_format():
    with FakeProvider(lambda request: error(400, "context too long")) as fake:
        model = model_for("openai", fake)
        with pytest.raises(ModelError, match="HTTP 400.*context too long") as caught:
            await model.complete(user("q"), json_schema=SCHEMA)
    assert caught.value.status == 400
    assert len(fake.requests) == 2  # the one fallback try, no more
    assert isinstance(model, OpenAIChatModel) and model.response_format_supported


# --- failures and retries ------------------------------------------------------------------------


@pytest.mark.parametrize("api", APIS)
async def test_rate_limit_is_retried_after_retry_after(api):
    with FakeProvider([error(429, "slow down", retry_after=1), "ok"]) as fake:
        started = time.monotonic()
        reply = await model_for(api, fake).complete(user("q"))
        waited = time.monotonic() - started
    assert reply.text == "ok"
    assert len(fake.requests) == 2
    assert waited >= 0.9  # the SDK honoured Retry-After
    assert fake.requests[1].headers.get("x-stainless-retry-count") == "1"


@pytest.mark.parametrize("api", APIS)
async def test_server_errors_become_model_error_after_retries(api):
    with FakeProvider(lambda request: error(500, "boom")) as fake:
        with pytest.raises(ModelError, match="HTTP 500.*boom") as caught:
            await model_for(api, fake, max_retries=2).complete(user("q"))
    assert caught.value.status == 500
    assert len(fake.requests) == 3  # one try and two retries


@pytest.mark.parametrize("api", APIS)
async def test_a_failing_policy_is_reported(api):
    def policy(request: Request):
        raise AssertionError("unexpected request")

    with FakeProvider(policy) as fake:
        with pytest.raises(ModelError, match="unexpected request"):
            await model_for(api, fake).complete(user("q"))
    assert len(fake.requests) == 1  # a 400 is not retried
    assert isinstance(fake.errors[0], AssertionError)


async def test_an_empty_queue_is_an_error():
    with FakeProvider(replies()) as fake:
        with pytest.raises(ModelError, match="no reply left"):
            await model_for("openai", fake).complete(user("q"))


async def test_connection_refused_is_a_model_error():
    with FakeProvider() as fake:
        url = fake.base_url_openai
    model = get_model("openai:x", base_url=url, max_retries=0)
    with pytest.raises(ModelError) as caught:
        await model.complete(user("q"))
    assert caught.value.status is None


# --- naming ---------------------------------------------------------------------------------------


def test_get_model_picks_the_adapter():
    assert isinstance(get_model("openai:x", base_url="http://127.0.0.1:9/v1"), OpenAIChatModel)
    assert isinstance(get_model("anthropic:y", base_url="http://127.0.0.1:9"), AnthropicModel)
    assert get_model("openai:gpt-x", api_key="k").name == "gpt-x"
    with pytest.raises(ValueError, match="unknown model provider"):
        get_model("mystery:z")


# --- the prompt cache: the system prompt and tools once per run, not in full per question ---------


async def test_anthropic_marks_the_system_prompt_and_tools_for_the_prompt_cache():
    reply = Reply("ok", usage=Usage(1200, 5, 1, cached_input_tokens=1000))
    with FakeProvider([reply, reply]) as fake:
        model = model_for("anthropic", fake)
        for question in ("Who directed Jaws?", "When was Jaws released?"):
            got = await model.complete([Message("system", "You answer from the KG."), Message("user", question)], tools=[SEARCH])
    first, second = (r.body for r in fake.requests)
    assert first["system"] == [{"type": "text", "text": "You answer from the KG.", "cache_control": {"type": "ephemeral"}}]
    assert first["system"] == second["system"] and first["tools"] == second["tools"]  # the same prefix
    assert (got.usage.input_tokens, got.usage.cached_input_tokens) == (1200, 1000)  # 200 in full, 1,000 read


async def test_openai_asks_for_one_cache_key_per_system_prompt_and_tools():
    reply = Reply("ok", usage=Usage(1500, 5, 1, cached_input_tokens=1024))
    with FakeProvider([reply, reply, reply, reply]) as fake:
        keyed = OpenAIChatModel("fake", base_url=fake.base_url_openai, api_key=KEY, prompt_cache_key=True)
        for system, question in (("S1", "q1"), ("S1", "q2"), ("S2", "q1")):
            got = await keyed.complete([Message("system", system), Message("user", question)], tools=[SEARCH])
        await model_for("openai", fake).complete(user("q"))  # another server than OpenAI's: no key by default
    keys = [r.body.get("prompt_cache_key") for r in fake.requests]
    assert keys[0] == keys[1] != keys[2] and keys[0].startswith("kg-mcp-") and keys[3] is None
    assert (got.usage.input_tokens, got.usage.cached_input_tokens) == (1500, 1024)


def test_cached_prompt_tokens_cost_less():
    from kg_mcp.agents.evaluation.prices import PRICES, run_cost

    price = PRICES["claude-sonnet-4-5"]
    assert price.cost(1_000_000, 0) == pytest.approx(3.00)
    assert price.cost(1_000_000, 0, cached=900_000) == pytest.approx(0.30 + 0.27)
    assert price.cost(1_000_000, 0, written=1_000_000) == pytest.approx(3.75)
    usage = {"model": {"input_tokens": 1_000_000, "output_tokens": 0, "cached_input_tokens": 1_000_000}}
    assert run_cost(usage, {"model": "openai:gpt-4o-mini"}) == pytest.approx(0.075)
