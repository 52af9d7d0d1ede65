"""`anthropic-version` over HTTP on the scripted engine: what 2026-10-21 refuses, that 2023-06-01
takes the very same bodies, what 2026-10-21 still takes, unknown versions, and batches created
under each version. On MLX (tiny-random): test_versioning_e2e.py."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from litestar.testing import TestClient

from reference_server.batches.store import BatchStore
from reference_server.engine.base import Sampling, ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.versioning import api_version

from .batches.conftest import batch_client, results_of, wait_until_ended
from .conftest import make_client
from .server_tools.pages import serving_pages
from .server_tools.test_app_server_tools import FETCH, calling, client_for
from .test_app import assert_error

LEGACY = {"anthropic-version": "2023-06-01"}
CURRENT = {"anthropic-version": "2026-10-21"}
VERSIONS = [LEGACY, CURRENT]
USER = [{"role": "user", "content": "Say hello"}]
DOCUMENT_TEXT = "The lighthouse at Cape Plumb was built in 1868."
QUOTE = "built in 1868"


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine("Hello.", model_id="scripted", context_window=4096)


@pytest.fixture
def client(engine: ScriptedEngine) -> Iterator[TestClient]:
    with make_client(engine) as test_client:
        yield test_client


def body(**changes: Any) -> dict[str, Any]:
    return {"model": "scripted", "max_tokens": 16, "messages": USER, **changes}


def counted(create: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in create.items() if k != "max_tokens"}


def refused(response: Any, *words: str) -> str:
    message = assert_error(response, 400, "invalid_request_error")["error"]["message"]
    for word in words:
        assert word in message
    return str(message)


def document(**more: Any) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": DOCUMENT_TEXT},
        "title": "Cape Plumb",
        **more,
    }


def citation() -> dict[str, Any]:
    start = DOCUMENT_TEXT.index(QUOTE)
    return {
        "type": "char_location",
        "cited_text": QUOTE,
        "document_index": 0,
        "document_title": "Cape Plumb",
        "start_char_index": start,
        "end_char_index": start + len(QUOTE),
    }


def cited_text() -> dict[str, Any]:
    return {"type": "text", "text": "It was built in 1868.", "citations": [citation()]}


def search_result(*content: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {
        "type": "search_result",
        "source": "https://example.com/cape-plumb",
        "title": "Cape Plumb",
        "content": list(content),
        **more,
    }


def assistant_document() -> dict[str, Any]:
    return body(
        messages=[
            {"role": "user", "content": "Show me the record."},
            {"role": "assistant", "content": [document()]},
            {"role": "user", "content": "When was it built?"},
        ]
    )


def user_says(*blocks: dict[str, Any]) -> dict[str, Any]:
    return body(messages=[{"role": "user", "content": [*blocks, {"type": "text", "text": "Is that right?"}]}])


def tool_result_with(*content: dict[str, Any]) -> dict[str, Any]:
    """A user turn answering a client tool call with `content` (search results, say)."""
    tool = {"name": "lookup", "description": "Looks things up", "input_schema": {"type": "object"}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": list(content)}
    return body(
        tools=[tool],
        messages=[
            {"role": "user", "content": "Look up Cape Plumb."},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [result]},
        ],
    )


# -- sampling ----------------------------------------------------------------------------------

SAMPLING_VALUES = [
    ("temperature", 1.0),  # the default: still refused
    ("temperature", 0.0),
    ("top_p", 0.99),
    ("top_p", 0.5),
    ("top_k", 40),
    ("temperature", None),  # an explicit null: the key names a removed field
    ("top_k", None),
]


@pytest.mark.parametrize(("field", "value"), SAMPLING_VALUES)
def test_2026_10_21_refuses_each_sampling_field_even_at_its_default(client, field, value):
    response = client.post("/v1/messages", json=body(**{field: value}), headers=CURRENT)
    message = refused(response, "2026-10-21", "2023-06-01")
    assert message.startswith(f"{field}: not supported in anthropic-version 2026-10-21")
    streamed = client.post("/v1/messages", json=body(stream=True, **{field: value}), headers=CURRENT)
    assert refused(streamed) == message  # a plain 400 before any stream


@pytest.mark.parametrize(("field", "value"), SAMPLING_VALUES)
def test_2023_06_01_takes_the_same_sampling_fields(client, engine, field, value):
    response = client.post("/v1/messages", json=body(**{field: value}), headers=LEGACY)
    assert response.status_code == 200, response.text
    sampling = engine.requests[-1].sampling
    if value is not None:
        assert getattr(sampling, field) == value


def test_2023_06_01_samples_as_asked_and_2026_10_21_with_the_defaults(client, engine):
    asked = body(temperature=0.3, top_p=0.9, top_k=7)
    assert client.post("/v1/messages", json=asked, headers=LEGACY).status_code == 200
    assert engine.requests[-1].sampling == Sampling(temperature=0.3, top_p=0.9, top_k=7)
    assert client.post("/v1/messages", json=body(), headers=CURRENT).status_code == 200
    assert engine.requests[-1].sampling == Sampling()  # temperature 1.0, no top_p, no top_k
    assert engine.requests[-1].sampling.temperature == 1.0


def test_the_first_refused_field_is_named(client):
    refused(client.post("/v1/messages", json=body(top_p=0.9, top_k=3), headers=CURRENT), "top_p:")


# -- documents in assistant turns --------------------------------------------------------------


def test_2026_10_21_refuses_a_document_directly_in_an_assistant_turn(client):
    create = assistant_document()
    message = refused(client.post("/v1/messages", json=create, headers=CURRENT), "2026-10-21")
    assert message.startswith("messages.1.content.0: document blocks cannot be placed directly in assistant")
    count = client.post("/v1/messages/count_tokens", json=counted(create), headers=CURRENT)
    assert refused(count) == message


def test_2023_06_01_takes_a_document_in_an_assistant_turn(client):
    create = assistant_document()
    assert client.post("/v1/messages", json=create, headers=LEGACY).status_code == 200
    count = client.post("/v1/messages/count_tokens", json=counted(create), headers=LEGACY)
    assert count.status_code == 200
    assert count.json()["input_tokens"] > 0


@pytest.mark.parametrize("headers", VERSIONS, ids=["2023-06-01", "2026-10-21"])
def test_documents_in_user_turns_and_tool_results_are_taken_by_both(client, headers):
    assert client.post("/v1/messages", json=user_says(document()), headers=headers).status_code == 200
    in_result = tool_result_with(document())
    assert client.post("/v1/messages", json=in_result, headers=headers).status_code == 200


@pytest.mark.parametrize("headers", VERSIONS, ids=["2023-06-01", "2026-10-21"])
def test_a_document_nested_in_a_web_fetch_result_claude_returned_is_taken(headers):
    """A web fetch result (its page as a document) in the assistant turn sent back."""
    with serving_pages() as site:
        url = f"{site.url}/page"
        client, _ = client_for(calling(ToolCall("x", "web_fetch", {"url": url})), allow_private_fetch=True)
        with client:
            ask = {"model": "scripted", "max_tokens": 600, "tools": [FETCH]}
            first = [{"role": "user", "content": f"Read {url}"}]
            answer = client.post("/v1/messages", json={**ask, "messages": first}, headers=headers).json()
            assert [b["type"] for b in answer["content"]] == [
                "server_tool_use",
                "web_fetch_tool_result",
                "text",
            ]
            assert answer["content"][1]["content"]["content"]["type"] == "document"
            history = [
                *first,
                {"role": "assistant", "content": answer["content"]},
                {"role": "user", "content": "Thanks"},
            ]
            again = client.post("/v1/messages", json={**ask, "messages": history}, headers=headers)
    assert again.status_code == 200, again.text


# -- citations in user turns -------------------------------------------------------------------

USER_CITATIONS = {
    "direct": (user_says(document(), cited_text()), "messages.0.content.1.citations"),
    "in a search_result": (
        user_says(search_result(cited_text())),
        "messages.0.content.0.content.0.citations",
    ),
    "in a tool result's search_result": (
        tool_result_with(search_result(cited_text())),
        "messages.2.content.0.content.0.content.0.citations",
    ),
}


@pytest.mark.parametrize("case", list(USER_CITATIONS))
def test_2026_10_21_refuses_citations_on_user_text(client, case):
    create, path = USER_CITATIONS[case]
    message = refused(client.post("/v1/messages", json=create, headers=CURRENT), "2026-10-21")
    assert message.startswith(f"{path}: text blocks in user messages cannot carry citations")
    count = client.post("/v1/messages/count_tokens", json=counted(create), headers=CURRENT)
    assert refused(count) == message


@pytest.mark.parametrize("case", list(USER_CITATIONS))
def test_2023_06_01_takes_citations_on_user_text(client, case):
    create, _ = USER_CITATIONS[case]
    response = client.post("/v1/messages", json=create, headers=LEGACY)
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("headers", VERSIONS, ids=["2023-06-01", "2026-10-21"])
def test_what_2026_10_21_keeps_is_taken_by_both(client, headers):
    """Citations on assistant text sent back, citations.enabled on a document and on a search
    result, and an empty citations array on user text."""
    sent_back = body(
        messages=[
            {
                "role": "user",
                "content": [document(citations={"enabled": True}), {"type": "text", "text": "When?"}],
            },
            {"role": "assistant", "content": [cited_text()]},
            {"role": "user", "content": "Thanks. Anything else?"},
        ]
    )
    enabled = user_says(search_result({"type": "text", "text": DOCUMENT_TEXT}, citations={"enabled": True}))
    empty = user_says({"type": "text", "text": "No sources.", "citations": []})
    for create in (sent_back, enabled, empty):
        response = client.post("/v1/messages", json=create, headers=headers)
        assert response.status_code == 200, response.text
        count = client.post("/v1/messages/count_tokens", json=counted(create), headers=headers)
        assert count.status_code == 200, count.text


# -- the header ----------------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["2023-01-01", "2026-10-22", "latest", "2026-10-21,2023-06-01"])
def test_an_unknown_version_is_a_400_naming_the_known_ones(client, value):
    headers = {"anthropic-version": value}
    for method, path, payload in (
        ("POST", "/v1/messages", body()),
        ("POST", "/v1/messages/count_tokens", counted(body())),
        ("GET", "/v1/models", None),
        ("GET", "/v1/messages/batches", None),
    ):
        response = client.request(method, path, json=payload, headers=headers)
        message = refused(response, "2023-06-01", "2026-10-21")
        assert message.startswith(f"anthropic-version: unknown version {value!r}")


def test_a_missing_version_is_still_required_and_other_routes_need_none(client):
    assert refused(client.post("/v1/messages", json=body())) == "anthropic-version: header is required"
    assert client.get("/v1/models").status_code == 200  # OpenAI's shape without a version
    assert client.get("/health").status_code == 200
    chat = {"model": "scripted", "messages": [{"role": "user", "content": "Hi"}], "temperature": 0.2}
    assert client.post("/v1/chat/completions", json=chat).status_code == 200
    # The OpenAI route reads no anthropic-version, whatever it says.
    odd = client.post("/v1/chat/completions", json=chat, headers={"anthropic-version": "latest"})
    assert odd.status_code == 200


def test_surrounding_whitespace_is_not_a_different_version(client):
    response = client.post(
        "/v1/messages", json=body(temperature=0.5), headers={"anthropic-version": " 2026-10-21 "}
    )
    refused(response, "temperature: not supported in anthropic-version 2026-10-21")


def test_api_version_reads_the_header():
    assert api_version(None) == "2023-06-01"
    assert api_version("2023-06-01") == "2023-06-01"
    assert api_version("2026-10-21") == "2026-10-21"


# -- batches -------------------------------------------------------------------------------------


def _mixed_batch() -> dict[str, Any]:
    return {
        "requests": [
            {"custom_id": "plain", "params": body()},
            {"custom_id": "sampled", "params": body(temperature=0.5)},
            {"custom_id": "document", "params": assistant_document()},
            {"custom_id": "cited", "params": USER_CITATIONS["direct"][0]},
        ]
    }


def test_a_batch_created_under_2026_10_21_errors_the_requests_it_refuses(tmp_path):
    with batch_client(tmp_path) as client:
        created = client.post("/v1/messages/batches", json=_mixed_batch(), headers=CURRENT)
        assert created.status_code == 200, created.text
        batch = wait_until_ended(client, created.json()["id"])
        results = results_of(client, batch)
    assert batch["request_counts"]["succeeded"] == 1
    assert batch["request_counts"]["errored"] == 3
    assert results["plain"]["type"] == "succeeded"
    for custom_id, words in (
        ("sampled", "temperature: not supported in anthropic-version 2026-10-21"),
        ("document", "messages.1.content.0: document blocks cannot be placed directly"),
        ("cited", "messages.0.content.1.citations: text blocks in user messages cannot carry citations"),
    ):
        result = results[custom_id]
        assert result["type"] == "errored"
        error = result["error"]
        assert error["type"] == "error"
        assert error["error"]["type"] == "invalid_request_error"
        assert error["error"]["message"].startswith(words)


def test_a_batch_created_under_2023_06_01_answers_the_same_requests(tmp_path):
    with batch_client(tmp_path) as client:
        created = client.post("/v1/messages/batches", json=_mixed_batch(), headers=LEGACY)
        batch = wait_until_ended(client, created.json()["id"])
        results = results_of(client, batch)
    assert batch["request_counts"]["succeeded"] == 4
    assert {r["type"] for r in results.values()} == {"succeeded"}


def test_the_store_keeps_each_batchs_version(tmp_path):
    """Stored with the batch: whichever server processes it later applies it."""
    store = BatchStore(tmp_path / "batches.sqlite3")
    try:
        store.create("msgbatch_v", [("sampled", '{"x": 1}')], betas=[], now=0.0, api_version="2026-10-21")
        store.create("msgbatch_l", [("sampled", '{"x": 1}')], betas=[], now=0.0)
        assert [p.api_version for p in store.pending(10)] == ["2026-10-21", None]
    finally:
        store.close()
