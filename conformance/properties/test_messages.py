"""MSG-*: non-streaming `POST /v1/messages`: what a valid request gets back."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue import Level, prop
from conformance.generating.versions import refuses_sampling
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_id_prefix,
    expect_stop,
    not_judged,
    note,
    precondition,
    read,
    read_optional,
    stop_reason,
)
from conformance.wire.drivers import (
    COMMON_STOPS,
    END_TURN_MAX_TOKENS,
    END_TURN_PROMPTS,
    LONG_ANSWER_PROMPT,
    STOP_PREFILL,
    create_json,
    create_within_max_tokens,
    end_turn_bodies,
    expect_message,
    expect_stream,
    expect_valid_message,
    expect_within_max_tokens,
    message_body,
    sdk_call,
    stop_sequence_body,
    stream_raw,
    text_of,
    total_input_tokens,
)
from conformance.wire.target import LEGACY_VERSION, Target

MESSAGES = "api/messages"
MESSAGE = "the Message"


@prop(
    "MSG-001",
    Level.MUST,
    "A valid request gets a Message",
    url=f"{MESSAGES}#response",
    requirement="200 with a JSON Message: type 'message', role 'assistant', a non-empty string "
    "id, and every key the schema requires, valid against it (the schema's required keys; the "
    "id's documented msg_ prefix is MSG-022's rule).",
    source="schema: OpenAPI Message required[...]; OpenAPI Message/properties/id — required: [id, type, "
    "role, content, model, stop_reason, stop_sequence, stop_details, usage, container]; type "
    "const message; role const assistant; id: {type: string, examples: "
    '[msg_013Zva2CMHLNnXjNJJKqJ2EF]}, description "The format and …',
    invariant=31,
    covers=(
        "endpoint:POST /v1/messages",
        "response:id",
        "response:type",
        "response:role",
        "response:content",
        "response:model",
        "response:stop_reason",
        "response:stop_sequence",
        "response:stop_details",
        "response:container",
        "response:usage",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
        "response:usage.cache_creation",
        "response:usage.cache_creation.ephemeral_5m_input_tokens",
        "response:usage.cache_creation.ephemeral_1h_input_tokens",
        "response:usage.server_tool_use",
        "response:usage.service_tier",
        "response:usage.inference_geo",
        "block:text",
    ),
)
def test_msg_001_message_shape(target: Target) -> None:
    """Sends a short greedy request raw and through the SDK (strict validation). This is the
    property that judges the Message's schema; the others read only the fields they need."""
    message = create_json(target, message_body(target, max_tokens=4))
    expect_valid_message(message)
    expect_equal(read(message, "type", str, where=MESSAGE), "message", "type")
    expect_equal(read(message, "role", str, where=MESSAGE), "assistant", "role")
    message_id = read(message, "id", str, where=MESSAGE)
    expect(bool(message_id.strip()), "a non-empty id", message_id, reason="id", subject="an empty Message id")
    sdk_call(
        "messages.create",
        target.sdk().messages.create,
        model=target.model,
        max_tokens=4,
        messages=[{"role": "user", "content": "Hi"}],
        extra_body=target.greedy_fields(),
    )


@prop(
    "MSG-002",
    Level.MUST,
    "stop_reason is set and is a documented value",
    url=f"{MESSAGES}#response-stop-reason",
    requirement="In a non-streaming Message stop_reason is never null and is one of the GA "
    "values (end_turn, max_tokens, stop_sequence, tool_use, pause_turn, refusal, "
    "model_context_window_exceeded).",
    source='docs and schema: api/messages#response-stop-reason; OpenAPI StopReason — "In non-streaming '
    'mode this value is always non-null."; enum end_turn, max_tokens, stop_sequence, tool_use, '
    "pause_turn, refusal (+ model_context_window_exceeded in SDK 2.x)",
    invariant=32,
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "response:stop_reason",
        "stop_reason:max_tokens",
    ),
)
def test_msg_002_stop_reason_documented(target: Target) -> None:
    """Sends two requests (a natural stop is likely for one, max_tokens for the other)."""
    cases = Cases()
    for limit in (64, 1):
        with cases.case(f"max_tokens {limit}"):
            stop_reason(create_json(target, message_body(target, max_tokens=limit)), where=MESSAGE)
    cases.check()


@prop(
    "MSG-003",
    Level.MUST,
    "stop_sequence is null unless a stop sequence ended the turn",
    url=f"{MESSAGES}#response-stop-sequence",
    requirement="stop_sequence is non-null exactly when stop_reason is 'stop_sequence', and then "
    "it is one of the request's stop_sequences.",
    source="docs: api/messages#response-stop-sequence; api/messages#body-stop-sequences — stop_sequence:"
    ' "This value will be a non-null string if one of your custom stop sequences was generated.";'
    ' stop_sequences: "the response `stop_sequence` value will contain the matched stop sequence"',
    invariant=33,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stop_sequences",
        "response:stop_reason",
        "response:stop_sequence",
    ),
)
def test_msg_003_stop_sequence_null_otherwise(target: Target) -> None:
    """Short requests with a stop sequence that cannot occur: whatever ends them, it is not a
    stop sequence, so stop_sequence must be null (not "" or a made-up value)."""
    never = "<<never-generated-7f3a>>"
    cases = Cases()
    for limit in (1, 12):
        with cases.case(f"max_tokens {limit}"):
            message = create_json(target, message_body(target, max_tokens=limit, stop_sequences=[never]))
            # A missing key is the schema property's to report (MSG-001); it reads as null here.
            sequence = read_optional(message, "stop_sequence", str, where=MESSAGE)
            wanted = never if stop_reason(message, where=MESSAGE) == "stop_sequence" else None
            expect_equal(sequence, wanted, "stop_sequence", reason="stop-sequence")
    cases.check()


@prop(
    "MSG-004",
    Level.MUST,
    "A stop sequence hit is reported",
    url=f"{MESSAGES}#body-stop-sequences",
    requirement="When generated text matches a custom stop sequence, generation stops with "
    "stop_reason 'stop_sequence' and stop_sequence set to the matched string.",
    source='docs: api/messages#body-stop-sequences — "If the model encounters one of the custom '
    'sequences, the response `stop_reason` value will be `\\"stop_sequence\\"` and the response '
    '`stop_sequence` value will contain the matched stop sequence."',
    invariant=33,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stop_sequences",
        "response:stop_reason",
        "response:stop_sequence",
        "stop_reason:stop_sequence",
    ),
)
def test_msg_004_stop_sequence_reported(target: Target) -> None:
    """Prefills a story and stops on very common letters, so any model hits one."""
    message = create_json(target, stop_sequence_body(target))
    expect_stop(stop_reason(message, where=MESSAGE), "stop_sequence", "stop_reason")
    sequence = read(message, "stop_sequence", str, where=MESSAGE)
    expect(
        sequence in COMMON_STOPS,
        f"stop_sequence one of {COMMON_STOPS}",
        sequence,
        reason="stop-sequence",
    )


@prop(
    "MSG-005",
    Level.SHOULD,
    "The matched stop sequence is not in the text",
    url=f"{MESSAGES}#body-stop-sequences",
    requirement="Generation stops before the stop sequence: the returned text does not contain "
    "the matched sequence."
    " The docs say generation stops and reports the match; that the match is left out of the text is what"
    " the live API does, not what the docs say: a SHOULD.",
    invariant=34,
    covers=(
        "endpoint:POST /v1/messages",
        "request:stop_sequences",
        "response:stop_sequence",
        "response:content",
        "block:text",
        "stop_reason:stop_sequence",
    ),
)
def test_msg_005_stop_sequence_excluded(target: Target) -> None:
    """Same request as MSG-004; the text must not contain the reported sequence. Without a
    reported hit there is nothing to judge here (MSG-004 judges the reporting). The request's
    prefill, repeated at the start of the text, is MSG-008's finding: only what follows it is
    the generation judged here."""
    message = create_json(target, stop_sequence_body(target))
    matched = read_optional(message, "stop_sequence", str, where=MESSAGE)
    if not matched:
        not_judged("no stop sequence was reported for the request", judged_by="MSG-004")
    text = generated = text_of(message)
    if text.lstrip().startswith(STOP_PREFILL):
        generated = text.lstrip()[len(STOP_PREFILL) :]
        note(f"the text repeats the prefill {STOP_PREFILL!r} (MSG-008's finding): judged what follows it")
    expect(
        matched not in generated,
        f"text without {matched!r}",
        text,
        reason="stop-sequence-in-text",
    )


@prop(
    "MSG-006",
    Level.MUST,
    "max_tokens reached gives stop_reason max_tokens",
    url=f"{MESSAGES}#response-stop-reason",
    requirement="When generation is cut by max_tokens the stop_reason is 'max_tokens'.",
    source='docs: api/messages#response-stop-reason — "`\\"max_tokens\\"`: we exceeded the requested '
    "`max_tokens` or the model's maximum\"",
    invariant=35,
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "response:stop_reason",
        "stop_reason:max_tokens",
    ),
)
def test_msg_006_max_tokens_stop(target: Target) -> None:
    """Asks for a long story with max_tokens: 1."""
    body = message_body(target, max_tokens=1, messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}])
    message = create_within_max_tokens(target, body, where=MESSAGE)
    expect_stop(stop_reason(message, where=MESSAGE), "max_tokens", "stop_reason")


@prop(
    "MSG-007",
    Level.MUST,
    "output_tokens never exceeds max_tokens",
    url=f"{MESSAGES}#body-max-tokens",
    requirement="max_tokens is the absolute maximum number of tokens to generate: the text "
    "generated (measured, and by the target's own count) and usage.output_tokens stay within it.",
    source='docs: api/messages#body-max-tokens — "This parameter only specifies the absolute maximum '
    'number of tokens to generate."',
    invariant=35,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "request:max_tokens",
        "response:content",
        "response:usage.output_tokens",
        "block:text",
        "count_response:input_tokens",
    ),
)
def test_msg_007_output_tokens_bounded(target: Target) -> None:
    """Judged by what was sent, not only by what the target says: a server that reports
    output_tokens 0 for a 4,000-token answer fails."""
    cases = Cases()
    for limit in (1, 5):
        with cases.case(f"max_tokens {limit}"):
            body = message_body(
                target, max_tokens=limit, messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}]
            )
            message = create_within_max_tokens(target, body, where=MESSAGE)
            reported = read_optional(message, "usage.output_tokens", int, where=MESSAGE)
            expect_within_max_tokens(target, text_of(message), reported, limit, where=MESSAGE)
    cases.check()


@prop(
    "MSG-008",
    Level.SHOULD,
    "A prefill is continued, not repeated",
    url=f"{MESSAGES}#body-messages",
    requirement="If the final message has the assistant role, the response continues "
    "immediately from its content (it does not start over with the prefill).",
    invariant=46,
    requires=("prefill",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].role",
        "response:content",
        "block:text",
    ),
)
def test_msg_008_prefill_continued(target: Target) -> None:
    """A prefilled request (max_tokens 16): the answer's text must not start over with the
    prefill. An answer without text shows neither: SKIP."""
    prefill = "The lighthouse keeper climbed the stairs and"
    body = message_body(
        target,
        max_tokens=16,  # a repeated prefill shows in its first words
        messages=[
            {"role": "user", "content": LONG_ANSWER_PROMPT},
            {"role": "assistant", "content": prefill},
        ],
    )
    message = create_json(target, body)
    text = text_of(message)
    if not text.strip():  # "".startswith(prefill) is False: no text shows nothing either way
        content = read(message, "content", list, where=MESSAGE)
        empty_block = any(
            isinstance(b, dict) and b.get("type") == "text" and not b.get("text") for b in content
        )
        not_judged(
            "the continuation has no text: nothing to show the prefill continued or repeated",
            judged_by="MSG-016" if empty_block else None,
        )
    expect(
        not text.lstrip().startswith(prefill),
        "text that continues after the prefill",
        text,
        reason="prefill-repeated",
    )


@prop(
    "MSG-009",
    Level.MUST,
    "Usage counts are true non-negative integers",
    url=f"{MESSAGES}#response-usage",
    requirement="usage.input_tokens and output_tokens are integers >= 0 (cache counters too, "
    "when present); a request with input has input_tokens > 0 and a non-empty answer has "
    "output_tokens > 0.",
    source="docs and schema: OpenAPI Usage; api/messages#response-usage — input_tokens/output_tokens: "
    'integer, minimum 0; cache counters integer|null minimum 0; "`output_tokens` will be '
    'non-zero, even for an empty string response"',
    invariant=47,
    covers=(
        "endpoint:POST /v1/messages",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
        "response:usage.cache_creation_input_tokens",
        "response:usage.cache_read_input_tokens",
    ),
)
def test_msg_009_usage_integers(target: Target) -> None:
    message = create_json(target, message_body(target))
    counts: dict[str, int] = {}
    for key in ("input_tokens", "output_tokens"):
        counts[key] = read(message, f"usage.{key}", int, where=MESSAGE)
    for key in ("cache_creation_input_tokens", "cache_read_input_tokens"):
        counts[key] = read_optional(message, f"usage.{key}", int, where=MESSAGE, default=0)
    for key, value in counts.items():
        expect(value >= 0, f"usage.{key} >= 0", value, reason="usage")
    expect(counts["input_tokens"] > 0, "usage.input_tokens > 0", counts["input_tokens"], reason="usage")
    if text_of(message):
        expect(
            counts["output_tokens"] > 0,
            "usage.output_tokens > 0",
            counts["output_tokens"],
            reason="usage",
        )


@prop(
    "MSG-010",
    Level.MUST,
    "cache_creation breakdown adds up",
    url=f"{MESSAGES}#response-usage",
    requirement="When usage.cache_creation is present, ephemeral_5m_input_tokens + "
    "ephemeral_1h_input_tokens equals cache_creation_input_tokens.",
    source='docs: build-with-claude/prompt-caching#1-hour-cache-duration — "Note that the current '
    "`cache_creation_input_tokens` field equals the sum of the values in the `cache_creation` "
    'object."',
    invariant=48,
    covers=(
        "endpoint:POST /v1/messages",
        "request:system",
        "request:system[].cache_control",
        "response:usage.cache_creation",
        "response:usage.cache_creation.ephemeral_5m_input_tokens",
        "response:usage.cache_creation.ephemeral_1h_input_tokens",
        "response:usage.cache_creation_input_tokens",
    ),
)
def test_msg_010_cache_creation_sums(target: Target) -> None:
    body = message_body(
        target,
        system=[{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}],
    )
    message = create_json(target, body)
    breakdown = read_optional(message, "usage.cache_creation", dict, where=MESSAGE)
    if breakdown is None:  # optional (absent or null): no sum to judge
        not_judged("no usage.cache_creation breakdown: nothing to add up")
    total = sum(
        read_optional(breakdown, key, int, where="usage.cache_creation", default=0)
        for key in ("ephemeral_5m_input_tokens", "ephemeral_1h_input_tokens")
    )
    written = read_optional(message, "usage.cache_creation_input_tokens", int, where=MESSAGE, default=0)
    expect_equal(total, written, "5m + 1h cache creation", reason="usage")


@prop(
    "MSG-011",
    Level.MUST,
    "max_tokens: 0 is accepted and generates nothing",
    url=f"{MESSAGES}#body-max-tokens",
    requirement="max_tokens may be 0 (it populates the prompt cache without generating): the "
    "request succeeds with no generated content (and usage.output_tokens 0: a SHOULD sub-case).",
    source='docs and schema: api/messages#body-max-tokens — "Set to `0` to populate the prompt cache '
    'without generating a response."; max_tokens: {type: integer, minimum: 0}',
    invariant=53,
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "response:content",
        "response:usage.output_tokens",
    ),
)
def test_msg_011_max_tokens_zero(target: Target) -> None:
    message = create_json(target, message_body(target, max_tokens=0))
    expect_equal(text_of(message), "", "generated text")
    reported = read_optional(message, "usage.output_tokens", int, where=MESSAGE)
    cases = Cases()
    with cases.case("output_tokens 0", level=Level.SHOULD):  # implied by 'without generating'
        if reported is not None:
            expect_equal(reported, 0, "usage.output_tokens", reason="usage")
    cases.check()


@prop(
    "MSG-012",
    Level.MUST,
    "Consecutive same-role turns are combined, not rejected",
    url=f"{MESSAGES}#body-messages",
    requirement="Consecutive user turns in a request are combined into a single turn; the request "
    "is valid (consecutive assistant turns ending it too, a SHOULD sub-case: they make a prefill, "
    "which the newest models refuse).",
    source='docs: api/messages#body-messages; api/errors#common-validation-errors — "Consecutive `user` '
    'or `assistant` turns in your request will be combined into a single turn."; errors page: '
    '"Claude 4.6 and later models ... do not support prefilling assistant messages. Sending a '
    "request with a prefilled last assistant …",
    invariant=28,
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].role",
        "request:messages[].content",
        "block:text",
    ),
)
def test_msg_012_consecutive_roles(target: Target) -> None:
    """Two user turns; then the same with two assistant turns at the end, which combine into a
    prefill: models that refuse prefills refuse that (a documented 400), so it is a SHOULD."""
    users = [
        {"role": "user", "content": "My name is Ada."},
        {"role": "user", "content": [{"type": "text", "text": "What is my name?"}]},
    ]
    cases = Cases()
    with cases.case("consecutive user turns"):
        create_json(target, message_body(target, max_tokens=4, messages=users))
    if target.prefill:  # else the target refuses any prefill, as the newest models may
        with cases.case("consecutive assistant turns ending the request", level=Level.SHOULD):
            assistants = [
                {"role": "assistant", "content": "Your"},
                {"role": "assistant", "content": "name is"},
            ]
            create_json(target, message_body(target, max_tokens=4, messages=[*users, *assistants]))
    cases.check()


@prop(
    "MSG-013",
    Level.MUST,
    "A previous answer can be sent back verbatim",
    url=f"{MESSAGES}#body-messages",
    requirement="Response content blocks are valid request blocks: echoing a response's "
    "content (including citations: null) as the assistant turn is accepted.",
    source="docs and schema: SDK types/message.py Message.to_param; OpenAPI "
    'RequestTextBlock/properties/citations — to_param: "Convert this response Message to a '
    'MessageParam so it can be passed back to the API as an input message"; '
    "RequestTextBlock.citations anyOf [array, null]",
    invariant=29,
    covers=(
        "endpoint:POST /v1/messages",
        "request:messages[].content",
        "response:content",
        "block:text",
    ),
)
def test_msg_013_echo_response_blocks(target: Target) -> None:
    """The answer's own content, as it came, in the assistant turn of a follow-up. An answer
    with no content has nothing to send back (a block made up here is not the answer): SKIP."""
    first = create_json(target, message_body(target, max_tokens=8))
    content = read(first, "content", list, where=MESSAGE)
    if not content:
        not_judged("the answer has no content blocks to send back")
    messages = [
        {"role": "user", "content": "Say hello."},
        {"role": "assistant", "content": content},
        {"role": "user", "content": "Again, please."},
    ]
    create_json(target, message_body(target, messages=messages))


@prop(
    "MSG-015",
    Level.MUST,
    "system as a string and as text blocks",
    url=f"{MESSAGES}#body-system",
    requirement="The system prompt may be a string or an array of text blocks; both are accepted.",
    source="schema: OpenAPI CreateMessageParams/properties/system — system: anyOf [string, array of "
    "RequestTextBlock]",
    covers=(
        "endpoint:POST /v1/messages",
        "request:system",
        "request:system[].type",
        "request:system[].text",
    ),
)
def test_msg_015_system_forms(target: Target) -> None:
    create_json(target, message_body(target, system="You are terse."))
    blocks = [
        {"type": "text", "text": "You are terse."},
        {"type": "text", "text": "Answer in English."},
    ]
    create_json(target, message_body(target, system=blocks))
    sdk_call(
        "messages.create with system blocks",
        target.sdk().messages.create,
        model=target.model,
        max_tokens=4,
        system=blocks,
        messages=[{"role": "user", "content": "Hi"}],
        extra_body=target.greedy_fields(),
    )


@prop(
    "MSG-016",
    Level.SHOULD,
    "No empty text blocks in responses",
    url=f"{MESSAGES}#response-content",
    requirement="A response does not contain text blocks with empty text (clients that replay "
    "the history would be rejected: text content blocks must be non-empty).",
    covers=(
        "endpoint:POST /v1/messages",
        "request:max_tokens",
        "request:stop_sequences",
        "response:content",
        "block:text",
    ),
)
def test_msg_016_no_empty_text_blocks(target: Target) -> None:
    """Three answers that tempt a server into an empty block: nothing generated (max_tokens 0),
    a short answer, and a stop sequence hit at once. Each request is another property's to
    accept (MSG-011, MSG-001, MSG-004): refused, that answer is not judged here."""
    cases = Cases()
    for name, body, judged_by in (
        ("max_tokens 0", message_body(target, max_tokens=0), "MSG-011"),
        ("a short answer", message_body(target, max_tokens=8), "MSG-001"),
        ("a stop sequence hit", stop_sequence_body(target), "MSG-004"),
    ):
        with cases.case(name):
            with precondition(f"the request with {name} answered", judged_by=judged_by):
                message = create_json(target, body)
            content = read(message, "content", list, where=MESSAGE)
            empty = [
                b for b in content if isinstance(b, dict) and b.get("type") == "text" and not b.get("text")
            ]
            expect(
                not empty,
                "no text block with empty text",
                content,
                reason="empty-block",
                subject="text blocks with empty text in answers",
            )
    cases.check()


@prop(
    "MSG-017",
    Level.MUST,
    "cache_control, metadata and service_tier are accepted",
    url="build-with-claude/prompt-caching",
    requirement="cache_control ({type: ephemeral, ttl 5m|1h}) is allowed on text blocks, the "
    "system prompt and the request; metadata.user_id and service_tier are valid fields.",
    source="schema: OpenAPI CreateMessageParams/properties/cache_control|metadata|service_tier; OpenAPI "
    "RequestTextBlock/properties/cache_control — cache_control (top level and on "
    "RequestTextBlock): CacheControlEphemeral {type: ephemeral, ttl: 5m|1h}; metadata.user_id "
    "string ≤512; service_tier enum [auto, standard_only]",
    covers=(
        "endpoint:POST /v1/messages",
        "request:cache_control",
        "request:cache_control.type",
        "request:cache_control.ttl",
        "request:system[].cache_control",
        "request:system[].cache_control.type",
        "request:system[].cache_control.ttl",
        "request:metadata",
        "request:metadata.user_id",
        "request:service_tier",
        "block:text",
    ),
)
def test_msg_017_caching_and_metadata_fields(target: Target) -> None:
    cache = {"type": "ephemeral", "ttl": "5m"}
    body = message_body(
        target,
        system=[{"type": "text", "text": "You are terse.", "cache_control": cache}],
        messages=[
            {
                "role": "user",
                "content": [{"type": "text", "text": "Hi", "cache_control": {"type": "ephemeral"}}],
            }
        ],
        metadata={"user_id": "3f1c9b0e-plumbline"},
        service_tier="standard_only",
        cache_control={"type": "ephemeral", "ttl": "1h"},
    )
    create_json(target, body)


@prop(
    "MSG-018",
    Level.SHOULD,
    "Sampling fields from older clients are accepted",
    url=f"{MESSAGES}#body-temperature",
    requirement="Under anthropic-version 2023-06-01, temperature (0..1), top_p (0..1) and top_k "
    "(>= 0) are accepted: older SDKs send them as typed arguments. (2026-10-21 removes them: VER-001 "
    "judges that; a model that takes only its default sampling values, as the newest do, may "
    "refuse them with a 400, which is not judged.)",
    source="docs: api/messages#body-temperature; api/versioning — 2026-10-21 removes temperature, "
    "top_p and top_k; 2023-06-01 requests keep working as before",
    covers=(
        "endpoint:POST /v1/messages",
        "request:temperature",
        "request:top_p",
        "request:top_k",
    ),
)
def test_msg_018_sampling_fields(target: Target) -> None:
    body = {**message_body(target), "temperature": 0.7, "top_p": 0.9, "top_k": 40}
    headers = {**target.headers(), "anthropic-version": LEGACY_VERSION}
    response = target.request("POST", "/v1/messages", json_body=body, headers=headers)
    if response.status_code == 400 and refuses_sampling(response):
        not_judged(
            "the model takes only its default sampling values (the API documents that for the newest models)"
        )
    expect_message(response)


@prop(
    "MSG-019",
    Level.SHOULD,
    "A Claude Code style request is accepted",
    url=f"{MESSAGES}",
    requirement="A request shaped like real agent traffic (?beta=true, anthropic-beta list, "
    "system blocks with cache_control, metadata.user_id, several turns) is served.",
    covers=(
        "endpoint:POST /v1/messages",
        "param:anthropic-beta",
        "request:system",
        "request:system[].cache_control",
        "request:metadata.user_id",
        "request:messages[].content",
        "block:text",
    ),
)
def test_msg_019_agent_style_request(target: Target) -> None:
    body = message_body(
        target,
        max_tokens=16,
        system=[
            {"type": "text", "text": "You are an interactive CLI coding agent."},
            {"type": "text", "text": "Be concise.", "cache_control": {"type": "ephemeral"}},
        ],
        messages=[
            {"role": "user", "content": [{"type": "text", "text": "What does `ls -la` do?"}]},
            {
                "role": "assistant",
                "content": [{"type": "text", "text": "It lists files, hidden ones too."}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "text",
                        "text": "And `ls -lh`?",
                        "cache_control": {"type": "ephemeral"},
                    }
                ],
            },
        ],
        metadata={"user_id": "user_4c1a_account_9d2e_session_77aa"},
    )
    headers = {
        **target.headers(),
        "anthropic-beta": "claude-code-20250219,interleaved-thinking-2025-05-14",
    }
    expect_message(target.request("POST", "/v1/messages?beta=true", json_body=body, headers=headers))


@prop(
    "MSG-022",
    Level.SHOULD,
    "Message ids start with msg_",
    url=f"{MESSAGES}#response-id",
    requirement="The API reference promises a unique id whose format and length may change, and "
    "shows Message ids as msg_… (msg_013Zva2CMHLNnXjNJJKqJ2EF): the prefix is documented by "
    "example only, so a compatible server should keep it (logs and tools tell objects apart by "
    "it), streamed or not; a server that does not is still conformant.",
    invariant=31,
    covers=(
        "endpoint:POST /v1/messages",
        "response:id",
        "event:message_start",
    ),
)
def test_msg_022_message_id_prefix(target: Target) -> None:
    """Sends a short request, plain and streamed: each Message id starts with msg_."""
    body = message_body(target, max_tokens=2)
    cases = Cases()
    with cases.case("create"):
        expect_id_prefix(read(create_json(target, body), "id", str, where=MESSAGE), "msg_", "the Message id")
    with cases.case("stream"):
        start = expect_stream(stream_raw(target, body)).first("message_start")
        streamed = read(start, "message.id", str, where="message_start")
        expect_id_prefix(streamed, "msg_", "the streamed Message id")
    cases.check()


@prop(
    "MSG-021",
    Level.MUST,
    "A turn that ends by itself reports end_turn",
    url=f"{MESSAGES}#response-stop-reason",
    requirement="When the model reaches a natural stopping point (no stop sequence, no tool "
    "call, max_tokens not reached) stop_reason is 'end_turn', streamed or not (not 'stop', not "
    "null).",
    source='docs: api/messages#response-stop-reason — "`\\"end_turn\\"`: the model reached a natural '
    'stopping point"; stop_sequences: "Our models will normally stop when they have naturally '
    'completed their turn, which will result in a response `stop_reason` of `\\"end_turn\\"`."',
    invariant=32,
    compares=True,
    covers=(
        "endpoint:POST /v1/messages",
        "response:stop_reason",
        "stop_reason:end_turn",
    ),
    unobserved={
        "stop_reason:end_turn": "tiny-random never ends a turn by itself, so the property is SKIP "
        "there; tests/conformance/test_honest_verdicts.py judges it on SmolLM2",
    },
)
def test_msg_021_natural_end_is_end_turn(target: Target) -> None:
    """Prefills the whole answer to a one-word question, with a generous max_tokens and no stop
    sequences, so that the model has nothing left to say; tries a few prompts. A turn that ends
    before max_tokens must say end_turn, and its stream too (on a deterministic target). If no
    prompt ends by itself the model never stops on its own: SKIP, never PASS."""
    for body in end_turn_bodies(target):
        reason = stop_reason(create_json(target, body), where=MESSAGE)
        if reason == "max_tokens":
            continue  # the model went on talking: try another prompt
        expect_stop(reason, "end_turn", "stop_reason of a turn the model ended itself")
        run = expect_stream(stream_raw(target, body))
        streamed = stop_reason(run.last("message_delta"), "delta.stop_reason", where="the last message_delta")
        if target.deterministic or streamed != "max_tokens":
            expect_stop(streamed, "end_turn", "streamed stop_reason of the same turn")
        return
    tried = len(END_TURN_PROMPTS)
    pytest.skip(f"the model ended none of {tried} prompts by itself within {END_TURN_MAX_TOKENS} tokens")


# MSG-023 fills the window up to this many tokens short of it; max_tokens asks for more.
WINDOW_MARGIN = 12
WINDOW_MAX_TOKENS = 48
# Filling a larger window costs a prompt of that many tokens on every run: not judged above.
MAX_FILLED_WINDOW = 131_072
FILLER_WORD = " go"


def _window_body(target: Target, words: int, max_tokens: int, *, prefill: bool) -> dict[str, Any]:
    """A turn of `words` repetitions the model should go on repeating: as an assistant prefill
    (a small model continues a run of words where it would answer a long user turn with an end),
    or, where the target refuses prefills, in the user turn."""
    ask = "Write the word go again and again, and never stop"
    if prefill:
        filler = "go" + FILLER_WORD * words
        turns = [{"role": "user", "content": f"{ask}."}, {"role": "assistant", "content": filler}]
    else:
        turns = [{"role": "user", "content": f"{ask}:" + FILLER_WORD * words}]
    return message_body(target, max_tokens=max_tokens, messages=turns)


def _input_tokens(target: Target, words: int, *, prefill: bool) -> int:
    message = create_json(target, _window_body(target, words, 1, prefill=prefill))
    return total_input_tokens(read(message, "usage", dict, where=MESSAGE), where="the Message's usage")


def _prefill_served(target: Target) -> bool:
    """Whether a short prefill of the filler is answered (some models refuse prefills with a 400)."""
    if not target.prefill:
        return False
    response = target.request("POST", "/v1/messages", json_body=_window_body(target, 10, 1, prefill=True))
    return response.status_code == 200


@prop(
    "MSG-023",
    Level.SHOULD,
    "A turn cut by the context window reports model_context_window_exceeded",
    url=f"{MESSAGES}#response-stop-reason",
    requirement="When prompt plus max_tokens is past the model's context window (max_input_tokens "
    "of its ModelInfo) and the window, not max_tokens, ends the turn, stop_reason is "
    "'model_context_window_exceeded' (not 'max_tokens', which means max_tokens was reached), and "
    "no more tokens are generated than the window holds. A target may instead refuse such a "
    "request with a 400 (the API's behaviour before the stop reason): not judged then. "
    "The stop reason is documented only by the SDK's docstring (\"exceeded the model's context "
    'window"), so this is a SHOULD.',
    invariant=32,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "model:max_input_tokens",
        "response:stop_reason",
        "stop_reason:model_context_window_exceeded",
    ),
)
def test_msg_023_context_window_stop(target: Target, model_info: dict[str, Any] | None) -> None:
    """Reads the window from the ModelInfo, measures the prompt's tokens per word (two max_tokens
    1 requests; the filler is an assistant prefill where the target takes one), then sends a
    prompt WINDOW_MARGIN tokens short of the window with max_tokens WINDOW_MAX_TOKENS, correcting
    the size from the usage it gets (a 400 once: smaller). A turn the model ends by itself inside
    the margin is not judged."""
    window = read_optional(model_info, "max_input_tokens", int, where="the ModelInfo")
    if window is None:
        pytest.skip("the target declares no context window (ModelInfo max_input_tokens)")
    if window > MAX_FILLED_WINDOW:
        pytest.skip(f"the window is {window} tokens: filling it is past this property's budget")
    prefill = _prefill_served(target)
    base = _input_tokens(target, 100, prefill=prefill)
    per_word = (_input_tokens(target, 200, prefill=prefill) - base) / 100
    expect(per_word > 0, "usage: input_tokens grows with the prompt", per_word)
    words = int(100 + (window - WINDOW_MARGIN - base) / per_word)
    refused = 0
    for _ in range(4):
        response = target.request(
            "POST", "/v1/messages", json_body=_window_body(target, words, WINDOW_MAX_TOKENS, prefill=prefill)
        )
        if response.status_code == 400 and not refused:  # perhaps past the window: once smaller
            refused, words = 1, words - int(2 * WINDOW_MARGIN / per_word) - 1
            continue
        if response.status_code == 400:
            not_judged(
                f"a prompt of ~{window - 3 * WINDOW_MARGIN} tokens with max_tokens {WINDOW_MAX_TOKENS} "
                f"(window {window}) is refused with a 400: the stop reason is never reached"
            )
        message = expect_message(response)
        usage = read(message, "usage", dict, where=MESSAGE)
        used_in = total_input_tokens(usage, where="the Message's usage")
        used_out = read(usage, "output_tokens", int, where="the Message's usage")
        reason = stop_reason(message, where=MESSAGE)
        room = window - used_in
        if room >= WINDOW_MAX_TOKENS:  # the estimate fell short: correct it and try again
            words += int((room - WINDOW_MARGIN) / per_word) or 1
            continue
        expect(
            used_out <= room,
            f"output_tokens within the {room} tokens the window leaves after {used_in} input tokens",
            used_out,
            reason="past-window",
        )
        if reason in ("end_turn", "stop_sequence") and used_out < room:
            not_judged(f"the model ended its turn by itself after {used_out} of the window's {room} tokens")
        expect_stop(reason, "model_context_window_exceeded", f"stop_reason with {room} tokens of window left")
        return
    not_judged(f"no prompt within 4 tries left fewer than {WINDOW_MAX_TOKENS} tokens of the window")


@prop(
    "MSG-024",
    Level.MUST,
    "The answer names the model asked for, streamed or not",
    url=f"{MESSAGES}#response-model",
    requirement="A Message's model is the model the request named, or what the target's own model "
    "routes resolve that name to (an alias's dated id: the id GET /v1/models/{model} answers with, "
    "or the model the profile's [aliases] map it to), and the stream's message_start names the "
    "same model as the non-streamed answer to the same request. A gateway that answers every "
    "request with its own default model, or names its backend's model only when streaming, breaks "
    "it.",
    source="schema: OpenAPI Message.model — the response's `model` is the request's Model type, "
    '"The model that will complete your prompt"; docs: build-with-claude/streaming#event-types — '
    '"`message_start`: contains a `Message` object with empty `content`"',
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models/{model_id}",
        "request:stream",
        "response:model",
        "event:message_start",
    ),
)
def test_msg_024_response_model(target: Target, model_info: dict[str, Any] | None) -> None:
    """One short request, plain and streamed. `model_info` (the session's ModelInfo, by id or
    from the list) gives the id the target resolves the name to."""
    named = {target.model}
    resolved = model_info.get("id") if isinstance(model_info, dict) else None
    if isinstance(resolved, str):
        named.add(resolved)
    aliased = target.config.profile.aliases.get(target.model)
    if aliased:
        named.add(aliased)
    body = message_body(target, max_tokens=4)
    cases = Cases()
    plain = streamed = None
    with cases.case("the Message"):
        plain = read(create_json(target, body), "model", str, where=MESSAGE)
        expect(
            plain in named,
            f"model one of {sorted(named)} {ALIAS_HINT}",
            plain,
            reason="model",
            subject=MODEL_REWRITTEN,
        )
    with cases.case("the stream's message_start"):
        start = expect_stream(stream_raw(target, body)).first("message_start")
        streamed = read(start, "message.model", str, where="message_start")
        expect(
            streamed in named,
            f"model one of {sorted(named)} {ALIAS_HINT}",
            streamed,
            reason="model",
            subject=MODEL_REWRITTEN,
        )
    if plain is not None and streamed is not None:
        with cases.case("streamed and not alike"):
            expect_equal(streamed, plain, "the stream's model vs the non-streamed answer's", reason="model")
    cases.check()


MODEL_REWRITTEN = "the answer names another model than the one asked for"
# Where a gateway maps a name to a model of its backend on purpose, its profile says so.
ALIAS_HINT = "(a profile's [aliases] entry names a model the target answers this name with)"
