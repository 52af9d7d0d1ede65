"""The generated requests are what they claim: valid ones pass the request schema, and each
breaker breaks it (or a documented rule the schema cannot express); the generated tool and
output schemas stay in the documented supported subset, small, closed and satisfiable."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from jsonschema import Draft202012Validator

from conformance.generating.strategies import (
    BREAKERS,
    EXTENDED_KEYWORDS,
    PATTERNS,
    PORTABLE_KEYWORDS,
    example_of,
    invalid_requests,
    object_schemas,
    uses_extended_keywords,
    valid_requests,
)
from conformance.judging.schemas import validate_request

SEMANTIC_ONLY = {
    "messages empty",
    "empty text block",
    "metadata.user_id too long",
    "thinking budget too small",
}


@settings(max_examples=60, deadline=None)
@given(valid_requests("m"))
def test_valid_requests_match_the_schema(body):
    assert validate_request("POST /v1/messages", body) == []
    assert body["messages"][0]["role"] == "user"
    last = body["messages"][-1]
    if last["role"] == "assistant" and isinstance(last["content"], str):
        assert last["content"] == last["content"].rstrip()


@pytest.mark.parametrize("name", sorted(BREAKERS))
def test_each_breaker_breaks_the_request(name):
    @settings(max_examples=5, deadline=None)
    @given(valid_requests("m"))
    def check(body):
        broken = BREAKERS[name](body)
        assert broken != body
        errors = validate_request("POST /v1/messages", broken)
        if name not in SEMANTIC_ONLY:
            assert errors, f"{name} still matches the schema"

    check()


@settings(max_examples=20, deadline=None)
@given(invalid_requests("m"))
def test_invalid_requests_name_what_they_break(case):
    name, body = case
    assert name in BREAKERS
    assert isinstance(body, dict)


# ------------------------------------------------------------------ JSON schemas for tools and formats

SUPPORTED = PORTABLE_KEYWORDS | EXTENDED_KEYWORDS


def keywords(schema):
    """Every keyword used anywhere in a schema of object_schemas."""
    found = set(schema)
    for sub in [*schema.get("properties", {}).values(), *schema.get("anyOf", []), schema.get("items")]:
        if isinstance(sub, dict):
            found |= keywords(sub)
    return found


@settings(max_examples=150, deadline=None)
@given(object_schemas())
def test_schemas_stay_in_the_supported_subset(schema):
    Draft202012Validator.check_schema(schema)
    assert keywords(schema) <= SUPPORTED, keywords(schema) - SUPPORTED
    assert schema["type"] == "object"
    assert len(json.dumps(schema)) < 1500  # requests stay short


@settings(max_examples=150, deadline=None)
@given(object_schemas())
def test_every_object_is_closed_and_every_string_bounded(schema):
    def walk(sub):
        if sub.get("type") == "object":
            assert sub["additionalProperties"] is False  # what strict mode requires
            assert set(sub.get("required", [])) <= set(sub["properties"])
        if sub.get("type") == "string":
            assert "pattern" in sub or "enum" in sub or "maxLength" in sub
        if "pattern" in sub:
            assert sub["pattern"] in PATTERNS
        for inner in [*sub.get("properties", {}).values(), *sub.get("anyOf", []), sub.get("items")]:
            if isinstance(inner, dict):
                walk(inner)

    walk(schema)


@settings(max_examples=150, deadline=None)
@given(object_schemas())
def test_every_schema_is_satisfiable(schema):
    instance = example_of(schema)
    assert list(Draft202012Validator(schema).iter_errors(instance)) == []
    broken = {**instance, "plumbline_extra": True}  # the faults' undeclared key
    assert list(Draft202012Validator(schema).iter_errors(broken))


@settings(max_examples=60, deadline=None)
@given(object_schemas(), object_schemas())
def test_schemas_make_valid_requests(input_schema, format_schema):
    body = {
        "model": "m",
        "max_tokens": 200,
        "messages": [{"role": "user", "content": "Hi"}],
        "tools": [{"name": "fill_form", "input_schema": input_schema, "strict": True}],
        "tool_choice": {"type": "tool", "name": "fill_form"},
        "output_config": {"format": {"type": "json_schema", "schema": format_schema}},
    }
    assert validate_request("POST /v1/messages", body) == []


@settings(max_examples=100, deadline=None)
@given(object_schemas(extended=False))
def test_portable_schemas_use_no_extended_keyword(schema):
    assert not uses_extended_keywords(schema)
    assert keywords(schema) <= PORTABLE_KEYWORDS


def test_extended_keywords_are_found_anywhere():
    bounded = {"type": "integer", "minimum": 1}
    assert uses_extended_keywords({"type": "object", "properties": {"a": bounded}})
    assert uses_extended_keywords({"type": "array", "items": {"anyOf": [bounded, {"type": "null"}]}})
    assert uses_extended_keywords({"type": "array", "items": {"type": "boolean"}, "minItems": 2})
    assert not uses_extended_keywords({"type": "array", "items": {"type": "boolean"}, "minItems": 1})


@settings(max_examples=80, deadline=None)
@given(object_schemas())
def test_llguidance_compiles_every_schema_without_warnings(schema):
    """The supported subset is what constrained decoding handles (llguidance, when installed)."""
    llguidance = pytest.importorskip("llguidance")
    grammar = llguidance.grammar_from("json_schema", json.dumps(schema))
    assert llguidance.LLMatcher.validate_grammar_with_warnings(grammar) == (False, [])
