"""ERR-*: invalid requests get the documented status and an Anthropic error envelope.

Malformed requests go raw only: the SDK validates some of them client-side. Wording is never
checked, only status and `error.type`; the envelope itself (`{"type":"error",...}`, its schema,
`request_id`) is the rule of ERR-021 and ERR-023 only, so an envelope bug is one failure.
Properties with several sub-cases report every broken one.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conformance.catalogue import Level, prop
from conformance.judging.checks import (
    ERROR_STATUS,
    Cases,
    ConformanceFailure,
    expect,
    expect_envelope,
    expect_equal,
    expect_error,
    expect_status,
    json_object,
    not_judged,
    note,
    precondition,
    read_optional,
)
from conformance.wire.drivers import expect_message, message_body
from conformance.wire.target import Target

ERRORS = "api/errors"
MESSAGES = "api/messages"


def rejected(target: Target, body: Any, *, path: str = "/v1/messages", **kwargs: Any) -> None:
    """The body must get 400 invalid_request_error."""
    expect_error(target.request("POST", path, json_body=body, **kwargs), 400, "invalid_request_error")


def without_max_tokens(target: Target) -> dict[str, Any]:
    """An invalid request by the schema itself (`max_tokens` is required): the error to provoke
    where any documented error will do."""
    return {k: v for k, v in message_body(target).items() if k != "max_tokens"}


def text(value: str, **extra: Any) -> dict[str, Any]:
    return {"type": "text", "text": value, **extra}


@prop(
    "ERR-001",
    Level.MUST,
    "Missing model, messages or max_tokens is a 400",
    url=f"{MESSAGES}#body",
    requirement="model, messages and max_tokens are required: leaving one out is a 400 "
    "invalid_request_error (never a default).",
    source="schema: OpenAPI CreateMessageParams required[model, messages, max_tokens] — required: "
    "[model, messages, max_tokens]",
    invariant=1,
    covers=(
        "endpoint:POST /v1/messages",
        "request:model",
        "request:messages",
        "request:max_tokens",
        "error:invalid_request_error",
    ),
)
def test_err_001_missing_required(target: Target) -> None:
    cases = Cases()
    for field in ("model", "messages", "max_tokens"):
        with cases.case(f"missing {field}"):
            body = message_body(target)
            del body[field]
            rejected(target, body)
    cases.check()


@prop(
    "ERR-002",
    Level.MUST,
    "Unknown top-level fields are rejected",
    url=f"{MESSAGES}#body",
    requirement="The request object has no additional properties: an unknown field is a 400 "
    "invalid_request_error ('Extra inputs are not permitted').",
    source="docs and schema: OpenAPI CreateMessageParams additionalProperties; "
    'api/errors#common-validation-errors — additionalProperties: false; errors page: "Sending '
    "`thinking.block_binding` without the `thinking-binding-controls-2026-08-01` beta header "
    "returns a 400 `invalid_request_error` whose message ends in: block_binding: Extra inputs are"
    " not …",
    invariant=2,
    covers=(
        "endpoint:POST /v1/messages",
        "error:invalid_request_error",
    ),
)
def test_err_002_unknown_field(target: Target) -> None:
    rejected(target, message_body(target, plumbline_unknown_field=True))


@prop(
    "ERR-003",
    Level.MUST,
    "Unknown fields inside content blocks are rejected",
    url=f"{MESSAGES}#body-messages",
    requirement="Content blocks have no additional properties: an unknown key inside a block "
    "is a 400 invalid_request_error.",
    source="schema: OpenAPI RequestTextBlock additionalProperties — RequestTextBlock: "
    "additionalProperties: false (every request block schema is closed)",
    invariant=3,
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].content",
        "block:text",
        "error:invalid_request_error",
    ),
)
def test_err_003_unknown_block_field(target: Target) -> None:
    messages = [{"role": "user", "content": [text("Hi", plumbline_unknown=1)]}]
    rejected(target, message_body(target, messages=messages))


@prop(
    "ERR-004",
    Level.MUST,
    "Sampling parameters out of range are rejected",
    url=f"{MESSAGES}#body-temperature",
    requirement="temperature and top_p must lie in [0, 1] and top_k must be >= 0; values "
    "outside are a 400 invalid_request_error.",
    source="schema: OpenAPI CreateMessageParams/properties/temperature|top_p|top_k — temperature: "
    "number, minimum 0, maximum 1; top_p: minimum 0, maximum 1; top_k: integer, minimum 0",
    invariant=4,
    covers=(
        "endpoint:POST /v1/messages",
        "request:temperature",
        "request:top_p",
        "request:top_k",
        "error:invalid_request_error",
    ),
)
def test_err_004_sampling_range(target: Target) -> None:
    cases = Cases()
    for field, value in (
        ("temperature", 1.5),
        ("temperature", -0.5),
        ("top_p", 1.5),
        ("top_k", -1),
    ):
        with cases.case(f"{field} {value}"):
            rejected(target, message_body(target, **{field: value}))
    cases.check()


@prop(
    "ERR-005",
    Level.MUST,
    "Invalid thinking budgets are rejected",
    url="build-with-claude/extended-thinking",
    requirement="thinking.budget_tokens must be >= 1024 and less than max_tokens; otherwise "
    "400 invalid_request_error.",
    source="docs and schema: OpenAPI ThinkingConfigEnabled/properties/budget_tokens; SDK "
    "types/thinking_config_enabled_param.py — budget_tokens: integer, minimum 1024; docstring "
    '"Must be ≥1024 and less than `max_tokens`."',
    invariant=5,
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:thinking.type",
        "request:thinking.budget_tokens",
        "request:max_tokens",
        "error:invalid_request_error",
    ),
)
def test_err_005_thinking_budget(target: Target) -> None:
    def thinking(max_tokens: int, budget: int) -> dict[str, Any]:
        # Without temperature: thinking refuses one other than 1, and each sub-case must be
        # refused for its budget alone.
        enabled = {"type": "enabled", "budget_tokens": budget}
        body = message_body(target, max_tokens=max_tokens, thinking=enabled)
        body.pop("temperature", None)
        return body

    cases = Cases()
    with cases.case("budget_tokens 512"):
        rejected(target, thinking(2048, 512))
    with cases.case("budget_tokens above max_tokens"):
        rejected(target, thinking(1100, 2048))
    cases.check()


@prop(
    "ERR-006",
    Level.MUST,
    "max_tokens above the model's maximum is rejected",
    url="api/models/get",
    requirement="max_tokens greater than the model's maximum (ModelInfo.max_tokens) is a 400 "
    "invalid_request_error.",
    source="docs: api/models/get (SDK types/model_info.py max_tokens); OpenAPI "
    'CreateMessageParams/properties/max_tokens — ModelInfo.max_tokens: "Maximum value for the '
    '`max_tokens` parameter when using this model."; max_tokens: "Different models have different'
    ' maximum values for this parameter."',
    invariant=7,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "request:max_tokens",
        "model:max_tokens",
        "error:invalid_request_error",
    ),
)
def test_err_006_max_tokens_above_model_limit(target: Target, model_info: dict[str, Any] | None) -> None:
    limit = (model_info or {}).get("max_tokens")
    if not isinstance(limit, int) or isinstance(limit, bool):
        pytest.skip("the target does not state the model's max_tokens")
    rejected(target, message_body(target, max_tokens=limit + 1))


@prop(
    "ERR-007",
    Level.MUST,
    "max_tokens must be a non-negative integer",
    url=f"{MESSAGES}#body-max-tokens",
    requirement="max_tokens is an integer >= 0: negative, fractional or string values are a 400.",
    source="schema: OpenAPI CreateMessageParams/properties/max_tokens — max_tokens: {type: integer, "
    "minimum: 0}",
    invariant=8,
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "error:invalid_request_error",
    ),
)
def test_err_007_max_tokens_type(target: Target) -> None:
    cases = Cases()
    for value in (-1, 2.5, "16"):
        with cases.case(f"max_tokens {value!r}"):
            rejected(target, message_body(target, max_tokens=value))
    cases.check()


@prop(
    "ERR-008",
    Level.SHOULD,
    "Empty messages are rejected",
    url=f"{MESSAGES}#body-messages",
    requirement="At least one message is required: messages: [] is a 400 invalid_request_error, "
    "on create and on count_tokens."
    " The schema sets no minimum length for messages; the live API's 400 ('at least one message is "
    "required') is observed, not documented, so this is a SHOULD.",
    invariant=9,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "request:messages",
        "error:invalid_request_error",
    ),
)
def test_err_008_empty_messages(target: Target) -> None:
    cases = Cases()
    with cases.case("create"):
        rejected(target, message_body(target, messages=[]))
    with cases.case("count_tokens"):
        rejected(target, {"model": target.model, "messages": []}, path="/v1/messages/count_tokens")
    cases.check()


@prop(
    "ERR-009",
    Level.MUST,
    "Empty text is rejected",
    url=f"{MESSAGES}#body-messages",
    requirement="Text blocks must be non-empty: an empty text block is a 400 (and so, a SHOULD "
    "sub-case, is a non-final turn with empty string content: the live API refuses it, the "
    "schema sets no minimum on string content).",
    source="schema: OpenAPI RequestTextBlock/properties/text; OpenAPI InputMessage/properties/content — "
    "RequestTextBlock.text: {type: string, minLength: 1}; InputMessage.content string form has no"
    " minLength",
    invariant=10,
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].content",
        "block:text",
        "error:invalid_request_error",
    ),
)
def test_err_009_empty_text(target: Target) -> None:
    cases = Cases()
    with cases.case("empty text block"):
        rejected(target, message_body(target, messages=[{"role": "user", "content": [text("")]}]))
    with cases.case("empty user turn", level=Level.SHOULD):
        turns = [
            {"role": "user", "content": ""},
            {"role": "assistant", "content": "x"},
            {"role": "user", "content": "y"},
        ]
        rejected(target, message_body(target, messages=turns))
    cases.check()


@prop(
    "ERR-010",
    Level.SHOULD,
    "An unknown model is a 404",
    url=f"{ERRORS}#http-errors",
    requirement="A model id the server does not serve is a 404 not_found_error (not a 400, not a "
    "500), on create and on count_tokens."
    " The errors page ties 404 to ids in the URL; the live API's 404 for an unknown model named in the "
    "body is observed (and stated by Anthropic staff), not documented: a SHOULD.",
    invariant=11,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "request:model",
        "count_request:model",
        "error:not_found_error",
    ),
)
def test_err_010_unknown_model(target: Target) -> None:
    """count_tokens is judged where it counts for the target's own model: a missing route answers
    404 not_found_error to every request, which would pass for the unknown model's."""
    cases = Cases()
    with cases.case("create"):
        body = message_body(target, model="plumbline-no-such-model-0000")
        expect_error(target.request("POST", "/v1/messages", json_body=body), 404, "not_found_error")
    with cases.case("count_tokens"):
        messages = [{"role": "user", "content": "Hi"}]
        with precondition("count_tokens answered 200 for the target's model", judged_by="TOKENS-004"):
            known = {"model": target.model, "messages": messages}
            expect_status(target.request("POST", "/v1/messages/count_tokens", json_body=known), 200)
        body = {"model": "plumbline-no-such-model-0000", "messages": messages}
        response = target.request("POST", "/v1/messages/count_tokens", json_body=body)
        expect_error(response, 404, "not_found_error")
    cases.check()


@prop(
    "ERR-011",
    Level.MUST,
    "Malformed tool definitions are rejected",
    url="agents-and-tools/tool-use/overview",
    requirement="A tool name must match ^[a-zA-Z0-9_-]{1,128}$ and input_schema must be an "
    "object schema; otherwise 400 invalid_request_error.",
    source="schema: OpenAPI Tool/properties/name; OpenAPI InputSchema/properties/type — Tool.name "
    "pattern ^[a-zA-Z0-9_-]{1,128}$; InputSchema.type const object (required)",
    invariant=12,
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tools[].name",
        "request:tools[].input_schema",
        "request:tools[].input_schema.type",
        "error:invalid_request_error",
    ),
)
def test_err_011_bad_tools(target: Target) -> None:
    good_schema = {"type": "object", "properties": {}}
    cases = Cases()
    with cases.case("tool name with a space"):
        rejected(target, message_body(target, tools=[{"name": "bad name!", "input_schema": good_schema}]))
    with cases.case("input_schema not an object schema"):
        rejected(target, message_body(target, tools=[{"name": "ok", "input_schema": {"type": "string"}}]))
    cases.check()


@prop(
    "ERR-012",
    Level.MUST,
    "tool_use and tool_result must pair up",
    url="agents-and-tools/tool-use/overview",
    requirement="A tool_result must answer a tool_use of the previous assistant turn, and a "
    "tool_use must be answered in the next user turn; otherwise 400.",
    source="docs: agents-and-tools/tool-use/implement-tool-use#handling-results-from-client-tools "
    '(handle-tool-calls) — "Tool result blocks must immediately follow their corresponding tool '
    "use blocks in the message history. You cannot include any messages between the assistant's "
    'tool use message and the user\'s tool result message."; "If you receive an error …',
    invariant=14,
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "block:tool_use",
        "block:tool_result",
        "error:invalid_request_error",
    ),
)
def test_err_012_tool_pairing(target: Target) -> None:
    """The tool is defined, so on a target that serves tools the pairing is the only fault (a
    target without tools refuses both with a 400 too)."""
    tools = [{"name": "t", "input_schema": {"type": "object", "properties": {}}}]
    orphan = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello"},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "toolu_plumbline0", "content": "x"}],
        },
    ]
    cases = Cases()
    with cases.case("tool_result without a tool_use"):
        rejected(target, message_body(target, messages=orphan, tools=tools))
    unanswered = [
        {"role": "user", "content": "Hi"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_plumbline1", "name": "t", "input": {}}],
        },
        {"role": "user", "content": "no result"},
    ]
    with cases.case("tool_use without a tool_result"):
        rejected(target, message_body(target, messages=unanswered, tools=tools))
    cases.check()


@prop(
    "ERR-013",
    Level.SHOULD,
    "tool_choice must name a defined tool",
    url="agents-and-tools/tool-use/implement-tool-use#forcing-tool-use",
    requirement="tool_choice {type: tool, name} naming a tool that is not in tools is a 400."
    " Neither the docs nor the schema tie tool_choice.name to tools; the refusal is inferred, so this is "
    "a SHOULD.",
    invariant=17,
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "error:invalid_request_error",
    ),
)
def test_err_013_tool_choice_unknown(target: Target) -> None:
    tools = [{"name": "get_time", "input_schema": {"type": "object", "properties": {}}}]
    rejected(target, message_body(target, tools=tools, tool_choice={"type": "tool", "name": "nope"}))


@prop(
    "ERR-014",
    Level.MUST,
    "Unsupported media types are rejected",
    url="build-with-claude/vision",
    requirement="Image media_type must be image/jpeg, png, gif or webp, and a base64 document "
    "must be application/pdf; other values are a 400.",
    source="schema: OpenAPI Base64ImageSource/properties/media_type; OpenAPI "
    "Base64PDFSource/properties/media_type — image media_type enum [image/jpeg, image/png, "
    "image/gif, image/webp]; base64 document media_type const application/pdf",
    invariant=19,
    covers=(
        "endpoint:POST /v1/messages",
        "block:image",
        "block:document",
        "error:invalid_request_error",
    ),
)
def test_err_014_media_types(target: Target) -> None:
    image = {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/bmp", "data": "Qk0="},
    }
    cases = Cases()
    with cases.case("image/bmp"):
        rejected(
            target,
            message_body(target, messages=[{"role": "user", "content": [image, text("What is it?")]}]),
        )
    doc = {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/zip", "data": "UEs="},
    }
    with cases.case("application/zip document"):
        rejected(
            target,
            message_body(target, messages=[{"role": "user", "content": [doc, text("Summarise.")]}]),
        )
    cases.check()


@prop(
    "ERR-015",
    Level.MUST,
    "Invalid cache_control is rejected",
    url="build-with-claude/prompt-caching",
    requirement="cache_control.type must be 'ephemeral' and ttl '5m' or '1h'; other values are a 400.",
    source="schema: OpenAPI CacheControlEphemeral — type const ephemeral (required); ttl enum [5m, 1h]; "
    "additionalProperties false",
    invariant=20,
    covers=(
        "endpoint:POST /v1/messages",
        "block:text",
        "error:invalid_request_error",
    ),
)
def test_err_015_bad_cache_control(target: Target) -> None:
    cases = Cases()
    for control in ({"type": "persistent"}, {"type": "ephemeral", "ttl": "2h"}):
        with cases.case(f"cache_control {control}"):
            messages = [{"role": "user", "content": [text("Hi", cache_control=control)]}]
            rejected(target, message_body(target, messages=messages))
    cases.check()


@prop(
    "ERR-016",
    Level.SHOULD,
    "More than four cache breakpoints are rejected",
    url="build-with-claude/prompt-caching",
    requirement="A request may define at most 4 cache_control breakpoints; more is a 400.",
    invariant=21,
    covers=(
        "endpoint:POST /v1/messages",
        "block:text",
        "error:invalid_request_error",
    ),
)
def test_err_016_too_many_breakpoints(target: Target) -> None:
    control = {"type": "ephemeral"}
    blocks = [text(f"Part {i}.", cache_control=control) for i in range(5)]
    rejected(target, message_body(target, messages=[{"role": "user", "content": blocks}]))


@prop(
    "ERR-017",
    Level.MUST,
    "metadata.user_id is at most 512 characters",
    url=f"{MESSAGES}#body-metadata",
    requirement="metadata.user_id has a maximum length of 512; longer is a 400.",
    source="schema: OpenAPI Metadata/properties/user_id — user_id: anyOf [{type: string, maxLength: "
    "512}, null]",
    invariant=22,
    covers=(
        "endpoint:POST /v1/messages",
        "request:metadata",
        "request:metadata.user_id",
        "error:invalid_request_error",
    ),
)
def test_err_017_user_id_length(target: Target) -> None:
    rejected(target, message_body(target, metadata={"user_id": "u" * 513}))


@prop(
    "ERR-018",
    Level.MUST,
    "service_tier must be auto or standard_only",
    url=f"{MESSAGES}#body-service-tier",
    requirement="service_tier is one of 'auto', 'standard_only'; other values are a 400.",
    source="schema: OpenAPI CreateMessageParams/properties/service_tier — service_tier: {enum: [auto, "
    "standard_only]}",
    invariant=23,
    covers=(
        "endpoint:POST /v1/messages",
        "request:service_tier",
        "error:invalid_request_error",
    ),
)
def test_err_018_service_tier(target: Target) -> None:
    rejected(target, message_body(target, service_tier="premium"))


# How long ERR-019 waits for the answer to its 33 MB body once sent: a server that enforces the
# limit answers at once (the reference server in well under a second).
OVERSIZED_ANSWER_S = 20.0


@prop(
    "ERR-019",
    Level.MUST,
    "Bodies over 32 MB are 413 request_too_large",
    url=f"{ERRORS}#request-size-limits",
    requirement="The Messages endpoint accepts at most 32 MB; a larger body is a 413 "
    "request_too_large error.",
    source='docs: api/errors#request-size-limits — "Messages API | 32 MB" ... "If you exceed these '
    "limits, you'll receive a 413 `request_too_large` error.\"",
    invariant=24,
    alone=True,
    covers=(
        "endpoint:POST /v1/messages",
        "error:request_too_large",
    ),
)
def test_err_019_request_too_large(target: Target) -> None:
    """Sends a 33 MB body on a connection of its own, for at most --timeout, waits at most
    OVERSIZED_ANSWER_S for the answer (a size limit is checked before the body is parsed: the
    peers that tokenise it took 40-70 s to answer a 400), reads only its head and closes; then
    waits until the target answers again, so that the next property is not judged on a target
    still busy with this one."""
    padding = "x" * (33 * 1024 * 1024)
    body = json.dumps(message_body(target, messages=[{"role": "user", "content": padding}])).encode()
    within = min(OVERSIZED_ANSWER_S, target.config.timeout)
    try:
        response = target.post_oversized(
            "/v1/messages", body, budget=target.config.timeout, answer_within=within
        )
    except httpx.ReadTimeout:
        raise ConformanceFailure(
            f"413 request_too_large within {within:g} s of the body's last byte",
            f"no answer within {within:g} s: the body was read as a request (parsed, or tokenised)",
            reason="too-large-read",
            subject="a 33 MB body read instead of refused",
        ) from None
    finally:
        waited = target.settle(within=target.config.timeout)
        if waited is None or waited > 1:
            settled = "did not answer again" if waited is None else f"answered again after {waited:.0f} s"
            note(f"after the 33 MB body the target {settled}")
    expect_error(response, 413, "request_too_large")


@prop(
    "ERR-020",
    Level.SHOULD,
    "A missing anthropic-version header is rejected",
    url="api/versioning",
    requirement="Every request must send anthropic-version; without it the request is a 400 "
    "invalid_request_error.",
    invariant=26,
    covers=(
        "endpoint:POST /v1/messages",
        "param:anthropic-version",
        "error:invalid_request_error",
    ),
    unobserved={
        "param:anthropic-version": "judged by its absence: the request leaves the header out",
    },
)
def test_err_020_missing_version(target: Target) -> None:
    rejected(target, message_body(target), headers=target.headers(version=False))


@prop(
    "ERR-021",
    Level.MUST,
    "Malformed JSON is a 400",
    url=f"{ERRORS}#http-errors",
    requirement="A body that is not valid JSON is a 400 invalid_request_error in the JSON "
    "envelope (never a 5xx, never a framework default body).",
    source="docs and schema: api/errors#http-errors; OpenAPI paths/~1v1~1messages/post/requestBody "
    '(content application/json, schema CreateMessageParams type object) — "400 - '
    'invalid_request_error: There was an issue with the format or content of your request."; "The'
    ' API always returns errors as JSON"',
    invariant=27,
    covers=(
        "endpoint:POST /v1/messages",
        "error_body:type",
        "error_body:error",
        "error_body:error.type",
        "error_body:error.message",
        "error_body:request_id",
        "error:invalid_request_error",
    ),
)
def test_err_021_malformed_json(target: Target) -> None:
    cases = Cases()
    for raw in (b'{"model": ', b"not json", b"[1, 2]"):
        with cases.case(f"body {raw.decode()!r}"):
            response = target.request("POST", "/v1/messages", content=raw)
            expect_envelope(response, 400, "invalid_request_error")
    cases.check()


@prop(
    "ERR-022",
    Level.MUST,
    "Status and error.type agree",
    url=f"{ERRORS}#http-errors",
    requirement="Each error status has its documented error.type (400 invalid_request_error, "
    "401 authentication_error, 404 not_found_error, 413 request_too_large, 429 "
    "rate_limit_error, 500 api_error, 529 overloaded_error, ...).",
    source="docs: api/errors#http-errors — 400 invalid_request_error, 401 authentication_error, 402 "
    "billing_error, 403 permission_error, 404 not_found_error, 409 conflict_error, 413 "
    "request_too_large, 429 rate_limit_error, 500 api_error, 504 timeout_error, 529 "
    "overloaded_error; …",
    invariant=69,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "error_body:error.type",
        "error:invalid_request_error",
        "error:not_found_error",
    ),
)
def test_err_022_status_type_mapping(target: Target) -> None:
    """Provokes several errors and checks each (status, error.type) pair. A body that states no
    error.type is the envelope properties' to judge (ERR-023), not this one's."""
    provoked: dict[str, tuple[str, str, Any, bytes | None]] = {
        "empty messages": ("POST", "/v1/messages", message_body(target, messages=[]), None),
        "unknown model": ("POST", "/v1/messages", message_body(target, model="plumbline-nope"), None),
        "unknown model id": ("GET", "/v1/models/plumbline-nope", None, None),
        "malformed JSON": ("POST", "/v1/messages", None, b"{"),
    }
    cases = Cases()
    judged = 0
    for name, (method, path, body, raw) in provoked.items():
        with cases.case(name):
            response = target.request(method, path, json_body=body, content=raw)
            try:
                answer = response.json()
            except ValueError:
                continue
            kind = read_optional(answer, "error.type", str, where="the error body")
            if kind is None:
                continue
            judged += 1
            documented = ERROR_STATUS.get(kind)
            expect(
                documented == response.status_code
                or (kind == "invalid_request_error" and 400 <= response.status_code < 500),
                f"error.type documented for HTTP {response.status_code}",
                f"HTTP {response.status_code} with error.type {kind!r}",
                reason="error-type",
            )
    cases.check()
    if not judged:
        not_judged("no error body stated an error.type", judged_by="ERR-023")


@prop(
    "ERR-023",
    Level.MUST,
    "Every error body is the Anthropic envelope",
    url=f"{ERRORS}#error-shapes",
    requirement='Errors are JSON {"type":"error","error":{"type","message"},"request_id"}, for '
    "every status, unknown routes and methods included.",
    source='docs: api/errors#error-shapes — "The API always returns errors as JSON, with a top-level '
    "`error` object that always includes a `type` and `message` value. The response also includes"
    ' a `request_id` field"; {OA}/ErrorResponse required [error, request_id, type]',
    invariant=72,
    covers=(
        "endpoint:POST /v1/messages",
        "error_body:type",
        "error_body:error",
        "error_body:error.type",
        "error_body:error.message",
        "error_body:request_id",
        "error:invalid_request_error",
        "error:not_found_error",
    ),
)
def test_err_023_error_envelope(target: Target) -> None:
    """The property that judges the envelope of error bodies (the others judge the status)."""
    cases = Cases()
    for method, path, body in (
        ("GET", "/v1/plumbline-no-such-route", None),
        ("POST", "/v1/models", {}),
        ("POST", "/v1/messages", without_max_tokens(target)),
    ):
        with cases.case(f"{method} {path}"):
            response = target.request(method, path, json_body=body)
            envelope = expect_envelope(response, range(400, 600), None)
            expect(
                "request_id" in envelope, "a request_id key in the error body", envelope, reason="envelope"
            )
    cases.check()


@prop(
    "ERR-024",
    Level.MUST,
    "The error body repeats the request-id header",
    url=f"{ERRORS}#request-id",
    requirement="An error body's request_id equals the response's request-id header.",
    source='docs: api/errors#request-id — "The same identifier appears as the `request_id` field in '
    'error response bodies."',
    invariant=54,
    covers=(
        "endpoint:POST /v1/messages",
        "error_body:request_id",
        "error:invalid_request_error",
    ),
)
def test_err_024_request_id_agrees(target: Target) -> None:
    """Any error answer will do (a request without max_tokens: its schema's `required`); the
    status, the envelope and the header themselves are ERR-001's, ERR-023's and HDR-001's."""
    response = target.request("POST", "/v1/messages", json_body=without_max_tokens(target))
    with precondition("a request without max_tokens refused", judged_by="ERR-001"):
        expect(response.status_code >= 400, "an error status", f"HTTP {response.status_code}")
    with precondition("an error body that is a JSON object", judged_by="ERR-023"):
        body = json_object(response, "the error body")
    header = response.headers.get("request-id")
    if not header:
        not_judged("the answer carries no request-id header", judged_by="HDR-001")
    expect_equal(
        read_optional(body, "request_id", str, where="the error body"),
        header,
        "body request_id",
        reason="request-id",
        subject="error bodies do not repeat the request-id header",
    )


@prop(
    "ERR-025",
    Level.SHOULD,
    "A body that is not JSON content is rejected",
    url=f"{MESSAGES}",
    requirement="POST bodies are application/json; another content type is a 400 invalid_request_error.",
    covers=(
        "endpoint:POST /v1/messages",
        "error:invalid_request_error",
    ),
)
def test_err_025_wrong_content_type(target: Target) -> None:
    headers = {**target.headers(), "content-type": "text/plain"}
    body = json.dumps(message_body(target)).encode()
    expect_error(
        target.request("POST", "/v1/messages", content=body, headers=headers),
        400,
        "invalid_request_error",
    )


@prop(
    "ERR-026",
    Level.MUST,
    "Unknown routes are 404 not_found_error",
    url=f"{ERRORS}#http-errors",
    requirement="A path the API does not have is a 404 not_found_error in the error envelope.",
    source='docs: api/errors#http-errors — "404 - not_found_error: The requested resource was not found.'
    ' Check the endpoint path and any resource IDs in the request URL."',
    covers=("error:not_found_error",),
)
def test_err_026_unknown_route(target: Target) -> None:
    expect_error(target.request("GET", "/v1/plumbline-no-such-route"), 404, "not_found_error")


@prop(
    "ERR-027",
    Level.MUST,
    "Features a model lacks are refused, not ignored",
    url="build-with-claude/vision",
    requirement="A request using input the model cannot take (an image for a model whose "
    "capabilities say image_input is unsupported) is a 400, never silently ignored.",
    source='docs: api/models/get (SDK types/model_capabilities.py image_input) — image_input: "Whether '
    'the model accepts image content blocks."',
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "block:image",
        "model:capabilities.image_input.supported",
        "error:invalid_request_error",
    ),
)
def test_err_027_unsupported_input_refused(target: Target, model_info: dict[str, Any] | None) -> None:
    # Only an explicit `false` counts; a malformed ModelInfo is MODELS-003's to judge.
    declared = read_optional(model_info, "capabilities.image_input.supported", where="the ModelInfo")
    if declared is not False or target.config.profile.supports("images"):
        pytest.skip("the model declares image input (or does not say)")
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": png}}
    rejected(
        target,
        message_body(target, messages=[{"role": "user", "content": [image, text("Describe it.")]}]),
    )


@prop(
    "ERR-029",
    Level.MUST,
    "An unknown message role is a 400",
    url=f"{MESSAGES}#body-messages",
    requirement="A message's role is 'user' or 'assistant'; any other role (e.g. 'robot') is a "
    "400 invalid_request_error, never accepted and never a framework-shaped error.",
    source="schema: OpenAPI InputMessage/properties/role — role: {enum: [user, assistant]} (SDK 2.14+ "
    "also types 'system'; neither has robot/tool/'')",
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].role",
        "error:invalid_request_error",
    ),
)
def test_err_029_unknown_role(target: Target) -> None:
    cases = Cases()
    for role in ("robot", "tool", ""):
        with cases.case(f"role {role!r}"):
            rejected(target, message_body(target, messages=[{"role": role, "content": "Hi"}]))
    cases.check()


@prop(
    "ERR-030",
    Level.MUST,
    "A system role inside messages is served or refused with a 400",
    url=f"{MESSAGES}#body-messages",
    requirement="The official SDK types a message of role 'system' (a mid-conversation "
    "instruction) while the live API has refused it (\"messages: roles must be 'user' or "
    "'assistant'\", peers catalogue #1): a request carrying one is either served (a 200 and a "
    "Message) or refused with 400 invalid_request_error in the error envelope, never a 5xx, a "
    "422 or a framework-shaped error.",
    source="docs and schema: SDK types/message_param.py + system_message_param.py (role 'system'); "
    "OpenAPI InputMessage/properties/role; api/errors#http-errors — SDK 2.16: MessageParam = "
    "Union[UserMessageParam, AssistantMessageParam, SystemMessageParam], SystemMessageParam.role "
    "Literal['system']; OpenAPI 2026-05: role enum [user, assistant]; \"400 - "
    "invalid_request_error: There was an issue with the …",
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].role",
    ),
)
def test_err_030_system_role_in_messages(target: Target) -> None:
    """Sends a user turn, a system turn, then a user turn (the shape Claude Code sends)."""
    messages = [
        {"role": "user", "content": "Hi."},
        {"role": "system", "content": "Answer in one word."},
        {"role": "user", "content": "Say hello."},
    ]
    body = message_body(target, max_tokens=2, messages=messages)
    response = target.request("POST", "/v1/messages", json_body=body)
    if response.status_code == 200:
        expect_message(response)
        return
    expect_error(response, 400, "invalid_request_error")


@prop(
    "ERR-031",
    Level.MUST,
    "Every 429, 500, 504 and 529 a target sends in a run is the documented error",
    url=f"{ERRORS}#http-errors",
    requirement="A target answers 429 (rate limited), 500 (an internal error), 504 (a timeout) and "
    "529 (overloaded) when it must, not when asked: whichever of them any property of the run meets "
    "is the error envelope with the error type the errors page gives its status (rate_limit_error, "
    "api_error, timeout_error, overloaded_error). Judged at the run's end from every property's "
    "exchanges (conformance/judging/passive.py), and from one ordinary request of its own; SKIP when the "
    "run met none.",
    source='docs: api/errors#http-errors — "429 - rate_limit_error: Your account has hit a rate '
    'limit."; "500 - api_error: An unexpected error has occurred internal to Anthropic\'s systems."; '
    '"504 - timeout_error"; "529 - overloaded_error: The API is temporarily overloaded."; the body '
    '{"type": "error", "error": {"type", "message"}}',
    passive=True,
    covers=(
        "endpoint:POST /v1/messages",
        "error:rate_limit_error",
        "error:api_error",
        "error:timeout_error",
        "error:overloaded_error",
    ),
    unobserved={
        "error:rate_limit_error": "the judged reference server has no rate limit (RATE-* run with one)",
        "error:api_error": "the reference server meets no internal error in a run",
        "error:timeout_error": "the reference server meets no timeout in a run",
        "error:overloaded_error": "the reference server is not overloaded by a run",
    },
)
def test_err_031_errors_a_run_meets(target: Target) -> None:
    """Sends one ordinary request. What it gets rides on its report like any property's
    exchanges, and the plugin gives this property's verdict last from everything the run met
    (passive.judge_met): this SKIP stands only when nothing was met."""
    target.request("POST", "/v1/messages", json_body=message_body(target, max_tokens=1))
    not_judged("the run met no 429, 500, 504 or 529 (judged wherever one is met)")
