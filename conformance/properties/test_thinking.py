"""THINK-*: extended thinking: signed thinking blocks before the answer, their streamed form
(thinking_delta, then one signature_delta), thinking tokens in usage, the round trip of
thinking blocks through the history (unchanged accepted, changed or forged refused), `display:
omitted`, no thinking when none is asked for, and the rules that thinking excludes (forced
tool_choice, temperature other than 1, top_k). Each runs only on a target that serves thinking
(the profile, or the model's `capabilities.thinking`: conformance/features.py); a target that
says it serves thinking and breaks it fails.

Requests are cheap on any model (conformance/generating/thinking.py): adaptive thinking, small max_tokens,
effort low where the model takes it. Adaptive thinking lets a model skip thinking, so a property
that needs a thinking block SKIPs when none comes (never PASSes); with `enabled` thinking (a
model without adaptive) a missing block is a failure. The shape of the blocks is THINK-001's and
THINK-002's rule; the others read the fields they need. Invalid budgets are ERR-005's.
"""

from __future__ import annotations

from typing import Any

import pytest

from conformance.catalogue import Level, prop
from conformance.generating.thinking import (
    StreamedThinking,
    follow_up_body,
    streamed_thinking,
    thinking_blocks,
    thinking_body,
)
from conformance.generating.tooluse import tool_body
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    json_object,
    not_judged,
    precondition,
    read,
    read_optional,
)
from conformance.wire.accumulate import AccumulationError, accumulate_transcript
from conformance.wire.drivers import StreamRun, create_json, expect_stream, message_body, stream_raw
from conformance.wire.target import Target

THINKING = "build-with-claude/extended-thinking"
MESSAGES = "api/messages"
MESSAGE = "the Message"
ANSWER_BLOCKS = ("text", "tool_use")
TAMPER = " So the answer is five."
_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_ROTATE = str.maketrans(_B64, _B64[1:] + _B64[0])

Info = dict[str, Any] | None


def no_thinking(body: dict[str, Any], what: str) -> None:
    """No thinking block came: adaptive thinking may skip it (SKIP); enabled thinking may not."""
    if body["thinking"]["type"] == "adaptive":
        pytest.skip(f"{what}: no thinking block (adaptive thinking lets the model skip thinking)")
    raise ConformanceFailure(
        f"{what}: a thinking block (thinking enabled)", "no thinking block", reason="no-thinking"
    )


def answer_with_thinking(target: Target, model_info: Info, **changes: Any) -> tuple[dict[str, Any], Any]:
    """(request, Message) of a thinking request whose answer has a thinking block."""
    body = thinking_body(target, model_info, **changes)
    message = create_json(target, body)
    if not thinking_blocks(message):
        no_thinking(body, MESSAGE)
    return body, message


def stream_with_thinking(
    target: Target, model_info: Info, **changes: Any
) -> tuple[dict[str, Any], StreamRun, list[StreamedThinking]]:
    body = thinking_body(target, model_info, **changes)
    run = expect_stream(stream_raw(target, body))
    blocks = streamed_thinking(run)
    if not blocks:
        no_thinking(body, "the stream")
    return body, run, blocks


def sent_back(message: dict[str, Any], change: Any = None) -> list[Any]:
    """The Message's content to send back, its first thinking block changed by `change`."""
    content = [dict(b) if isinstance(b, dict) else b for b in read(message, "content", list, where=MESSAGE)]
    if change is not None:
        index = thinking_blocks(message)[0][0]
        change(content[index])
    return content


def answered_or_skip(content: list[Any], what: str) -> None:
    """A turn cut by max_tokens inside its thinking has no answer to send back as a whole turn
    (the API may refuse an assistant turn of thinking alone): not judged."""
    if not any(isinstance(b, dict) and b.get("type") in ANSWER_BLOCKS for b in content):
        pytest.skip(
            f"{what}: no text or tool_use after the thinking (cut by max_tokens), nothing to send back"
        )


def forged(signature: Any) -> str:
    """Another signature of the same length and alphabet: one the target never made."""
    text = signature if isinstance(signature, str) and signature else "cGx1bWJsaW5l"
    return text.translate(_ROTATE)


def expect_refused(target: Target, body: dict[str, Any], what: str) -> None:
    response = target.request("POST", "/v1/messages", json_body=body)
    if response.status_code == 200:
        raise ConformanceFailure(
            f"HTTP 400 invalid_request_error: {what}",
            f"HTTP 200: {response.text[:300]}",
            reason="accepted",
        )
    expect_error(response, 400, "invalid_request_error")


def expect_accepted(target: Target, body: dict[str, Any], what: str) -> dict[str, Any]:
    """HTTP 200 and a Message for `body`."""
    response = target.request("POST", "/v1/messages", json_body=body)
    expect(
        response.status_code == 200,
        f"HTTP 200: {what}",
        f"HTTP {response.status_code}: {response.text[:300]}",
        reason="refused",
    )
    message = json_object(response, MESSAGE)
    expect_equal(message.get("type"), "message", "type of the answer", reason="not-a-message")
    read(message, "content", list, where=MESSAGE)
    return message


@prop(
    "THINK-001",
    Level.MUST,
    "Thinking blocks are signed and come before the answer",
    url=f"{THINKING}#how-extended-thinking-works",
    requirement="With thinking on, the response holds thinking blocks (type, thinking text, "
    "a non-empty signature) followed by the text (and tool_use) blocks of the answer.",
    source="docs: build-with-claude/extended-thinking#how-extended-thinking-works; OpenAPI "
    'ResponseThinkingBlock — "The API response will include `thinking` content blocks, followed '
    'by `text` content blocks."; ResponseThinkingBlock required [signature, thinking, type]',
    invariant=44,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:thinking.type",
        "response:content",
        "block:thinking",
        "block:text",
    ),
)
def test_think_001_signed_blocks_first(target: Target, model_info: Info) -> None:
    """A non-streamed thinking request; every thinking block carries a signature and precedes
    every text and tool_use block."""
    _, message = answer_with_thinking(target, model_info)
    content = read(message, "content", list, where=MESSAGE)
    for n, block in thinking_blocks(message):
        read(block, "thinking", str, where=f"thinking block {n}")
        signature = read(block, "signature", str, where=f"thinking block {n}")
        expect(bool(signature), f"thinking block {n}: a non-empty signature", '""', reason="signature-empty")
    kinds = [block.get("type") if isinstance(block, dict) else None for block in content]
    thoughts = [n for n, kind in enumerate(kinds) if kind in ("thinking", "redacted_thinking")]
    answer = [n for n, kind in enumerate(kinds) if kind in ANSWER_BLOCKS]
    expect(
        not answer or max(thoughts) < min(answer),
        "thinking blocks before the text and tool_use blocks",
        f"content types in order: {kinds}",
        reason="thinking-order",
    )


@prop(
    "THINK-002",
    Level.MUST,
    "A streamed thinking block ends with exactly one signature_delta",
    url=f"{THINKING}#streaming-thinking",
    requirement="A streamed thinking block starts empty, takes thinking_delta events, and its "
    "signature arrives in one signature_delta sent just before the block's content_block_stop.",
    source='docs: build-with-claude/streaming#thinking-delta — "For thinking content, a special '
    '`signature_delta` event is sent just before the `content_block_stop` event."',
    invariant=60,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:stream",
        "event:content_block_start",
        "event:content_block_delta",
        "event:content_block_stop",
        "block:thinking",
        "delta:signature_delta",
    ),
)
def test_think_002_signature_delta_last(target: Target, model_info: Info) -> None:
    _, _, blocks = stream_with_thinking(target, model_info)
    cases = Cases()
    for block in blocks:
        with cases.case(f"thinking block {block.index}"):
            kinds = [delta.get("type") for delta in block.deltas]
            expect(
                len(block.signatures) == 1,
                "exactly one signature_delta",
                f"{len(block.signatures)} signature_delta in the deltas {kinds}",
                reason="signature-count",
            )
            expect(
                bool(kinds) and kinds[-1] == "signature_delta",
                "the signature_delta as the block's last delta",
                f"deltas in order: {kinds}",
                reason="signature-not-last",
            )
            expect(block.stopped, "a content_block_stop for the block", "none", reason="block-not-stopped")
            signature = block.signatures[0]
            expect(
                isinstance(signature, str) and bool(signature),
                "a non-empty signature string",
                signature,
                reason="signature-empty",
            )
    cases.check()


@prop(
    "THINK-003",
    Level.MUST,
    "Streamed thinking_deltas join into the signed thinking",
    url=f"{THINKING}#streaming-thinking",
    requirement="The thinking_delta texts of a streamed thinking block, joined, are the block's "
    "thinking: the message the SDK accumulates holds them, and that block sent back in the "
    "history unchanged (its text and signature) is accepted as the target's own.",
    source="docs: build-with-claude/streaming#thinking-delta; "
    'build-with-claude/extended-thinking#preserving-thinking-blocks — "These deltas correspond to'
    ' the `thinking` field of the `thinking` content blocks."; blocks must be passed back '
    "unmodified",
    invariant=62,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:stream",
        "request:messages[].content",
        "event:content_block_delta",
        "block:thinking",
        "delta:thinking_delta",
        "delta:signature_delta",
    ),
)
def test_think_003_deltas_join(target: Target, model_info: Info) -> None:
    """A thinking stream, folded as the SDK folds it, then sent back as the next turn's history:
    a target whose deltas do not add up to what it signed refuses its own thinking."""
    body, run, blocks = stream_with_thinking(target, model_info)
    assert run.transcript is not None  # expect_stream attached it
    try:
        final = accumulate_transcript(run.transcript)
    except (AccumulationError, KeyError, TypeError, AttributeError) as exc:
        not_judged(f"the stream cannot be folded into a message ({exc!r})", judged_by="STREAM-009")
    folded_content = final.get("content")
    content: list[Any] = folded_content if isinstance(folded_content, list) else []
    for block in blocks:
        folded = content[block.index] if block.index < len(content) else None
        folded = folded if isinstance(folded, dict) else {}
        expect_equal(
            folded.get("thinking"),
            block.joined,
            f"thinking of block {block.index} (the SDK's fold) vs its thinking_deltas joined",
            reason="thinking-deltas",
        )
    answered_or_skip(content, "the stream")
    expect_accepted(
        target,
        follow_up_body(body, content),
        "the streamed thinking (deltas joined, the signature_delta's signature) sent back unchanged",
    )


@prop(
    "THINK-004",
    Level.MUST,
    "thinking_tokens is at most output_tokens",
    url=f"{MESSAGES}#response-usage",
    requirement="usage.output_tokens_details.thinking_tokens counts the thinking tokens among the "
    "output tokens: when reported, it is at most usage.output_tokens, streamed or not.",
    source="docs: api/messages#response-usage (SDK types/output_tokens_details.py) — thinking_tokens: "
    '"Always ≤ `output_tokens`"',
    invariant=49,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:stream",
        "response:usage.output_tokens",
        "response:usage.output_tokens_details",
        "response:usage.output_tokens_details.thinking_tokens",
        "event:message_delta",
    ),
)
def test_think_004_thinking_tokens(target: Target, model_info: Info) -> None:
    body = thinking_body(target, model_info)
    cases = Cases()
    reported = 0
    answers: list[tuple[str, Any]] = [
        ("plain", read(create_json(target, body), "usage", dict, where=MESSAGE))
    ]
    run = expect_stream(stream_raw(target, body))
    answers.append(
        ("streamed", read(run.last("message_delta"), "usage", dict, where="the last message_delta"))
    )
    for name, usage in answers:
        with cases.case(name):
            where = f"usage ({name})"
            thinking = read_optional(usage, "output_tokens_details.thinking_tokens", int, where=where)
            if thinking is None:
                continue
            reported += 1
            output = read(usage, "output_tokens", int, where=where)
            expect(
                thinking <= output,
                f"thinking_tokens <= output_tokens ({output})",
                thinking,
                reason="thinking-tokens",
            )
    cases.check()
    if not reported:
        pytest.skip("usage.output_tokens_details.thinking_tokens is not reported (it is optional)")


@prop(
    "THINK-005",
    Level.MUST,
    "A thinking block sent back changed is refused",
    url=f"{THINKING}#preserving-thinking-blocks",
    requirement="Thinking blocks must be passed back unmodified: a thinking block whose text was "
    "changed, sent back in an assistant turn of the history, is a 400 invalid_request_error.",
    source='docs: api/errors#common-validation-errors; SDK types/thinking_block_param.py — "Thinking '
    "blocks must be passed back unmodified and in their original order; a modified block results "
    'in a 400 `invalid_request_error`."; errors page: edited thinking blocks in the most recent '
    'assistant message return "a 400 …',
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:messages[].content",
        "block:thinking",
        "error:invalid_request_error",
    ),
)
def test_think_005_changed_text_refused(target: Target, model_info: Info) -> None:
    """The same history sent back unchanged first: where that is refused too (THINK-007's
    finding, or a turn of thinking alone, which the API may refuse), a 400 says nothing of the
    change."""
    body, message = accepted_unchanged(target, model_info)

    def change(block: dict[str, Any]) -> None:
        block["thinking"] = f"{block.get('thinking', '')}{TAMPER}"

    expect_refused(target, follow_up_body(body, sent_back(message, change)), "the thinking text was changed")


def accepted_unchanged(target: Target, model_info: Info) -> tuple[dict[str, Any], Any]:
    """(request, Message) of an answer with thinking whose history, sent back unchanged, is
    accepted: the precondition of judging a changed one refused."""
    body, message = answer_with_thinking(target, model_info)
    content = sent_back(message)
    answered_or_skip(content, MESSAGE)
    with precondition("the thinking sent back unchanged accepted", judged_by="THINK-007"):
        expect_accepted(target, follow_up_body(body, content), "the thinking sent back unchanged")
    return body, message


@prop(
    "THINK-006",
    Level.MUST,
    "A thinking block sent back with a forged signature is refused",
    url=f"{THINKING}#thinking-encryption",
    requirement="The signature verifies the thinking block was generated by the model: a block "
    "sent back with a signature the target never made is a 400 invalid_request_error.",
    source="docs: build-with-claude/thinking#thinking-encryption; "
    'build-with-claude/thinking#preserved-thinking — signature: "Used to verify that the block '
    'was generated by Claude."; "A tampered or undecryptable signature is a different failure: it'
    " always returns a 400 (`` Invalid `signature` in `thinking` block ``, with no reason "
    'clause)"',
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:messages[].content",
        "block:thinking",
        "error:invalid_request_error",
    ),
)
def test_think_006_forged_signature_refused(target: Target, model_info: Info) -> None:
    """As THINK-005: judged where the history sent back unchanged is accepted."""
    body, message = accepted_unchanged(target, model_info)

    def change(block: dict[str, Any]) -> None:
        block["signature"] = forged(block.get("signature"))

    expect_refused(target, follow_up_body(body, sent_back(message, change)), "the signature was forged")


@prop(
    "THINK-007",
    Level.MUST,
    "A thinking block sent back unchanged is accepted",
    url=f"{THINKING}#preserving-thinking-blocks",
    requirement="The thinking blocks of an answer, passed back unchanged in the assistant turn "
    "of the history, are accepted: the conversation continues with a 200 and a Message.",
    source='docs: build-with-claude/extended-thinking#preserving-thinking-blocks — "During tool use, you'
    " must pass `thinking` blocks back to the API for the last assistant message. Include the "
    'complete unmodified block back to the API"',
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:messages[].content",
        "block:thinking",
        "response:content",
    ),
)
def test_think_007_unchanged_accepted(target: Target, model_info: Info) -> None:
    body, message = answer_with_thinking(target, model_info)
    content = sent_back(message)
    answered_or_skip(content, MESSAGE)
    expect_accepted(target, follow_up_body(body, content), "the thinking sent back unchanged")


@prop(
    "THINK-008",
    Level.MUST,
    "display omitted gives empty thinking with a signature",
    url=f"{THINKING}#controlling-thinking-display",
    requirement='With thinking display "omitted" a thinking block has an empty thinking text but '
    "still a non-empty signature (for multi-turn continuity); streamed, it takes no thinking "
    "text, only its signature_delta.",
    source='docs: build-with-claude/thinking#controlling-thinking-display — "When `display: \\"omitted\\"`'
    ' is set, the response contains `thinking` blocks with an empty `thinking` field"; "When '
    'streaming with `display: \\"omitted\\"`, no `thinking_delta` events are emitted"; docstring: '
    '"a signature is returned for …',
    invariant=45,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:thinking.display",
        "request:stream",
        "block:thinking",
        "delta:signature_delta",
    ),
)
def test_think_008_display_omitted(target: Target, model_info: Info) -> None:
    cases = Cases()
    with cases.case("plain"):
        _, message = answer_with_thinking(target, model_info, display="omitted")
        for n, shown_block in thinking_blocks(message):
            shown = read(shown_block, "thinking", str, where=f"thinking block {n}")
            expect(shown == "", f'thinking block {n}: thinking ""', shown, reason="omitted-text")
            signature = read(shown_block, "signature", str, where=f"thinking block {n}")
            expect(bool(signature), f"thinking block {n}: a signature", '""', reason="signature-empty")
    with cases.case("streamed"):
        _, _, blocks = stream_with_thinking(target, model_info, display="omitted")
        for block in blocks:
            expect(
                block.joined == "",
                f"block {block.index}: no thinking text",
                block.joined,
                reason="omitted-text",
            )
            expect(
                any(isinstance(s, str) and s for s in block.signatures),
                f"block {block.index}: a signature_delta with a signature",
                block.signatures,
                reason="signature-empty",
            )
    cases.check()


@prop(
    "THINK-009",
    Level.MUST,
    "No thinking blocks when thinking is off",
    url=f"{THINKING}#how-extended-thinking-works",
    requirement="Thinking blocks come only with thinking on: with {type: disabled} the answer holds "
    "no thinking or redacted_thinking block, streamed or not (with thinking absent too: a SHOULD "
    "sub-case, since the docs leave the default to the model).",
    source="docs: build-with-claude/thinking; SDK types/message_create_params.py thinking; "
    'api/errors#common-validation-errors (Thinking cannot be disabled) — "Which `type` values are'
    ' accepted, and what happens when you omit `thinking`, depend on the model."; "thinking: '
    '{\\"type\\": \\"disabled\\"} turns it off on models that accept that value"; on some models '
    '"thinking is always on" and disabled …',
    invariant=44,
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:thinking.type",
        "request:stream",
        "response:content",
        "event:content_block_start",
    ),
)
def test_think_009_none_when_off(target: Target) -> None:
    cases = Cases()
    thoughts = ("thinking", "redacted_thinking")
    # Without `thinking` the newest models think by default (the docs leave it to the model):
    # the absent case is a SHOULD; {type: disabled} turns thinking off, a MUST.
    for name, changes, level in (
        ("absent", {}, Level.SHOULD),
        ("disabled", {"thinking": {"type": "disabled"}}, None),
    ):
        body = message_body(target, **changes)
        with cases.case(f"thinking {name}", level=level):
            content = read(create_json(target, body), "content", list, where=MESSAGE)
            kinds = [block.get("type") for block in content if isinstance(block, dict)]
            expect(not set(kinds) & set(thoughts), "no thinking block", kinds, reason="thinking-not-asked")
        with cases.case(f"thinking {name}, streamed", level=level):
            run = expect_stream(stream_raw(target, body))
            started = [
                event["content_block"].get("type")
                for event in run.of_type("content_block_start")
                if isinstance(event.get("content_block"), dict)
            ]
            expect(
                not set(started) & set(thoughts), "no thinking block", started, reason="thinking-not-asked"
            )
    cases.check()


@prop(
    "THINK-010",
    Level.MUST,
    "Thinking with a forcing tool_choice is refused",
    url=f"{THINKING}#extended-thinking-with-tool-use",
    requirement="With thinking on only tool_choice auto or none is allowed: tool_choice any or "
    "tool (forcing a call) is a 400 invalid_request_error.",
    source='docs: build-with-claude/extended-thinking#extended-thinking-with-tool-use — "Tool use with '
    'thinking only supports `tool_choice: {\\"type\\": \\"auto\\"}` (the default) or `tool_choice: '
    '{\\"type\\": \\"none\\"}`. Using `tool_choice: {\\"type\\": \\"any\\"}` or `tool_choice: {\\"type\\": '
    '\\"tool\\", \\"name\\": \\"...\\"}` will result …',
    invariant=18,
    requires=("thinking", "tools"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:tools",
        "request:tool_choice",
        "request:tool_choice.type",
        "request:tool_choice.name",
        "error:invalid_request_error",
    ),
)
def test_think_010_forced_choice_refused(target: Target, model_info: Info) -> None:
    """The request breaks no other rule: no temperature, a budget within max_tokens."""
    thinking = thinking_body(target, model_info)
    cases = Cases()
    for choice in ({"type": "any"}, {"type": "tool", "name": "record_colour"}):
        with cases.case(f"tool_choice {choice['type']}"):
            body = tool_body(target, tool_choice=choice, thinking=thinking["thinking"])
            body.pop("temperature", None)
            body["max_tokens"] = thinking["max_tokens"]
            expect_refused(target, body, f"thinking with tool_choice {choice['type']}")
    cases.check()


@prop(
    "THINK-011",
    Level.SHOULD,
    "Thinking with temperature other than 1, or top_k, is refused",
    url=f"{THINKING}#feature-compatibility",
    requirement="Thinking is not compatible with temperature or top_k modifications: temperature "
    "other than 1, or top_k, with thinking on is a 400 invalid_request_error.",
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:temperature",
        "request:top_k",
        "error:invalid_request_error",
    ),
)
def test_think_011_sampling_refused(target: Target, model_info: Info) -> None:
    cases = Cases()
    for field, value in (("temperature", 0), ("top_k", 5)):
        with cases.case(f"{field} {value}"):
            body = {**thinking_body(target, model_info), field: value}
            expect_refused(target, body, f"thinking with {field} {value}")
    cases.check()
