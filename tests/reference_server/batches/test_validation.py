"""What a batch create body must satisfy (400s, 413), and the per-request rules checked when a
request is processed (those become `errored` results)."""

from __future__ import annotations

import asyncio
import json

import pytest

from reference_server.batches import validation
from reference_server.batches.models import MAX_REQUESTS, MessageBatchCreateParams
from reference_server.batches.validation import parse_create, read_limited, read_params
from reference_server.errors import InvalidRequestError, RequestTooLargeError
from reference_server.protocol import MessageCreateParams
from reference_server.validation import parse_body

PARAMS = {"model": "m", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}


def create(requests) -> bytes:
    return json.dumps({"requests": requests}).encode()


def one(custom_id, params=PARAMS):
    return {"custom_id": custom_id, "params": params}


def refused(raw: bytes) -> str:
    with pytest.raises(InvalidRequestError) as caught:
        parse_create(raw, "application/json")
    return caught.value.message


@pytest.mark.parametrize("custom_id", ["a", "A-z_0-9", "x" * 64, "-", "_"])
def test_custom_ids_of_the_documented_pattern_are_accepted(custom_id):
    assert parse_create(create([one(custom_id)]), "application/json").requests[0].custom_id == custom_id


@pytest.mark.parametrize("custom_id", ["", "x" * 65, "has space", "dot.ted", "ünï", "a\n", 7, None])
def test_other_custom_ids_are_a_400_naming_the_field(custom_id):
    assert refused(create([one("fine"), one(custom_id)])).startswith("requests.1.custom_id: ")


def test_a_duplicate_custom_id_is_a_400_naming_both():
    message = refused(create([one("a"), one("b"), one("a")]))
    assert message.startswith("requests.2.custom_id: ")
    assert "requests.0" in message
    assert "unique" in message


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"requests": []}, "requests: "),
        ({}, "requests: "),
        ({"requests": [one("a")], "extra": 1}, "extra: "),
        ({"requests": [{"custom_id": "a"}]}, "requests.0.params: "),
        ({"requests": [{"custom_id": "a", "params": "text"}]}, "requests.0.params: "),
        ({"requests": [{"custom_id": "a", "params": {}, "more": 1}]}, "requests.0.more: "),
    ],
)
def test_the_shape_of_the_body_is_checked_at_creation(body, path):
    assert refused(json.dumps(body).encode()).startswith(path)


def test_params_themselves_are_not_checked_at_creation():
    # Validated when the request runs, where a bad one becomes an `errored` result.
    parsed = parse_create(create([one("a", {"model": 3})]), "application/json")
    assert parsed.requests[0].params == {"model": 3}


def test_at_most_100000_requests():
    item = one("x", {})  # params are not read at creation: the smallest body that says it
    requests = [dict(item, custom_id=f"r{i}") for i in range(MAX_REQUESTS)]
    assert len(MessageBatchCreateParams.model_validate({"requests": requests}).requests) == MAX_REQUESTS
    requests.append(dict(item, custom_id="one-too-many"))
    assert refused(create(requests)) == (
        f"requests: List should have at most {MAX_REQUESTS} items after validation, not {MAX_REQUESTS + 1}"
    )


async def chunks(*parts: bytes):
    for part in parts:
        yield part


def test_a_body_over_the_limit_is_a_413_announced_or_not():
    assert asyncio.run(read_limited(chunks(b"ab", b"cd"), "4", limit=4)) == b"abcd"
    with pytest.raises(RequestTooLargeError):
        asyncio.run(read_limited(chunks(b"ab"), "5", limit=4))  # refused on Content-Length, unread
    with pytest.raises(RequestTooLargeError):
        asyncio.run(read_limited(chunks(b"ab", b"cde"), None, limit=4))  # chunked: while reading


def test_the_batch_limit_is_256_mb():
    assert validation.MAX_BATCH_BODY_BYTES == 256 * 1024 * 1024


def test_stored_params_are_validated_exactly_like_a_messages_body():
    bad = json.dumps({"model": "m", "messages": []})
    with pytest.raises(InvalidRequestError) as batch:
        read_params(bad)
    with pytest.raises(InvalidRequestError) as direct:
        parse_body(bad.encode(), "application/json", MessageCreateParams)
    assert batch.value.message == direct.value.message == "max_tokens: Field required"
    assert read_params(json.dumps(PARAMS)).max_tokens == 8


@pytest.mark.parametrize(
    ("change", "field"),
    [({"stream": True}, "stream"), ({"speed": "fast"}, "speed"), ({"max_tokens": 0}, "max_tokens")],
)
def test_parameters_a_batch_does_not_support_are_refused(change, field):
    with pytest.raises(InvalidRequestError) as caught:
        read_params(json.dumps({**PARAMS, **change}))
    assert caught.value.message.startswith(f"{field}: ")
    assert caught.value.status_code == 400


def test_stream_false_is_accepted():
    assert read_params(json.dumps({**PARAMS, "stream": False})).stream is False
