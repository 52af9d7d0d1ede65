from __future__ import annotations

import base64
import io
import json
from typing import Any

import pytest
from PIL import Image

from reference_server.engine.base import CacheMark, Turn
from reference_server.errors import InvalidRequestError
from reference_server.protocol import MessageCountTokensParams, MessageCreateParams
from reference_server.validation import (
    build_turns,
    check_cache_breakpoints,
    check_stop_sequences,
    parse_body,
)

JSON = "application/json"
BASE = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def _png() -> str:
    out = io.BytesIO()
    Image.new("RGB", (4, 4), "red").save(out, format="PNG")
    return base64.b64encode(out.getvalue()).decode()


PNG_SOURCE = {"type": "base64", "media_type": "image/png", "data": _png()}


def create(**changes):
    return parse_body(json.dumps({**BASE, **changes}).encode(), JSON, MessageCreateParams)


def validate(**changes) -> None:
    params = create(**changes)
    check_stop_sequences(params.stop_sequences)
    build_turns(params)


def error_of(**changes) -> str:
    with pytest.raises(InvalidRequestError) as info:
        validate(**changes)
    assert info.value.status_code == 400
    return info.value.message


@pytest.mark.parametrize("field", ["model", "messages", "max_tokens"])
def test_missing_required_field_is_named(field):
    body = {k: v for k, v in BASE.items() if k != field}
    with pytest.raises(InvalidRequestError, match=f"^{field}: Field required"):
        parse_body(json.dumps(body).encode(), JSON, MessageCreateParams)


def test_unknown_top_level_field_uses_the_api_wording():
    assert error_of(frobnicate=1) == "frobnicate: Extra inputs are not permitted"


def test_unknown_field_in_a_block_has_the_dotted_path():
    message = error_of(messages=[{"role": "user", "content": [{"type": "text", "text": "a", "x": 1}]}])
    assert message == "messages.0.content.0.text.x: Extra inputs are not permitted"


def test_cache_control_on_thinking_block_is_an_extra_input():
    block = {
        "type": "thinking",
        "thinking": "t",
        "signature": "s",
        "cache_control": {"type": "ephemeral"},
    }
    message = error_of(messages=[{"role": "assistant", "content": [block]}])
    assert message == "messages.0.content.0.thinking.cache_control: Extra inputs are not permitted"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", 1.5),
        ("temperature", -0.1),
        ("top_p", 1.01),
        ("top_k", -1),
        ("max_tokens", -1),
    ],
)
def test_out_of_range_sampling_and_limits(field, value):
    assert error_of(**{field: value}).startswith(f"{field}: ")


@pytest.mark.parametrize("value", ["8", 8.5, True, None])
def test_max_tokens_must_be_an_integer(value):
    assert error_of(max_tokens=value).startswith("max_tokens: ")


def test_sampling_fields_are_accepted():
    params = create(temperature=0, top_p=0.5, top_k=3)
    assert (params.temperature, params.top_p, params.top_k) == (0, 0.5, 3)


def test_metadata_service_tier_cache_control_and_newer_sdk_fields_are_accepted():
    cc = {"type": "ephemeral", "ttl": "1h"}
    params = create(
        metadata={"user_id": "u-1"},
        service_tier="standard_only",
        cache_control={"type": "ephemeral"},
        system=[{"type": "text", "text": "be brief", "cache_control": cc}],
        messages=[{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": cc}]}],
        speed="standard",
        diagnostics={"previous_message_id": None},
        inference_geo="us",
    )
    # Each breakpoint marks the end of its block; the top-level one the end of the last block.
    assert build_turns(params) == (
        Turn("system", "be brief", cache_marks=(CacheMark(8, "1h"),)),
        Turn("user", "hi", cache_marks=(CacheMark(2, "1h"), CacheMark(2, "5m"))),
    )


def test_bad_enum_values_are_rejected():
    assert error_of(service_tier="gold").startswith("service_tier: ")
    ttl = {"type": "ephemeral", "ttl": "2h"}
    bad = [{"role": "user", "content": [{"type": "text", "text": "a", "cache_control": ttl}]}]
    assert error_of(messages=bad).startswith("messages.0.content.0.text.cache_control.ttl: ")
    assert error_of(metadata={"user_id": "x" * 513}).startswith("metadata.user_id: ")


def test_empty_messages():
    assert error_of(messages=[]) == "messages: at least one message is required"


@pytest.mark.parametrize("content", ["", []])
def test_empty_non_final_message(content):
    messages = [{"role": "user", "content": content}, {"role": "assistant", "content": "x"}]
    assert error_of(messages=messages).startswith("messages.0: all messages must have non-empty")


def test_empty_text_block_and_whitespace_only_text():
    empty = [{"role": "user", "content": [{"type": "text", "text": ""}]}]
    assert error_of(messages=empty).startswith("messages.0.content.0.text.text: ")
    blank = [{"role": "user", "content": [{"type": "text", "text": "  \n"}]}]
    assert error_of(messages=blank).startswith("messages.0.content.0.text: ")


def test_consecutive_same_role_turns_are_merged_and_prefill_kept_last():
    params = create(
        system="sys",
        messages=[
            {"role": "user", "content": "a"},
            {
                "role": "user",
                "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}],
            },
            {"role": "assistant", "content": "The answer is"},
        ],
    )
    assert build_turns(params) == (
        Turn("system", "sys"),
        Turn("user", "a\n\nb\n\nc"),
        Turn("assistant", "The answer is"),
    )


def test_empty_final_assistant_message_is_no_prefill():
    params = create(messages=[{"role": "user", "content": "a"}, {"role": "assistant", "content": ""}])
    assert build_turns(params) == (Turn("user", "a"),)


def test_prefill_with_trailing_whitespace_is_rejected_like_the_api():
    messages = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "x "}]
    assert "trailing whitespace" in error_of(messages=messages)


def test_system_role_inside_messages_is_a_mid_conversation_system_turn():
    params = create(
        messages=[
            {"role": "user", "content": "a"},
            {"role": "assistant", "content": "b"},
            {"role": "system", "content": "now be terse"},
            {"role": "user", "content": "c"},
        ]
    )
    assert [t.role for t in build_turns(params)] == ["user", "assistant", "system", "user"]


def test_documents_are_read_as_text_with_their_title():
    document = {
        "type": "document",
        "title": "Memo",
        "source": {"type": "text", "media_type": "text/plain", "data": "Lunch at noon."},
    }
    params = create(messages=[{"role": "user", "content": [document, {"type": "text", "text": "When?"}]}])
    (turn,) = build_turns(params)
    assert turn.text.startswith("Document: Memo")
    assert "Lunch at noon." in turn.text
    assert turn.text.endswith("When?")


def test_citations_are_enabled_on_all_documents_or_none():
    source = {"type": "text", "media_type": "text/plain", "data": "x"}
    cited = {"type": "document", "source": source, "citations": {"enabled": True}}
    plain = {"type": "document", "source": source}
    for first, second in ((cited, plain), (plain, cited)):
        assert error_of(messages=[{"role": "user", "content": [first, second]}]) == (
            "messages.0.content.1.citations: citations must be enabled on all or none of the documents"
            " in a request"
        )


def test_citable_documents_are_numbered_with_the_quoting_syntax():
    source = {"type": "text", "media_type": "text/plain", "data": "Lunch at noon."}
    cited = {"type": "document", "source": source, "title": "Memo", "citations": {"enabled": True}}
    params = create(messages=[{"role": "user", "content": [cited, cited, {"type": "text", "text": "When?"}]}])
    documents: list[Any] = []
    (turn,) = build_turns(params, documents=documents)
    assert [d.cite_index for d in documents] == [0, 1]
    assert turn.text.startswith("Document 0: Memo\nQuote it as <cite 0>its exact sentences</cite>.")
    assert "Document 1: Memo\nQuote it as <cite 1>" in turn.text


def test_an_image_is_checked_before_the_text_only_refusal():
    image = {"type": "image", "source": {**PNG_SOURCE, "media_type": "image/jpeg"}}
    assert "does not match the provided media type image/jpeg" in error_of(
        messages=[{"role": "user", "content": [image]}]
    )


@pytest.mark.parametrize(
    ("changes", "needle"),
    [
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image", "source": PNG_SOURCE}],
                    }
                ]
            },
            "messages.0.content.0: image input is not supported",
        ),
        (
            {
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "document", "source": {"type": "url", "url": "u"}}],
                    }
                ]
            },
            "messages.0.content.0.source: URL document sources are not supported",
        ),
    ],
)
def test_features_the_server_lacks_are_refused_plainly(changes, needle):
    message = error_of(**changes)
    assert needle in message
    assert "not supported" in message


def test_thinking_disabled_and_tool_choice_none_are_fine():
    params = create(thinking={"type": "disabled"}, tool_choice={"type": "none"})
    assert [turn.text for turn in build_turns(params)] == ["hi"]


def test_whitespace_stop_sequence_is_rejected():
    assert error_of(stop_sequences=["ok", " "]).startswith("stop_sequences.1: ")


def test_malformed_json_wrong_content_type_and_non_object():
    with pytest.raises(InvalidRequestError, match="not valid JSON"):
        parse_body(b"{", JSON, MessageCreateParams)
    with pytest.raises(InvalidRequestError, match="content-type"):
        parse_body(b"{}", "text/plain", MessageCreateParams)
    with pytest.raises(InvalidRequestError, match="JSON object"):
        parse_body(b"[]", JSON, MessageCreateParams)
    assert parse_body(json.dumps(BASE).encode(), "application/json; charset=utf-8", MessageCreateParams)


def test_count_tokens_rejects_create_only_fields():
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}
    with pytest.raises(InvalidRequestError, match=r"^max_tokens: Extra inputs"):
        parse_body(json.dumps(body).encode(), JSON, MessageCountTokensParams)


def test_more_than_four_cache_breakpoints():
    cc = {"type": "ephemeral"}
    blocks = [{"type": "text", "text": f"p{i}", "cache_control": cc} for i in range(4)]
    params = create(messages=[{"role": "user", "content": blocks}])
    check_cache_breakpoints(params)  # four is fine
    params = create(messages=[{"role": "user", "content": blocks}], cache_control=cc)
    with pytest.raises(InvalidRequestError, match="Found 5"):
        check_cache_breakpoints(params)
