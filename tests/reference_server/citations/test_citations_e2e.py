"""Citations end to end: the official SDK against the reference server over a real socket.
The grammar makes every quote whole chunks of a document, so each citation's indexes point at
exactly its `cited_text`, on SmolLM2 (which chooses what to quote) and on tiny-random (whose
random choices explore the grammar), created and streamed."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any

import anthropic
import pytest

from conformance.wire.launcher import reference_server
from tests.reference_server.test_documents import make_pdf

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("citations_e2e")]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

GREEDY = {"temperature": 0.0}
CITED = {"enabled": True}
LIGHTHOUSE = (
    "The lighthouse on the northern cape is painted green. "
    "Its keeper is a woman called Ada. "
    "The lamp turns once every nine seconds."
)
HARBOUR = (
    "The harbour has twelve moorings.",
    "Fishing boats moor on the east quay.",
    "Ferries leave at noon.",
)
PAGES = ("The island has one road and no cars.", "The lighthouse on the island is painted green.")
TEXT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": LIGHTHOUSE},
    "title": "The cape",
    "citations": CITED,
}
CONTENT = {
    "type": "document",
    "source": {"type": "content", "content": [{"type": "text", "text": t} for t in HARBOUR]},
    "title": "The harbour",
    "citations": CITED,
}
PDF = {
    "type": "document",
    "source": {
        "type": "base64",
        "media_type": "application/pdf",
        "data": base64.b64encode(make_pdf(list(PAGES))).decode(),
    },
    "title": "The island",
    "citations": CITED,
}


def asking(
    *documents: dict[str, Any], question: str = "What colour is the lighthouse?"
) -> list[dict[str, Any]]:
    return [{"role": "user", "content": [*documents, {"type": "text", "text": question}]}]


def citations(message: Any) -> list[Any]:
    return [c for block in message.content if block.type == "text" for c in block.citations or ()]


def check(citation: Any, pages_of: dict[int, tuple[str, ...]]) -> None:
    """The citation's indexes point at exactly its cited_text."""
    pages = pages_of[citation.document_index]
    if citation.type == "char_location":
        assert pages[0][citation.start_char_index : citation.end_char_index] == citation.cited_text
    elif citation.type == "content_block_location":
        assert "".join(pages[citation.start_block_index : citation.end_block_index]) == citation.cited_text
    else:
        assert citation.type == "page_location"
        assert citation.end_page_number == citation.start_page_number + 1
        assert citation.cited_text.strip() in pages[citation.start_page_number - 1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Iterator[anthropic.Anthropic]:
    data = tmp_path_factory.mktemp("citations")
    with (
        reference_server("tiny-random", log=data / "server.log", args=["--data-dir", str(data)]) as url,
        anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0) as sdk,
    ):
        yield sdk


def test_smollm2_quotes_a_text_document_verbatim_at_the_right_characters(smollm2_url: str) -> None:
    with anthropic.Anthropic(
        base_url=smollm2_url, api_key="unused", default_headers=LEGACY, max_retries=0
    ) as sdk:
        message = sdk.messages.create(
            model="smollm2-135m-instruct", max_tokens=80, messages=asking(TEXT), extra_body=GREEDY
        )
    found = citations(message)
    assert found, message.content
    for citation in found:
        assert citation.type == "char_location"
        assert (citation.document_index, citation.document_title) == (0, "The cape")
        assert LIGHTHOUSE[citation.start_char_index : citation.end_char_index] == citation.cited_text
    first = message.content[0]
    assert first.type == "text"
    assert first.citations
    assert first.text == first.citations[0].cited_text


@pytest.mark.parametrize("seed", range(3))
def test_every_kind_of_document_is_cited_at_the_right_place(tiny: anthropic.Anthropic, seed: int) -> None:
    pages_of = {0: (LIGHTHOUSE,), 1: HARBOUR, 2: PAGES}
    messages = asking(TEXT, CONTENT, PDF, question=f"Quote all three documents ({seed}).")
    message = tiny.messages.create(model="tiny-random", max_tokens=120, messages=messages)
    found = citations(message)
    assert found
    for citation in found:
        check(citation, pages_of)
    assert {c.type for c in found} <= {"char_location", "content_block_location", "page_location"}


def test_the_stream_gives_the_same_citations_as_create(tiny: anthropic.Anthropic) -> None:
    messages = asking(TEXT, CONTENT)
    created = tiny.messages.create(model="tiny-random", max_tokens=60, messages=messages, extra_body=GREEDY)
    with tiny.messages.stream(
        model="tiny-random", max_tokens=60, messages=messages, extra_body=GREEDY
    ) as stream:
        deltas = [e.citation for e in stream if e.type == "citation"]
        streamed = stream.get_final_message()
    assert citations(created)
    assert [c.model_dump() for c in citations(streamed)] == [c.model_dump() for c in citations(created)]
    assert [c.model_dump() for c in deltas] == [c.model_dump() for c in citations(created)]
    assert [b.model_dump() for b in streamed.content] == [b.model_dump() for b in created.content]


def test_count_tokens_agrees_with_usage(tiny: anthropic.Anthropic) -> None:
    messages = asking(TEXT, PDF)
    counted = tiny.messages.count_tokens(model="tiny-random", messages=messages).input_tokens
    message = tiny.messages.create(model="tiny-random", max_tokens=8, messages=messages)
    assert message.usage.input_tokens == counted


def test_a_mix_of_cited_and_uncited_documents_is_a_400(tiny: anthropic.Anthropic) -> None:
    plain = {k: v for k, v in CONTENT.items() if k != "citations"}
    with pytest.raises(anthropic.BadRequestError, match="all or none of the documents"):
        tiny.messages.create(model="tiny-random", max_tokens=8, messages=asking(TEXT, plain))
    assert tiny.models.retrieve("tiny-random").capabilities.citations.supported is True


TIMETABLE = {
    "type": "search_result",
    "source": "https://harbour.example/timetable",
    "title": "Timetable",
    "content": [{"type": "text", "text": t} for t in HARBOUR],
    "citations": CITED,
}


def test_a_search_result_is_cited_by_its_blocks(tiny: anthropic.Anthropic) -> None:
    result = TIMETABLE
    message = tiny.messages.create(
        model="tiny-random", max_tokens=60, messages=asking(result, question="When do ferries leave?")
    )
    found = citations(message)
    assert found
    for citation in found:
        assert citation.type == "search_result_location"
        assert (citation.search_result_index, citation.source, citation.title) == (
            0,
            "https://harbour.example/timetable",
            "Timetable",
        )
        assert "".join(HARBOUR[citation.start_block_index : citation.end_block_index]) == citation.cited_text


def test_a_search_result_a_tool_returned_is_cited(tiny: anthropic.Anthropic) -> None:
    """The RAG loop through the SDK: a search tool's result holds search results, which the
    answer cites by their index across the request (the tool's result first here)."""
    result = TIMETABLE
    tool = {"name": "search", "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}}}
    call = {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"query": "ferries"}}
    message = tiny.messages.create(
        model="tiny-random",
        max_tokens=60,
        tools=[tool],
        tool_choice={"type": "none"},
        messages=[
            {"role": "user", "content": "When do ferries leave?"},
            {"role": "assistant", "content": [call]},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": [result]}],
            },
        ],
    )
    found = citations(message)
    assert found
    for citation in found:
        assert (citation.type, citation.search_result_index, citation.title) == (
            "search_result_location",
            0,
            "Timetable",
        )
        assert "".join(HARBOUR[citation.start_block_index : citation.end_block_index]) == citation.cited_text
