"""schemas/ is derived reproducibly, documents its overlays, and validates what the SDK sees."""

from __future__ import annotations

import copy
import datetime
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest
import schemathesis
from anthropic.types import Message, ModelInfo, RawMessageStreamEvent
from anthropic.types.shared import ErrorResponse
from pydantic import TypeAdapter

from conformance.judging import schemas
from conformance.judging.schemas import (
    EVENT_TYPES,
    openapi_path,
    validate_error,
    validate_event,
    validate_request,
    validate_response,
)

REPO = Path(__file__).resolve().parents[2]
SPEC = REPO.parent / "shared" / "spec" / "anthropic-openapi-2026-05.json"
SCHEMAS = REPO / "schemas"

USAGE: dict[str, Any] = {
    "input_tokens": 12,
    "output_tokens": 6,
    "cache_creation_input_tokens": 0,
    "cache_read_input_tokens": 0,
    "cache_creation": {"ephemeral_5m_input_tokens": 0, "ephemeral_1h_input_tokens": 0},
    "server_tool_use": None,
    "service_tier": "standard",
    "inference_geo": "global",
    "output_tokens_details": {"thinking_tokens": 0},
    "speed": "standard",
}
MESSAGE: dict[str, Any] = {
    "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
    "type": "message",
    "role": "assistant",
    "model": "claude-opus-4-6",
    "content": [
        {"type": "thinking", "thinking": "Greet back.", "signature": "EqQBCgIYAhIM"},
        {"type": "text", "text": "Hi! My name is Claude.", "citations": None},
        {
            "type": "tool_use",
            "id": "toolu_01D7FLrfh4GYq7yT1ULFeyMV",
            "name": "get_weather",
            "input": {"location": "Paris"},
            "caller": {"type": "direct"},
        },
    ],
    "stop_reason": "tool_use",
    "stop_sequence": None,
    "stop_details": None,
    "container": None,
    "diagnostics": None,
    "usage": USAGE,
}
MODEL_INFO: dict[str, Any] = {
    "id": "claude-opus-4-6",
    "type": "model",
    "display_name": "Claude Opus 4.6",
    "created_at": "2026-02-04T00:00:00Z",
    "max_input_tokens": 200000,
    "max_tokens": 64000,
    "capabilities": None,
    "lifecycle": "active",
    "deprecated_at": None,
    "retires_at": None,
    "line": "opus",
}
ERROR: dict[str, Any] = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
    "request_id": "req_018EeWyXxfu5pfWkrYcMdjWG",
}


def _start_message() -> dict[str, Any]:
    message = copy.deepcopy(MESSAGE)
    message.update(content=[], stop_reason=None)
    message["usage"] = {**USAGE, "output_tokens": 1}
    return message


EVENTS: list[dict[str, Any]] = [
    {"type": "message_start", "message": _start_message()},
    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
    {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    {
        "type": "content_block_start",
        "index": 1,
        "content_block": {
            "type": "tool_use",
            "id": "toolu_01",
            "name": "get_weather",
            "input": {},
            "caller": {"type": "direct"},
        },
    },
    {
        "type": "content_block_delta",
        "index": 1,
        "delta": {"type": "input_json_delta", "partial_json": '{"location": '},
    },
    {
        "type": "content_block_start",
        "index": 2,
        "content_block": {"type": "thinking", "thinking": "", "signature": ""},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "thinking_delta", "thinking": "h"},
    },
    {
        "type": "content_block_delta",
        "index": 2,
        "delta": {"type": "signature_delta", "signature": "E"},
    },
    {"type": "content_block_stop", "index": 0},
    {
        "type": "message_delta",
        "delta": {
            "stop_reason": "model_context_window_exceeded",
            "stop_sequence": None,
            "stop_details": None,
            "container": None,
        },
        "usage": {
            "output_tokens": 15,
            "input_tokens": None,
            "cache_creation_input_tokens": None,
            "cache_read_input_tokens": None,
            "server_tool_use": None,
            "output_tokens_details": {"thinking_tokens": 3},
        },
    },
    {"type": "message_stop"},
    {"type": "ping"},
    # In-stream errors carry no request_id in the documented example.
    {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
]


def _without(document: dict[str, Any], key: str) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    del copied[key]
    return copied


def _with(document: dict[str, Any], **changes: Any) -> dict[str, Any]:
    copied = copy.deepcopy(document)
    copied.update(changes)
    return copied


# --- derivation ---------------------------------------------------------------------------------


@pytest.mark.skipif(not SPEC.is_file(), reason=f"the source spec is not at {SPEC}")
def test_derivation_reproduces_committed_files_byte_for_byte(tmp_path: Path) -> None:
    script = REPO / "scripts" / "derive_schemas.py"
    subprocess.run(
        [sys.executable, str(script), str(SPEC), "--out", str(tmp_path)],
        check=True,
        capture_output=True,
    )
    fresh = {p.relative_to(tmp_path) for p in tmp_path.rglob("*.json")}
    committed = {p.relative_to(SCHEMAS) for p in SCHEMAS.rglob("*.json")}
    assert fresh == committed
    for relative in sorted(fresh):
        assert (tmp_path / relative).read_bytes() == (SCHEMAS / relative).read_bytes(), relative


def test_generated_files_are_small() -> None:
    total = sum(p.stat().st_size for p in SCHEMAS.rglob("*.json"))
    assert total < 400_000


def test_every_overlay_is_documented_with_existing_provenance() -> None:
    overlays = json.loads(openapi_path().read_text())["info"]["x-plumbline-overlays"]
    readme = (SCHEMAS / "README.md").read_text()
    sdk = Path(anthropic.__file__).parent
    assert overlays
    for entry in overlays:
        assert f"`{entry['name']}`" in readme, entry["name"]
        assert entry["provenance"], entry["name"]
        for source in entry["provenance"]:
            if not source.startswith("https://"):
                assert list(sdk.glob(source)), f"{entry['name']}: {source} not in the SDK"


def test_descriptions_are_gone_but_properties_named_description_stay() -> None:
    components = schemas.load_openapi()["components"]["schemas"]
    assert "description" in components["Tool"]["properties"]
    assert "title" in components["RequestDocumentBlock"]["properties"]
    text = openapi_path().read_text()
    assert "x-stainless" not in text
    assert "[errors documentation]" not in text


def test_spec_constraints_that_matter_are_kept() -> None:
    params = schemas.load_openapi()["components"]["schemas"]["CreateMessageParams"]
    assert params["additionalProperties"] is False
    assert {"temperature", "top_p", "top_k", "stream", "speed", "diagnostics"} <= set(params["properties"])


def test_schemas_dir_prefers_the_wheel_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "conformance"
    (package / "_schemas").mkdir(parents=True)
    (package / "judging").mkdir()
    shutil.copy(Path(schemas.__file__), package / "judging" / "schemas.py")
    shutil.copy(openapi_path(), package / "_schemas" / "openapi.json")
    spec = importlib.util.spec_from_file_location("wheel_schemas", package / "judging" / "schemas.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "wheel_schemas", module)  # dataclasses look it up there
    spec.loader.exec_module(module)
    assert module.schemas_dir() == package / "_schemas"
    assert schemas.schemas_dir() == SCHEMAS


# --- valid documents ----------------------------------------------------------------------------


def test_sdk_shaped_message_validates() -> None:
    Message.model_validate(MESSAGE)  # the SDK reads it: it is SDK-shaped
    assert validate_response("messages_post", 200, MESSAGE) == []
    assert validate_response("POST /v1/messages", 200, MESSAGE) == []


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: e["type"])
def test_each_event_validates(event: dict[str, Any]) -> None:
    if event["type"] not in ("ping", "error"):  # the SDK's union has neither: it skips or raises
        TypeAdapter(RawMessageStreamEvent).validate_python(event)
    assert validate_event(event) == []


def test_every_event_type_has_a_schema_and_an_example() -> None:
    assert {e["type"] for e in EVENTS} == EVENT_TYPES
    for kind in EVENT_TYPES:
        assert schemas.event_schema_path(kind).is_file()


def test_error_envelope_validates_for_4xx_and_5xx() -> None:
    ErrorResponse.model_validate(ERROR)
    assert validate_error(ERROR) == []
    assert validate_response("messages_post", 400, ERROR) == []
    overloaded = _with(ERROR, error={"type": "overloaded_error", "message": "Overloaded"})
    assert validate_response("messages_post", 529, overloaded) == []


def test_model_info_with_sdk_214_fields_validates() -> None:
    ModelInfo.model_validate(MODEL_INFO)
    assert validate_response("models_get", 200, MODEL_INFO) == []


def test_requests_old_and_new_fields_validate() -> None:
    body = {
        "model": "claude-opus-4-6",
        "max_tokens": 64,
        "temperature": 0,
        "speed": "fast",
        "diagnostics": {"previous_message_id": None},
        "thinking": {"type": "between_tools"},
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello"},
        ],
    }
    assert validate_request("messages_post", body) == []
    assert validate_request("messages_post", _with(body, unknown_field=1)) != []


# --- broken documents ---------------------------------------------------------------------------


def _paths(errors: list[schemas.SchemaError]) -> set[str]:
    return {e.path for e in errors}


def test_message_without_id_fails() -> None:
    errors = validate_response("messages_post", 200, _without(MESSAGE, "id"))
    assert [(e.path, e.keyword) for e in errors] == [("$", "required")]
    assert "'id'" in errors[0].message


def test_message_with_wrong_type_fails() -> None:
    errors = validate_response("messages_post", 200, _with(MESSAGE, type="msg"))
    assert _paths(errors) == {"$.type"}


def test_bad_stop_reason_fails() -> None:
    errors = validate_response("messages_post", 200, _with(MESSAGE, stop_reason="done"))
    assert _paths(errors) == {"$.stop_reason"}
    assert errors[0].keyword == "enum"


def test_unknown_content_block_names_the_type() -> None:
    broken = _with(MESSAGE, content=[{"type": "txt", "text": "x"}])
    (error,) = validate_response("messages_post", 200, broken)
    assert error.path == "$.content[0]"
    assert 'unknown type "txt"' in error.message


def test_error_envelope_without_error_type_fails() -> None:
    broken = _with(ERROR, error={"message": "oops"})
    errors = validate_error(broken)
    assert _paths(errors) == {"$.error"}
    assert "'type' is a required property" in errors[0].message


def test_broken_events_fail() -> None:
    assert validate_event([]) != []
    assert validate_event({"index": 0}) != []
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": 1}}
    assert _paths(validate_event(delta)) == {"$.delta.text"}
    no_usage = {"type": "message_delta", "delta": EVENTS[9]["delta"], "usage": {}}
    assert _paths(validate_event(no_usage)) == {"$.usage"}


def test_unknown_event_types_are_not_judged() -> None:
    assert validate_event({"type": "message_progress"}) == []


def test_undocumented_status_and_media_type_are_errors() -> None:
    (status,) = validate_response("models_list", 302, {})
    assert "302" in status.message
    (media,) = validate_response("models_list", 200, {}, media_type="text/html")
    assert "text/html" in media.message
    with pytest.raises(KeyError):
        validate_response("no_such_operation", 200, {})


# --- schemathesis ---------------------------------------------------------------------------------

GA_OPERATIONS = {
    "POST /v1/messages",
    "POST /v1/messages/count_tokens",
    "GET /v1/models",
    "GET /v1/models/{model_id}",
    "POST /v1/messages/batches",
    "GET /v1/messages/batches",
    "GET /v1/messages/batches/{message_batch_id}",
    "DELETE /v1/messages/batches/{message_batch_id}",
    "POST /v1/messages/batches/{message_batch_id}/cancel",
    "GET /v1/messages/batches/{message_batch_id}/results",
}


def _response(status: int, **kwargs: Any) -> httpx.Response:
    request = httpx.Request("POST", "http://target.invalid/v1/messages")
    response = httpx.Response(status, request=request, **kwargs)
    response.read()
    response.elapsed = datetime.timedelta(0)
    return response


def test_schemathesis_loads_every_ga_operation() -> None:
    schema = schemathesis.openapi.from_path(str(openapi_path()))
    labels = {result.ok().label for result in schema.get_all_operations()}
    assert labels == GA_OPERATIONS


def test_schemathesis_checks_json_and_sse_against_the_right_schema() -> None:
    operation = schemathesis.openapi.from_path(str(openapi_path()))["/v1/messages"]["POST"]
    assert operation.is_valid_response(_response(200, json=MESSAGE))
    assert not operation.is_valid_response(_response(200, json=_with(MESSAGE, stop_reason="x")))

    def sse(*events: dict[str, Any]) -> httpx.Response:
        body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
        return _response(200, content=body.encode(), headers={"content-type": "text/event-stream"})

    assert operation.is_valid_response(sse(*EVENTS))
    assert not operation.is_valid_response(sse(MESSAGE))  # a Message is not a stream event
    bad_delta = {"type": "message_delta", "delta": {"stop_reason": "x"}, "usage": {}}
    assert not operation.is_valid_response(sse(bad_delta))


def test_newer_fields_are_required_by_the_schema_and_optional_in_the_sdk() -> None:
    """Each of NEWER_FIELDS is required on some response block of schemas/ and optional (a
    default of None) on every SDK content block that has it: a SHOULD to leave out, not a MUST."""
    from anthropic import types

    from conformance.judging.schemas import NEWER_FIELDS, load_openapi
    from conformance.reporting.sdk_surface import _members

    components = load_openapi()["components"]["schemas"]
    blocks = [member for member in _members(types.ContentBlock) if hasattr(member, "model_fields")]
    for field in NEWER_FIELDS:
        assert any(field in (c.get("required") or []) for c in components.values()), field
        having = [block for block in blocks if field in block.model_fields]
        assert having, field
        assert not any(block.model_fields[field].is_required() for block in having), field


def test_a_newer_field_left_out_is_a_should_sub_case() -> None:
    from conformance.catalogue import Level
    from conformance.judging.checks import ConformanceFailure, expect_no_schema_errors
    from conformance.judging.schemas import validate_component

    call = {"type": "tool_use", "id": "toolu_1", "name": "x", "input": {}}
    with pytest.raises(ConformanceFailure) as caught:
        expect_no_schema_errors(validate_component("ResponseToolUseBlock", call), "a tool_use block")
    assert caught.value.strongest(Level.MUST) is Level.SHOULD  # a WARN
    broken = {**call, "id": "not an id", "input": "text"}
    with pytest.raises(ConformanceFailure) as caught:
        expect_no_schema_errors(validate_component("ResponseToolUseBlock", broken), "a tool_use block")
    assert caught.value.strongest(Level.MUST) is Level.MUST  # the older errors stay a MUST
    assert [b.level for b in caught.value.breakages()] == [None, Level.SHOULD]
