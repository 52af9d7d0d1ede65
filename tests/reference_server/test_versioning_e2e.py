"""Both API versions and `--model-behaviour newest` end to end, over a real socket on MLX
(tiny-random), with the official SDK (which sends anthropic-version 2026-10-21): each rule
refused and the same body answered under 2023-06-01; and reproducible sampling at the default
temperature, created, streamed and in a batch."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import anthropic
import httpx
import pytest

from conformance.wire.launcher import reference_server

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("versioning_e2e")]

MODEL = "tiny-random"
LEGACY = {"anthropic-version": "2023-06-01"}
DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": "The lighthouse was built in 1868."},
    "title": "Cape Plumb",
}
CITATION = {
    "type": "char_location",
    "cited_text": "built in 1868",
    "document_index": 0,
    "document_title": "Cape Plumb",
    "start_char_index": 19,
    "end_char_index": 32,
}


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with reference_server(MODEL, log=tmp_path_factory.mktemp("versions") / "server.log") as base:
        yield base


@pytest.fixture(scope="module")
def newest_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("newest") / "server.log"
    with reference_server(MODEL, log=log, args=["--model-behaviour", "newest"]) as base:
        yield base


@pytest.fixture
def client(url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=url, api_key="unused", max_retries=0) as sdk:
        yield sdk


@pytest.fixture
def newest(newest_url: str) -> Iterator[anthropic.Anthropic]:
    with anthropic.Anthropic(base_url=newest_url, api_key="unused", max_retries=0) as sdk:
        yield sdk


def ask(sdk: anthropic.Anthropic, messages: Any, **extra: Any) -> anthropic.types.Message:
    return sdk.messages.create(**{"model": MODEL, "max_tokens": 6, "messages": messages, **extra})


def refused(call: Any, words: str) -> None:
    with pytest.raises(anthropic.BadRequestError) as error:
        call()
    assert error.value.status_code == 400
    body: Any = error.value.body
    assert body["error"]["type"] == "invalid_request_error"
    assert words in body["error"]["message"]


HI = [{"role": "user", "content": "Hi"}]
ASSISTANT_DOCUMENT = [
    {"role": "user", "content": "Show me the record."},
    {"role": "assistant", "content": [DOCUMENT]},
    {"role": "user", "content": "When was it built?"},
]
USER_CITATIONS = [
    {
        "role": "user",
        "content": [
            DOCUMENT,
            {"type": "text", "text": "It was built in 1868.", "citations": [CITATION]},
            {"type": "text", "text": "Right?"},
        ],
    }
]
KEPT = [
    {
        "role": "user",
        "content": [{**DOCUMENT, "citations": {"enabled": True}}, {"type": "text", "text": "When?"}],
    },
    {"role": "assistant", "content": [{"type": "text", "text": "In 1868.", "citations": [CITATION]}]},
    {"role": "user", "content": "Thanks."},
]


@pytest.mark.parametrize("field", ["temperature", "top_p", "top_k"])
def test_sampling_is_refused_by_2026_10_21_and_taken_by_2023_06_01(client, field):
    value = {"temperature": 1.0, "top_p": 0.99, "top_k": 40}[field]
    refused(
        lambda: ask(client, HI, extra_body={field: value}),
        f"{field}: not supported in anthropic-version 2026-10-21",
    )
    assert ask(client, HI, extra_body={field: value}, extra_headers=LEGACY).content


def test_a_document_in_an_assistant_turn_is_refused_by_2026_10_21_only(client):
    refused(lambda: ask(client, ASSISTANT_DOCUMENT), "document blocks cannot be placed directly in assistant")
    refused(
        lambda: client.messages.count_tokens(model=MODEL, messages=ASSISTANT_DOCUMENT),
        "document blocks cannot be placed directly in assistant",
    )
    assert ask(client, ASSISTANT_DOCUMENT, extra_headers=LEGACY).usage.output_tokens > 0


def test_citations_on_user_text_are_refused_by_2026_10_21_only(client):
    refused(lambda: ask(client, USER_CITATIONS), "text blocks in user messages cannot carry citations")
    assert ask(client, USER_CITATIONS, extra_headers=LEGACY).usage.output_tokens > 0


def test_2026_10_21_keeps_assistant_citations_and_enabled_documents(client):
    message = ask(client, KEPT, max_tokens=40)
    assert message.stop_reason in {"end_turn", "max_tokens"}


def test_an_unknown_version_is_a_400(url):
    body = {"model": MODEL, "max_tokens": 4, "messages": HI}
    response = httpx.post(f"{url}/v1/messages", json=body, headers={"anthropic-version": "2099-01-01"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert error["message"].startswith("anthropic-version: unknown version '2099-01-01'")


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        ({"temperature": 0.0}, "temperature: `temperature` is deprecated for this model"),
        ({"top_p": 0.5}, "top_p: `top_p` is deprecated for this model"),
        ({"top_k": 5}, "top_k: `top_k` is deprecated for this model"),
    ],
)
def test_newest_takes_only_the_default_sampling_values(newest, extra, words):
    refused(lambda: ask(newest, HI, extra_body=extra, extra_headers=LEGACY), words)
    defaults = {"temperature": 1.0, "top_p": 0.99}
    assert ask(newest, HI, extra_body=defaults, extra_headers=LEGACY).usage.output_tokens > 0


def test_newest_refuses_a_prefill_at_either_version(newest, client):
    prefilled = [*HI, {"role": "assistant", "content": "Hello"}]
    words = "This model does not support assistant message prefill"
    refused(lambda: ask(newest, prefilled), words)
    refused(lambda: ask(newest, prefilled, extra_headers=LEGACY), words)
    assert ask(newest, HI).usage.output_tokens > 0
    assert ask(client, prefilled).usage.output_tokens > 0  # classic continues it


def test_default_sampling_is_reproducible_created_streamed_and_in_a_batch(client):
    """Temperature 1.0 (2026-10-21 sends none): the same request, the same answer."""
    question = [{"role": "user", "content": "Tell me about the sea."}]
    first = ask(client, question, max_tokens=24)
    second = ask(client, question, max_tokens=24)
    with client.messages.stream(model=MODEL, max_tokens=24, messages=question) as stream:
        streamed = stream.get_final_message()
    params: Any = {"model": MODEL, "max_tokens": 24, "messages": question}
    batch = client.messages.batches.create(requests=[{"custom_id": "sea", "params": params}])
    deadline = time.monotonic() + 60
    while client.messages.batches.retrieve(batch.id).processing_status != "ended":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    [line] = list(client.messages.batches.results(batch.id))
    assert line.result.type == "succeeded"
    batched = line.result.message
    assert first.content
    assert first.usage.output_tokens > 1
    for other in (second, streamed, batched):
        assert other.model_dump(exclude={"id"}) == first.model_dump(exclude={"id"})
    other_question = ask(client, [{"role": "user", "content": "Tell me about the sky."}], max_tokens=24)
    assert other_question.content != first.content
