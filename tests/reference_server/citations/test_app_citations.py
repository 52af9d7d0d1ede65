"""Citations over HTTP with the scripted engine (in process): quotes become text blocks with
their citations, streamed with a citations_delta, and the request rules. The scripted engine
does not apply grammars; test_citations_e2e.py proves constrained quoting on MLX."""

from __future__ import annotations

import pytest

from reference_server.engine.scripted import ScriptedEngine

from ..conftest import HEADERS, make_client
from ..test_app import assert_error, sse_events

LIGHTHOUSE = "The lighthouse is green. Its keeper is Ada. The lamp turns every nine seconds."
REPLY = "<cite 0>Its keeper is Ada. </cite>She lives there. <cite 1>Ferries.</cite>"
CITED = {"enabled": True}
TEXT_DOCUMENT = {
    "type": "document",
    "source": {"type": "text", "media_type": "text/plain", "data": LIGHTHOUSE},
    "title": "The cape",
    "citations": CITED,
}
CONTENT_DOCUMENT = {
    "type": "document",
    "source": {
        "type": "content",
        "content": [{"type": "text", "text": t} for t in ("Moorings.", "Ferries.")],
    },
    "citations": CITED,
}
KEEPER = {
    "type": "char_location",
    "cited_text": "Its keeper is Ada. ",
    "document_index": 0,
    "document_title": "The cape",
    "file_id": None,
    "start_char_index": 25,
    "end_char_index": 44,
}
FERRIES = {
    "type": "content_block_location",
    "cited_text": "Ferries.",
    "document_index": 1,
    "document_title": None,
    "file_id": None,
    "start_block_index": 1,
    "end_block_index": 2,
}


def body(**changes):
    question = {"type": "text", "text": "Who keeps the lighthouse?"}
    return {
        "model": "scripted",
        "max_tokens": 400,
        "messages": [{"role": "user", "content": [TEXT_DOCUMENT, CONTENT_DOCUMENT, question]}],
        **changes,
    }


@pytest.fixture
def engine() -> ScriptedEngine:
    return ScriptedEngine(REPLY, model_id="scripted", context_window=4096)


@pytest.fixture
def client(engine):
    with make_client(engine) as test_client:
        test_client.headers.update(HEADERS)
        yield test_client


def test_quotes_become_text_blocks_with_their_citations(client, engine):
    message = client.post("/v1/messages", json=body()).json()
    assert message["content"] == [
        {"type": "text", "text": "Its keeper is Ada. ", "citations": [KEEPER]},
        {"type": "text", "text": "She lives there. ", "citations": None},
        {"type": "text", "text": "Ferries.", "citations": [FERRIES]},
    ]
    assert LIGHTHOUSE[KEEPER["start_char_index"] : KEEPER["end_char_index"]] == KEEPER["cited_text"]
    grammar = engine.requests[-1].constraint
    assert grammar is not None
    assert "substring_chunks" in grammar.lark
    assert '"<cite 0>"' in grammar.lark
    assert '"<cite 1>"' in grammar.lark


def test_the_stream_sends_each_citation_as_the_blocks_last_delta(client):
    response = client.post("/v1/messages", json=body(stream=True))
    events = sse_events(response.text)
    blocks: dict[int, list[dict]] = {}
    for event in events:
        if event["type"].startswith("content_block"):
            blocks.setdefault(event["index"], []).append(event)
    assert sorted(blocks) == [0, 1, 2]
    first = blocks[0]
    assert first[0]["content_block"] == {"type": "text", "text": "", "citations": None}
    assert "".join(e["delta"]["text"] for e in first if e.get("delta", {}).get("type") == "text_delta") == (
        "Its keeper is Ada. "
    )
    assert first[-2]["delta"] == {"type": "citations_delta", "citation": KEEPER}
    assert first[-1]["type"] == "content_block_stop"
    assert not any(e.get("delta", {}).get("type") == "citations_delta" for e in blocks[1])
    assert blocks[2][-2]["delta"] == {"type": "citations_delta", "citation": FERRIES}


def test_count_tokens_counts_the_numbered_documents_as_usage_does(client, engine):
    counting = {k: v for k, v in body().items() if k != "max_tokens"}
    counted = client.post("/v1/messages/count_tokens", json=counting).json()["input_tokens"]
    message = client.post("/v1/messages", json=body()).json()
    assert message["usage"]["input_tokens"] == counted
    prompt = engine.requests[-1].turns[-1].text
    assert "Document 0: The cape" in prompt
    assert "<cite 1>" in prompt


def test_stop_sequences_never_cut_a_quote(client):
    message = client.post("/v1/messages", json=body(stop_sequences=["Ada", "lives"])).json()
    assert message["stop_reason"] == "stop_sequence"
    assert message["stop_sequence"] == "lives"
    assert message["content"][0]["citations"] == [KEEPER]
    assert message["content"][1] == {"type": "text", "text": "She ", "citations": None}


def test_without_citations_the_tags_are_plain_text(client, engine):
    plain = {k: v for k, v in TEXT_DOCUMENT.items() if k != "citations"}
    other = {k: v for k, v in CONTENT_DOCUMENT.items() if k != "citations"}
    request = body()
    request["messages"][0]["content"][:2] = [plain, other]
    message = client.post("/v1/messages", json=request).json()
    assert message["content"] == [{"type": "text", "text": REPLY, "citations": None}]
    assert engine.requests[-1].constraint is None


TIMETABLE = {
    "type": "search_result",
    "source": "https://harbour.test/times",
    "title": "Timetable",
    "content": [
        {"type": "text", "text": "Moorings: 12."},
        {"type": "text", "text": "Ferries leave at noon."},
    ],
    "citations": CITED,
}
# Its second block, quoted: the citation the server gives.
NOON_CITED = {
    "type": "search_result_location",
    "cited_text": "Ferries leave at noon.",
    "search_result_index": 0,
    "source": "https://harbour.test/times",
    "title": "Timetable",
    "start_block_index": 1,
    "end_block_index": 2,
}


def test_search_results_are_cited_by_block_with_their_source(client, engine):
    engine._reply = "<cite r0>Ferries leave at noon.</cite>"
    result = TIMETABLE
    request = {
        **body(),
        "messages": [{"role": "user", "content": [result, {"type": "text", "text": "When?"}]}],
    }
    message = client.post("/v1/messages", json=request).json()
    assert message["content"] == [
        {
            "type": "text",
            "text": "Ferries leave at noon.",
            "citations": [NOON_CITED],
        }
    ]
    prompt = engine.requests[-1].turns[-1].text
    assert prompt.startswith("Search result 0: Timetable\nSource: https://harbour.test/times\n")
    assert '"<cite r0>"' in engine.requests[-1].constraint.lark
    uncited = {k: v for k, v in result.items() if k != "citations"}
    mixed = {**request, "messages": [{"role": "user", "content": [result, uncited]}]}
    assert (
        "all or none of the search results"
        in assert_error(client.post("/v1/messages", json=mixed), 400, "invalid_request_error")["error"][
            "message"
        ]
    )
    plain = {
        **request,
        "messages": [{"role": "user", "content": [uncited, {"type": "text", "text": "When?"}]}],
    }
    answered = client.post("/v1/messages", json=plain).json()
    assert answered["content"][0]["citations"] is None
    assert engine.requests[-1].turns[-1].text.startswith("Search result: Timetable\n")


def test_a_search_result_returned_by_a_tool_is_read_and_cited(client, engine):
    """The documented RAG loop: a tool's answer is search results, which the reply cites."""
    engine._reply = "<cite r0>Ferries leave at noon.</cite>"
    result = TIMETABLE
    call = {"type": "tool_use", "id": "toolu_01", "name": "search", "input": {"query": "ferries"}}
    answer = {"type": "tool_result", "tool_use_id": "toolu_01", "content": [result]}
    request = {
        **body(),
        "tools": [
            {
                "name": "search",
                "input_schema": {"type": "object", "properties": {"query": {"type": "string"}}},
            }
        ],
        "tool_choice": {"type": "none"},
        "messages": [
            {"role": "user", "content": "When do ferries leave?"},
            {"role": "assistant", "content": [call]},
            {"role": "user", "content": [answer]},
        ],
    }
    message = client.post("/v1/messages", json=request).json()
    (citation,) = message["content"][0]["citations"]
    assert citation == NOON_CITED
    tool_turn = next(turn for turn in engine.requests[-1].turns if turn.role == "tool")
    assert tool_turn.text.startswith("Search result 0: Timetable\nSource: https://harbour.test/times\n")
    counting = {k: v for k, v in request.items() if k != "max_tokens"}
    counted = client.post("/v1/messages/count_tokens", json=counting).json()["input_tokens"]
    request["messages"][2]["content"][0]["content"] = [{**result, "content": result["content"][1:]}]
    shorter = client.post("/v1/messages/count_tokens", json=counting).json()["input_tokens"]
    assert counted > shorter  # the result's blocks are counted too
    broken = {**result, "content": "not blocks"}
    request["messages"][2]["content"][0]["content"] = [broken]
    refused = assert_error(client.post("/v1/messages", json=request), 400, "invalid_request_error")
    assert refused["error"]["message"].startswith("messages.2.content.0.content.0.content: ")


def test_citations_with_structured_outputs_are_refused(client):
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    response = client.post(
        "/v1/messages", json=body(output_config={"format": {"type": "json_schema", "schema": schema}})
    )
    assert (
        "structured outputs cannot be used with citations"
        in assert_error(response, 400, "invalid_request_error")["error"]["message"]
    )


def test_citations_with_callable_tools_are_refused_but_not_with_tool_choice_none(client):
    tools = [{"name": "t", "input_schema": {"type": "object", "properties": {}}}]
    response = client.post("/v1/messages", json=body(tools=tools))
    assert "citations with tools" in assert_error(response, 400, "invalid_request_error")["error"]["message"]
    accepted = client.post("/v1/messages", json=body(tools=tools, tool_choice={"type": "none"}))
    assert accepted.status_code == 200
    assert accepted.json()["content"][0]["citations"] == [KEEPER]
