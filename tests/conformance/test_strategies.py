"""The generated requests are what they claim: valid ones pass the request schema, and each
breaker breaks it (or a documented rule the schema cannot express)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from conformance.schemas import validate_request
from conformance.strategies import BREAKERS, invalid_requests, valid_requests

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
