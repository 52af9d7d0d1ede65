"""TOKENS-*: count_tokens agrees with usage, and counts what it is given."""

from __future__ import annotations

from typing import Any

from conformance.catalogue import Level, prop
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_no_schema_errors,
    expect_status,
    json_object,
    read,
    status_key,
    status_subject,
)
from conformance.judging.schemas import validate_response
from conformance.wire.drivers import (
    TOOLS_NOT_COUNTED,
    create_json,
    message_body,
    sdk_call,
    total_input_tokens,
)
from conformance.wire.target import Target

COUNT = "api/messages-count-tokens"
PROMPT = [{"role": "user", "content": "Name three colours of the sea at dawn."}]
SYSTEM = "You are a poet who answers briefly."


def count(target: Target, **fields: Any) -> int:
    """input_tokens of a 200 count_tokens answer (its schema is TOKENS-004's to judge)."""
    body = {"model": target.model, "messages": PROMPT, **fields}
    response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
    expect_status(response, 200)
    value: int = read(json_object(response, "count_tokens body"), "input_tokens", int, where="count_tokens")
    expect(value > 0, "input_tokens > 0", value, reason="count")
    return value


def count_and_usage(target: Target) -> tuple[int, int]:
    """count_tokens of a prompt, and the total input usage of a create request with it."""
    counted = count(target, system=SYSTEM)
    message = create_json(target, message_body(target, messages=PROMPT, system=SYSTEM, max_tokens=4))
    used = total_input_tokens(read(message, "usage", dict, where="the Message"), where="usage")
    return counted, used


def tolerance(counted: int) -> int:
    """The "small amount" by which the docs let the count differ from usage: 2 tokens or 2 %."""
    return max(2, -(-counted * 2 // 100))


@prop(
    "TOKENS-001",
    Level.SHOULD,
    "count_tokens agrees with usage.input_tokens",
    url=f"{COUNT}#response-input-tokens",
    requirement="count_tokens returns the total input tokens of the messages, system prompt and "
    "tools. The docs call it an estimate that may differ from the input tokens of the same "
    "create request 'by a small amount': here at most 2 tokens or 2 %, whichever is more."
    " count_tokens is documented as an estimate that may differ 'by a small amount'; the 2-token / 2 % "
    "bound is this suite's reading of small, so this is a SHOULD.",
    invariant=51,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:system",
        "count_response:input_tokens",
        "request:system",
        "response:usage.input_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
    ),
)
def test_tokens_001_count_matches_usage(target: Target) -> None:
    counted, used = count_and_usage(target)
    expect(
        abs(used - counted) <= tolerance(counted),
        f"usage input (incl. cache) within {tolerance(counted)} of count_tokens {counted}",
        used,
        reason="count-mismatch",
    )


@prop(
    "TOKENS-007",
    Level.SHOULD,
    "count_tokens equals usage.input_tokens exactly",
    url=f"{COUNT}#response-input-tokens",
    requirement="A server that renders the prompt for counting exactly as for generation gives "
    "count_tokens equal to usage.input_tokens (incl. cache counters) of the same request; the "
    "real API only promises an estimate, so this is a SHOULD.",
    invariant=51,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:system",
        "count_response:input_tokens",
        "request:system",
        "response:usage.input_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
    ),
)
def test_tokens_007_count_exact(target: Target) -> None:
    counted, used = count_and_usage(target)
    expect_equal(used, counted, "usage input (incl. cache) of the same request", reason="count-mismatch")


@prop(
    "TOKENS-002",
    Level.MUST,
    "count_tokens grows with the conversation",
    url=f"{COUNT}#response-input-tokens",
    requirement="Adding a message never lowers input_tokens; adding text raises it.",
    source='docs: api/messages-count-tokens#response-input-tokens — input_tokens: "The total number of '
    'tokens across the provided list of messages, system prompt, and tools."',
    invariant=52,
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:messages",
        "count_response:input_tokens",
    ),
)
def test_tokens_002_monotonic(target: Target) -> None:
    base = count(target)
    longer = [
        *PROMPT,
        {"role": "assistant", "content": "Grey, silver and rose."},
        {"role": "user", "content": "Three more?"},
    ]
    grown = count(target, messages=longer)
    expect(
        grown > base,
        f"more than {base} tokens for a longer conversation",
        grown,
        reason="count-monotonic",
    )


@prop(
    "TOKENS-003",
    Level.MUST,
    "count_tokens counts the system prompt",
    url=f"{COUNT}#body-system",
    requirement="The count covers the system prompt: adding a system prompt raises input_tokens.",
    source='docs: api/messages-count-tokens#response-input-tokens — "The total number of tokens across '
    'the provided list of messages, system prompt, and tools."',
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:system",
        "count_response:input_tokens",
    ),
)
def test_tokens_003_counts_system(target: Target) -> None:
    base = count(target)
    with_system = count(target, system="You are a meticulous marine biologist. " * 8)
    expect(
        with_system > base,
        f"more than {base} tokens with a system prompt",
        with_system,
        reason="count-system",
    )


@prop(
    "TOKENS-004",
    Level.MUST,
    "The SDK's count_tokens works",
    url=f"{COUNT}",
    requirement="messages.count_tokens of the official SDK returns a MessageTokensCount whose "
    "input_tokens is a positive integer.",
    source="schema: OpenAPI CountMessageTokensResponse required [input_tokens] — input_tokens: integer "
    "(required)",
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_response:input_tokens",
    ),
)
def test_tokens_004_sdk_count(target: Target) -> None:
    """The property that judges the count_tokens body's schema (the others read input_tokens)."""
    response = target.request(
        "POST", "/v1/messages/count_tokens", json_body={"model": target.model, "messages": PROMPT}
    )
    expect_status(response, 200)
    expect_no_schema_errors(
        validate_response("POST /v1/messages/count_tokens", 200, expect_json(response)), "count_tokens body"
    )
    result = sdk_call(
        "messages.count_tokens",
        target.sdk().messages.count_tokens,
        model=target.model,
        messages=PROMPT,
    )
    expect(result.input_tokens > 0, "input_tokens > 0", result.input_tokens, reason="count")
    expect_equal(result.input_tokens, count(target), "SDK and raw counts", reason="count-mismatch")


@prop(
    "TOKENS-005",
    Level.MUST,
    "count_tokens rejects create-only fields",
    url=f"{COUNT}#body",
    requirement="count_tokens takes no max_tokens, stream or sampling fields (no additional "
    "properties): sending one is a 400.",
    source="schema: OpenAPI CountMessageTokensParams — additionalProperties: false, and no "
    "max_tokens, stream or sampling property",
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "error:invalid_request_error",
    ),
)
def test_tokens_005_rejects_create_fields(target: Target) -> None:
    body = {"model": target.model, "messages": PROMPT, "max_tokens": 16}
    response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
    expect_error(response, 400, "invalid_request_error")


@prop(
    "TOKENS-006",
    Level.MUST,
    "count_tokens validates like create",
    url=f"{COUNT}#body",
    requirement="count_tokens rejects what its schema rejects, as create does: a body without "
    "model or without messages, or with messages that is not a list, is a 400 "
    "invalid_request_error. (An unknown model and empty messages are ERR-010's and ERR-008's "
    "count_tokens sub-cases: the docs do not state them.)",
    source="schema: OpenAPI CountMessageTokensParams — required [messages, model]; messages: array",
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:model",
        "count_request:messages",
        "error:invalid_request_error",
    ),
)
def test_tokens_006_validates(target: Target) -> None:
    cases = Cases()
    for name, body in (
        ("without model", {"messages": PROMPT}),
        ("without messages", {"model": target.model}),
        ("messages not a list", {"model": target.model, "messages": {"role": "user", "content": "Hi"}}),
    ):
        with cases.case(name):
            expect_error(
                target.request("POST", "/v1/messages/count_tokens", json_body=body),
                400,
                "invalid_request_error",
            )
    cases.check()


def accepted(target: Target, what: str, **fields: Any) -> int:
    """count_tokens of PROMPT with `fields`: 200 and a positive count (the schema lists them)."""
    body = {"model": target.model, "messages": PROMPT, **fields}
    response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
    expect(
        response.status_code == 200,
        f"HTTP 200 for a count_tokens request with {what}",
        f"HTTP {response.status_code}: {response.text[:300]}",
        reason="field-refused",
        subject=status_subject(response),
        key=status_key(response),
    )
    value: int = read(json_object(response, "count_tokens body"), "input_tokens", int, where="count_tokens")
    expect(value > 0, "input_tokens > 0", value, reason="count")
    return value


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["red", "blue"]}},
    "required": ["colour"],
    "additionalProperties": False,
}
COUNT_TOOL: dict[str, Any] = {
    "type": "custom",
    "name": "record_colour",
    "description": "Record a colour.",
    "input_schema": COUNT_SCHEMA,
    "strict": True,
    "cache_control": {"type": "ephemeral", "ttl": "5m"},
    "eager_input_streaming": True,
    "allowed_callers": ["direct"],
    "input_examples": [{"colour": "red"}],
}


@prop(
    "TOKENS-008",
    Level.MUST,
    "count_tokens takes system blocks and cache_control",
    url=f"{COUNT}#body",
    requirement="count_tokens takes the prompt fields create takes: system as text blocks (with "
    "cache_control and its ttl) and the top-level cache_control (automatic caching); each "
    "request is a 200 with a count.",
    source="schema: OpenAPI CountMessageTokensParams — properties system (string or TextBlockParam "
    "array, cache_control on each block) and cache_control (CacheControlEphemeral {type, ttl})",
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:messages[].content",
        "count_request:messages[].role",
        "count_request:system[].text",
        "count_request:system[].type",
        "count_request:system[].cache_control",
        "count_request:system[].cache_control.type",
        "count_request:system[].cache_control.ttl",
        "count_request:cache_control",
        "count_request:cache_control.type",
        "count_request:cache_control.ttl",
        "count_response:input_tokens",
    ),
)
def test_tokens_008_prompt_fields(target: Target) -> None:
    cases = Cases()
    with cases.case("system blocks"):
        block = {"type": "text", "text": SYSTEM, "cache_control": {"type": "ephemeral", "ttl": "1h"}}
        accepted(target, "system text blocks", system=[block])
    with cases.case("cache_control"):
        accepted(target, "a top-level cache_control", cache_control={"type": "ephemeral", "ttl": "5m"})
    cases.check()


@prop(
    "TOKENS-009",
    Level.MUST,
    "count_tokens takes every field of a custom tool, and tool_choice",
    url=f"{COUNT}#body",
    requirement="count_tokens takes tools with every documented custom tool field (type, "
    "description, input_schema, strict, cache_control, eager_input_streaming, allowed_callers, "
    "input_examples) and tool_choice (type, name, disable_parallel_tool_use), and counts the "
    "tool: more tokens than without it.",
    source="schema: OpenAPI CountMessageTokensParams — tools (Tool: input_schema, name, "
    "description, strict, cache_control, eager_input_streaming, allowed_callers, input_examples, "
    "type) and tool_choice (ToolChoiceTool {type, name, disable_parallel_tool_use})",
    requires=("tools",),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:tools[].type",
        "count_request:tools[].name",
        "count_request:tools[].description",
        "count_request:tools[].input_schema",
        "count_request:tools[].input_schema.type",
        "count_request:tools[].input_schema.properties",
        "count_request:tools[].input_schema.required",
        "count_request:tools[].strict",
        "count_request:tools[].cache_control",
        "count_request:tools[].cache_control.type",
        "count_request:tools[].cache_control.ttl",
        "count_request:tools[].eager_input_streaming",
        "count_request:tools[].allowed_callers",
        "count_request:tools[].input_examples",
        "count_request:tool_choice",
        "count_request:tool_choice.type",
        "count_request:tool_choice.name",
        "count_request:tool_choice.disable_parallel_tool_use",
        "count_response:input_tokens",
    ),
)
def test_tokens_009_custom_fields(target: Target) -> None:
    choice = {"type": "tool", "name": "record_colour", "disable_parallel_tool_use": True}
    with_tool = accepted(target, "a custom tool with every field", tools=[COUNT_TOOL], tool_choice=choice)
    without = accepted(target, "no tools")
    expect(
        with_tool > without,
        f"more than {without} tokens with the tool",
        with_tool,
        reason="tools-not-counted",
        subject=TOOLS_NOT_COUNTED,
    )


@prop(
    "TOKENS-010",
    Level.MUST,
    "count_tokens takes thinking and output_config",
    url=f"{COUNT}#body",
    requirement="count_tokens takes thinking (type, budget_tokens, display) and output_config "
    "(effort, format {type: json_schema, schema}) as create does; each request is a 200.",
    source="schema: OpenAPI CountMessageTokensParams — properties thinking (ThinkingConfigParam) and "
    "output_config (OutputConfig {effort, format})",
    requires=("thinking", "structured_outputs"),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:thinking",
        "count_request:thinking.type",
        "count_request:thinking.budget_tokens",
        "count_request:thinking.display",
        "count_request:output_config",
        "count_request:output_config.effort",
        "count_request:output_config.format",
        "count_request:output_config.format.type",
        "count_request:output_config.format.schema",
        "count_response:input_tokens",
    ),
)
def test_tokens_010_reasoning_and_format(target: Target) -> None:
    cases = Cases()
    with cases.case("thinking"):
        accepted(
            target, "thinking", thinking={"type": "enabled", "budget_tokens": 1024, "display": "summarized"}
        )
    with cases.case("output_config"):
        output = {"effort": "low", "format": {"type": "json_schema", "schema": COUNT_SCHEMA}}
        accepted(target, "output_config", output_config=output)
    cases.check()


@prop(
    "TOKENS-011",
    Level.MUST,
    "count_tokens takes Anthropic's own tools with their options",
    url=f"{COUNT}#body",
    requirement="count_tokens takes the Anthropic-defined tools a target serves with their "
    "documented options: the text editor's max_characters, web fetch's allowed_domains or "
    "blocked_domains, max_uses, max_content_tokens, citations and use_cache, a tool search with a "
    "deferred tool; each request is a 200.",
    source="schema: OpenAPI CountMessageTokensParams — tools: TextEditor20250728 {max_characters}, "
    "WebFetchTool20260309 {allowed_domains, blocked_domains, citations, max_content_tokens, "
    "max_uses, use_cache}, ToolSearchToolRegex20251119, Tool {defer_loading}",
    requires=("builtin_tools", "web_fetch", "tool_search"),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:tools[].max_characters",
        "count_request:tools[].allowed_domains",
        "count_request:tools[].blocked_domains",
        "count_request:tools[].max_uses",
        "count_request:tools[].max_content_tokens",
        "count_request:tools[].citations",
        "count_request:tools[].citations.enabled",
        "count_request:tools[].use_cache",
        "count_request:tools[].url_sources",
        "count_request:tools[].url_sources.user_input",
        "count_request:tools[].url_sources.client_tool_results",
        "count_request:tools[].url_sources.server_tool_results",
        "count_request:tools[].defer_loading",
        "count_response:input_tokens",
    ),
)
def test_tokens_011_anthropic_fields(target: Target) -> None:
    editor = {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 2000}
    fetch = {
        "type": "web_fetch_20260309",
        "name": "web_fetch",
        "max_uses": 2,
        "max_content_tokens": 4000,
        "citations": {"enabled": False},
        "use_cache": True,
        "url_sources": {
            "user_input": {"type": "all"},
            "client_tool_results": {"type": "none"},
            "server_tool_results": {"type": "all"},
        },
    }
    search = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
    deferred = {**COUNT_TOOL, "defer_loading": True}
    cases = Cases()
    with cases.case("allowed_domains"):
        tools = [editor, {**fetch, "allowed_domains": ["example.com"]}, search, deferred]
        accepted(target, "the text editor, web fetch (allowed_domains) and tool search", tools=tools)
    with cases.case("blocked_domains"):
        accepted(target, "web fetch (blocked_domains)", tools=[{**fetch, "blocked_domains": ["example.org"]}])
    cases.check()
