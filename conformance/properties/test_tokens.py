"""TOKENS-*: count_tokens agrees with usage, and counts what it is given."""

from __future__ import annotations

from typing import Any

from conformance.catalogue import Level, prop
from conformance.checks import (
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_no_schema_errors,
    expect_status,
)
from conformance.drivers import create_json, message_body, sdk_call, total_input_tokens
from conformance.schemas import validate_response
from conformance.target import Target

COUNT = "api/messages-count-tokens"
PROMPT = [{"role": "user", "content": "Name three colours of the sea at dawn."}]


def count(target: Target, **fields: Any) -> int:
    body = {"model": target.model, "messages": PROMPT, **fields}
    response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
    expect_status(response, 200)
    payload = expect_json(response)
    expect_no_schema_errors(
        validate_response("POST /v1/messages/count_tokens", 200, payload), "count_tokens body"
    )
    value = payload.get("input_tokens") if isinstance(payload, dict) else None
    expect(isinstance(value, int) and value > 0, "input_tokens an integer > 0", payload, reason="count")
    return int(value)  # type: ignore[arg-type]


@prop(
    "TOKENS-001",
    Level.MUST,
    "count_tokens equals usage.input_tokens",
    url=f"{COUNT}#response-input-tokens",
    requirement="count_tokens returns the total input tokens of the messages, system prompt and "
    "tools: without prompt caching this equals usage.input_tokens of the same create request.",
    invariant=51,
)
def test_tokens_001_count_matches_usage(target: Target) -> None:
    system = "You are a poet who answers briefly."
    counted = count(target, system=system)
    usage = create_json(target, message_body(target, messages=PROMPT, system=system, max_tokens=4))["usage"]
    total = total_input_tokens(usage)
    expect_equal(total, counted, "usage input (incl. cache) of the same request", reason="count-mismatch")


@prop(
    "TOKENS-002",
    Level.MUST,
    "count_tokens grows with the conversation",
    url=f"{COUNT}#response-input-tokens",
    requirement="Adding a message never lowers input_tokens; adding text raises it.",
    invariant=52,
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
)
def test_tokens_004_sdk_count(target: Target) -> None:
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
    Level.SHOULD,
    "count_tokens rejects create-only fields",
    url=f"{COUNT}#body",
    requirement="count_tokens takes no max_tokens, stream or sampling fields (no additional "
    "properties): sending one is a 400.",
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
    requirement="count_tokens rejects what create rejects: empty messages are a 400, an unknown model a 404.",
)
def test_tokens_006_validates(target: Target) -> None:
    empty = {"model": target.model, "messages": []}
    expect_error(
        target.request("POST", "/v1/messages/count_tokens", json_body=empty),
        400,
        "invalid_request_error",
    )
    unknown = {"model": "plumbline-no-such-model-0000", "messages": PROMPT}
    expect_error(
        target.request("POST", "/v1/messages/count_tokens", json_body=unknown),
        404,
        "not_found_error",
    )
