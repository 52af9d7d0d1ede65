"""Server tools over HTTP with the scripted engine (in process): tool search, web fetch against a
loopback site, the loop (results fed back, pause_turn, resumption), usage, deferred tools, the
Anthropic-defined client tools, and redacted thinking. The scripted engine does not apply
grammars; test_server_tools_e2e.py runs the same on MLX."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from reference_server.engine.base import EngineRequest, ToolCall
from reference_server.engine.scripted import ScriptedEngine
from reference_server.engine.toolformat import render_call
from reference_server.thinking.rules import REDACTED_THINKING_TRIGGER

from ..conftest import HEADERS, make_client
from ..test_app import assert_error, sse_events
from .pages import serving_pages

WEATHER = {
    "name": "get_weather",
    "description": "Weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    "defer_loading": True,
}
CLOCK = {"name": "get_time", "description": "The time", "input_schema": {"type": "object", "properties": {}}}
REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
BM25 = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}


def calling(*calls: ToolCall, then: str = "Done.") -> Callable[[EngineRequest], str]:
    """A model that makes `calls` (one per generation) while the prompt ends with fewer results,
    then writes `then`."""

    def reply(request: EngineRequest) -> str:
        results = sum(turn.role == "tool" for turn in request.turns)
        return render_call(calls[results]) if results < len(calls) else then

    return reply


def client_for(reply: Callable[[EngineRequest], str] | str, **settings):
    engine = ScriptedEngine(reply, model_id="scripted", context_window=8192)
    client = make_client(engine, **settings)
    client.headers.update(HEADERS)
    return client, engine


def body(tools, content="Weather in Paris?", **changes):
    return {
        "model": "scripted",
        "max_tokens": 600,
        "messages": [{"role": "user", "content": content}],
        "tools": tools,
        **changes,
    }


def refused(response, words: str) -> None:
    assert words in assert_error(response, 400, "invalid_request_error")["error"]["message"]


def types(message):
    return [block["type"] for block in message["content"]]


@pytest.mark.parametrize(("search", "query"), [(REGEX, "weath.r"), (BM25, "weather of a city")])
def test_a_tool_search_finds_a_deferred_tool_and_the_turn_goes_on(search, query):
    found = ToolCall("x", search["name"], {"query": query})
    client, engine = client_for(calling(found, ToolCall("y", "get_weather", {"city": "Paris"})))
    with client:
        message = client.post("/v1/messages", json=body([search, WEATHER, CLOCK])).json()
    assert types(message) == ["server_tool_use", "tool_search_tool_result", "tool_use"]
    use, result, call = message["content"]
    assert use["id"].startswith("srvtoolu_")
    assert use["name"] == search["name"]
    assert use["input"] == {"query": query}
    assert result["tool_use_id"] == use["id"]
    assert result["content"] == {
        "type": "tool_search_tool_search_result",
        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
    }
    assert (call["name"], message["stop_reason"]) == ("get_weather", "tool_use")
    first, second = engine.requests
    assert "get_weather" not in first.constraint.lark
    assert "get_weather" in second.constraint.lark
    assert not any(tool.name == "get_weather" for tool in first.tools)  # deferred: not in the prompt
    assert "get_weather" in second.turns[-1].text  # the search result shows its definition


def test_deferred_tools_count_nothing_until_found():
    client, _ = client_for("x")

    def count(tools):
        request = {key: value for key, value in body(tools).items() if key != "max_tokens"}
        response = client.post("/v1/messages/count_tokens", json=request)
        assert response.status_code == 200, response.text
        return response.json()["input_tokens"]

    with client:
        assert count([REGEX, CLOCK, WEATHER]) == count([REGEX, CLOCK])
        assert count([REGEX, CLOCK, {**WEATHER, "defer_loading": False}]) > count([REGEX, CLOCK])


def test_a_tool_found_earlier_is_callable_and_a_deferred_one_is_not():
    client, _ = client_for("x")
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [
                {
                    "type": "server_tool_use",
                    "id": "srvtoolu_1",
                    "name": "tool_search_tool_regex",
                    "input": {"query": "w"},
                },
                {
                    "type": "tool_search_tool_result",
                    "tool_use_id": "srvtoolu_1",
                    "content": {
                        "type": "tool_search_tool_search_result",
                        "tool_references": [{"type": "tool_reference", "tool_name": "get_weather"}],
                    },
                },
            ],
        },
        {"role": "user", "content": "Go on."},
    ]
    forced = {"type": "tool", "name": "get_weather"}
    with client:
        found = client.post(
            "/v1/messages", json={**body([REGEX, WEATHER, CLOCK]), "messages": history, "tool_choice": forced}
        )
        assert found.status_code == 200, found.text
        refused_call = client.post("/v1/messages", json=body([REGEX, WEATHER, CLOCK], tool_choice=forced))
        refused(refused_call, "defer_loading")


@pytest.mark.parametrize(
    ("tools", "words"),
    [
        ([WEATHER], "at least one tool must be loaded"),
        ([{**REGEX, "defer_loading": True}, CLOCK], "cannot itself be deferred"),
        ([{**REGEX, "name": "search"}], "tools.0.name: Input should be 'tool_search_tool_regex'"),
        ([{**FETCH, "allowed_domains": ["a.com"], "blocked_domains": ["b.com"]}], "cannot both be set"),
        ([{**FETCH, "max_uses": 0}], "tools.0.max_uses"),
        (
            [
                {
                    "type": "web_search_20250305",
                    "name": "web_search",
                    "user_location": {"type": "approximate", "country": "GBR"},
                }
            ],
            "user_location.country",
        ),
        ([{"type": "code_execution_20250825", "name": "code_execution"}], "code execution is off"),
        (
            [
                {
                    "type": "computer_20250124",
                    "name": "computer",
                    "display_width_px": 8,
                    "display_height_px": 8,
                }
            ],
            "computer use",
        ),
        ([{"type": "mcp_toolset", "mcp_server_name": "x"}], "no mcp_servers entry"),
        ([{"type": "bash_20250124", "name": "shell"}], "tools.0.name: Input should be 'bash'"),
        (
            [{"type": "text_editor_20250124", "name": "str_replace_editor", "max_characters": 9}],
            "max_characters",
        ),
    ],
)
def test_tool_rules_are_400s_naming_the_problem(tools, words):
    client, _ = client_for("x")
    with client:
        refused(client.post("/v1/messages", json=body(tools)), words)


@pytest.mark.parametrize(
    ("tool", "name", "command"),
    [
        ({"type": "bash_20250124", "name": "bash"}, "bash", {"command": "ls"}),
        (
            {"type": "text_editor_20250728", "name": "str_replace_based_edit_tool", "max_characters": 500},
            "str_replace_based_edit_tool",
            {"command": "view", "path": "/a.txt"},
        ),
        (
            {"type": "text_editor_20250124", "name": "str_replace_editor"},
            "str_replace_editor",
            {"command": "undo_edit", "path": "/a.txt"},
        ),
        ({"type": "memory_20250818", "name": "memory"}, "memory", {"command": "view", "path": "/memories"}),
    ],
)
def test_anthropic_defined_client_tools_are_tool_use_blocks_under_their_names(tool, name, command):
    client, engine = client_for(render_call(ToolCall("x", name, command)))
    with client:
        message = client.post(
            "/v1/messages", json=body([tool], tool_choice={"type": "tool", "name": name})
        ).json()
        (call,) = message["content"]
        assert (call["type"], call["name"], call["input"], message["stop_reason"]) == (
            "tool_use",
            name,
            command,
            "tool_use",
        )
        assert call["id"].startswith("toolu_")
        (spec,) = engine.requests[0].tools
        assert spec.parameters["properties"]["command"]  # the documented schema the model is held to
        answered = body(
            [tool],
            messages=[
                {"role": "user", "content": "Go"},
                {"role": "assistant", "content": [call]},
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": call["id"], "content": "ok"}],
                },
            ],
        )
        assert client.post("/v1/messages", json=answered).status_code == 200


def test_web_fetch_reads_a_page_when_private_fetches_are_allowed():
    with serving_pages() as site:
        url = f"{site.url}/page"
        client, engine = client_for(
            calling(ToolCall("x", "web_fetch", {"url": url})), allow_private_fetch=True
        )
        with client:
            message = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
    assert types(message) == ["server_tool_use", "web_fetch_tool_result", "text"]
    use, result, _ = message["content"]
    content = result["content"]
    assert (result["tool_use_id"], content["type"], content["url"]) == (use["id"], "web_fetch_result", url)
    assert content["retrieved_at"].endswith("Z")
    document = content["content"]
    assert document["title"] == "Plumb page"
    assert document["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "The plumb line is vertical.",
    }
    assert message["usage"]["server_tool_use"] == {"web_search_requests": 0, "web_fetch_requests": 1}
    assert "The plumb line is vertical." in engine.requests[1].turns[-1].text
    assert site.hits == ["/page"]


@pytest.mark.parametrize(
    ("path", "config", "code"),
    [
        ("/image", {}, "unsupported_content_type"),
        ("/missing", {}, "url_not_accessible"),
        ("/page", {"blocked_domains": ["127.0.0.1"]}, "url_not_allowed"),
        ("/page", {"allowed_domains": ["example.com"]}, "url_not_allowed"),
    ],
)
def test_web_fetch_failures_are_error_result_blocks(path, config, code):
    with serving_pages() as site:
        url = site.url + path
        client, _ = client_for(calling(ToolCall("x", "web_fetch", {"url": url})), allow_private_fetch=True)
        with client:
            response = client.post("/v1/messages", json=body([{**FETCH, **config}], f"Read {url}"))
    assert response.status_code == 200
    result = response.json()["content"][1]
    assert result["content"] == {"type": "web_fetch_tool_result_error", "error_code": code}


def test_loopback_is_refused_by_default_without_a_request():
    with serving_pages() as site:
        url = f"{site.url}/page"
        client, _ = client_for(calling(ToolCall("x", "web_fetch", {"url": url})))
        with client:
            message = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
        assert message["content"][1]["content"] == {
            "type": "web_fetch_tool_result_error",
            "error_code": "url_not_allowed",
        }
        assert site.hits == []  # refused before any byte was sent


def test_only_urls_already_in_the_conversation_are_fetched_and_max_uses_holds():
    with serving_pages() as site:
        url = f"{site.url}/plain"
        fetches = [ToolCall(str(i), "web_fetch", {"url": url}) for i in range(3)]
        client, _ = client_for(calling(*fetches), allow_private_fetch=True)
        with client:
            absent = client.post("/v1/messages", json=body([FETCH], "Read the page")).json()
            limited = client.post("/v1/messages", json=body([{**FETCH, "max_uses": 2}], f"Read {url}")).json()
    codes = [
        b["content"].get("error_code") for b in absent["content"] if b["type"] == "web_fetch_tool_result"
    ]
    assert codes == ["url_not_in_prior_context"] * 3
    codes = [
        b["content"].get("error_code") for b in limited["content"] if b["type"] == "web_fetch_tool_result"
    ]
    assert codes == [None, None, "max_uses_exceeded"]
    assert limited["usage"]["server_tool_use"]["web_fetch_requests"] == 3
    assert site.hits == ["/plain", "/plain"]


def test_past_the_iteration_limit_the_turn_pauses_and_resumes_where_it_stopped():
    with serving_pages() as site:
        url = f"{site.url}/plain"
        fetch = ToolCall("x", "web_fetch", {"url": url})
        client, engine = client_for(calling(fetch, fetch), allow_private_fetch=True, server_tool_iterations=1)
        with client:
            paused = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
            assert paused["stop_reason"] == "pause_turn"
            assert types(paused) == ["server_tool_use", "web_fetch_tool_result"]
            resumed = body(
                [FETCH],
                messages=[
                    {"role": "user", "content": f"Read {url}"},
                    {"role": "assistant", "content": paused["content"]},
                ],
            )
            again = client.post("/v1/messages", json=resumed).json()
            assert again["stop_reason"] == "pause_turn"
            assert types(again) == types(paused)
            # The resumed prompt is the first one with the call and its result in it.
            assert engine.requests[1].turns[-1].text.endswith("Just text.")
            pending = body(
                [FETCH],
                messages=[
                    {"role": "user", "content": f"Read {url}"},
                    {"role": "assistant", "content": paused["content"][:1]},
                ],
            )
            ran = client.post("/v1/messages", json=pending).json()  # paused before the call ran
            assert types(ran)[0] == "web_fetch_tool_result"
            assert ran["content"][0]["tool_use_id"] == paused["content"][0]["id"]


def test_streamed_server_tool_blocks():
    with serving_pages() as site:
        url = f"{site.url}/plain"
        client, _ = client_for(calling(ToolCall("x", "web_fetch", {"url": url})), allow_private_fetch=True)
        with client:
            plain = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
            events = sse_events(
                client.post("/v1/messages", json=body([FETCH], f"Read {url}", stream=True)).text
            )
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [s["content_block"]["type"] for s in starts] == types(plain)
    use_start, result_start = starts[0], starts[1]
    assert use_start["content_block"]["input"] == {}
    deltas = [e for e in events if e["type"] == "content_block_delta"]
    fragments = [e["delta"]["partial_json"] for e in deltas if e["index"] == use_start["index"]]
    assert json.loads("".join(fragments)) == {"url": url}
    assert result_start["content_block"]["content"]["type"] == "web_fetch_result"  # whole at its start
    assert not [e for e in deltas if e["index"] == result_start["index"]]
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"]["server_tool_use"] == {"web_search_requests": 0, "web_fetch_requests": 1}


def test_the_documented_test_string_gets_redacted_thinking_that_can_be_sent_back():
    client, _ = client_for("secret reasoning\n\nThe answer.")
    thinking = {"type": "enabled", "budget_tokens": 1024}
    with client:
        message = client.post(
            "/v1/messages", json=body(None, REDACTED_THINKING_TRIGGER, thinking=thinking, max_tokens=2000)
        ).json()
        redacted = message["content"][0]
        assert redacted["type"] == "redacted_thinking"
        assert redacted["data"]
        assert "secret" not in json.dumps(message)
        history = [
            {"role": "user", "content": REDACTED_THINKING_TRIGGER},
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": "And?"},
        ]
        again = client.post(
            "/v1/messages", json=body(None, thinking=thinking, max_tokens=2000, messages=history)
        )
        assert again.status_code == 200, again.text
        broken = [
            {**history[1], "content": [{"type": "redacted_thinking", "data": redacted["data"][:-4] + "AAAA"}]}
        ]
        changed = [history[0], *broken, history[2]]
        refused(
            client.post(
                "/v1/messages", json=body(None, thinking=thinking, max_tokens=2000, messages=changed)
            ),
            "redacted_thinking",
        )


SEARCH_WEB = {"type": "web_search_20250305", "name": "web_search"}


@pytest.fixture
def index_dir(tmp_path):
    (tmp_path / "tides.html").write_text(
        '<html><head><title>Tides of Brest</title><link rel="canonical" href="https://tides.example/brest">'
        "</head><body><p>High tide in Brest is at noon.</p></body></html>"
    )
    (tmp_path / "dover.txt").write_text(
        "URL: https://tides.example/dover\nTides of Dover\nHigh tide in Dover."
    )
    (tmp_path / "notes.md").write_text("# Bread\nBaking bread needs time.")
    return tmp_path


def test_web_search_serves_results_from_the_local_index(index_dir):
    client, engine = client_for(
        calling(ToolCall("x", "web_search", {"query": "high tide"})), web_search_index=index_dir
    )
    with client:
        info = client.get("/v1/models/scripted").json()
        assert info["capabilities"]["server_tools"]["web_search"] == {"supported": True}
        location = {"type": "approximate", "city": "Dover", "country": "GB"}
        message = client.post(
            "/v1/messages", json=body([{**SEARCH_WEB, "user_location": location}], "Tides?")
        ).json()
        assert types(message) == ["server_tool_use", "web_search_tool_result", "text"]
        results = message["content"][1]["content"]
        assert [r["url"] for r in results] == ["https://tides.example/dover", "https://tides.example/brest"]
        assert [r["title"] for r in results] == ["Tides of Dover", "Tides of Brest"]
        assert all(
            r["type"] == "web_search_result" and r["encrypted_content"] and r["page_age"] for r in results
        )
        assert "High tide in Brest" not in json.dumps(message)  # sealed, not shown
        assert "High tide in Brest is at noon." in engine.requests[1].turns[-1].text  # the model read it
        assert message["usage"]["server_tool_use"] == {"web_search_requests": 1, "web_fetch_requests": 0}
        brest = {**location, "city": "Brest", "country": "FR"}
        near = client.post(
            "/v1/messages", json=body([{**SEARCH_WEB, "user_location": brest}], "Tides?")
        ).json()
        assert [r["title"] for r in near["content"][1]["content"]] == ["Tides of Brest", "Tides of Dover"]
        filtered = client.post(
            "/v1/messages", json=body([{**SEARCH_WEB, "blocked_domains": ["tides.example"]}], "Tides?")
        ).json()
        assert filtered["content"][1]["content"] == []
        history = [
            {"role": "user", "content": "Tides?"},
            {"role": "assistant", "content": message["content"]},
            {"role": "user", "content": "And?"},
        ]
        assert client.post("/v1/messages", json=body([SEARCH_WEB], messages=history)).status_code == 200
        message["content"][1]["content"][0]["encrypted_content"] = "forged"
        refused(client.post("/v1/messages", json=body([SEARCH_WEB], messages=history)), "encrypted_content")


def test_web_search_is_refused_without_a_provider():
    client, _ = client_for("x")
    with client:
        info = client.get("/v1/models/scripted").json()
        assert info["capabilities"]["server_tools"]["web_search"] == {"supported": False}
        refused(client.post("/v1/messages", json=body([SEARCH_WEB])), "--web-search-index")


def test_url_sources_say_where_a_fetched_url_may_come_from():
    with serving_pages() as site:
        url = f"{site.url}/plain"
        fetch = render_call(ToolCall("x", "web_fetch", {"url": url}))
        reply = lambda request: "Done." if any(t.name == "web_fetch" for t in request.turns) else fetch  # noqa: E731
        client, _ = client_for(reply, allow_private_fetch=True)
        links = {
            "name": "links",
            "description": "Links",
            "input_schema": {"type": "object", "properties": {}},
        }
        clock = {**CLOCK, "name": "clock"}
        from_tool = [
            {"role": "user", "content": "Find a link."},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "toolu_1", "name": "links", "input": {}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": url}]},
        ]

        def code(sources, messages=None):
            request = body([links, clock, {**FETCH, "url_sources": sources}], f"Read {url}")
            if messages is not None:
                request["messages"] = messages
            with client:
                result = client.post("/v1/messages", json=request).json()["content"][1]
            return result["content"].get("error_code")

        assert code({"user_input": {"type": "none"}}) == "url_not_in_prior_context"
        assert code({"user_input": {"type": "all"}}) is None
        assert (
            code(
                {
                    "client_tool_results": {
                        "type": "only",
                        "tools": [{"type": "tool_reference", "name": "links"}],
                    }
                },
                from_tool,
            )
            is None
        )
        assert (
            code(
                {
                    "client_tool_results": {
                        "type": "except",
                        "tools": [{"type": "tool_reference", "name": "links"}],
                    }
                },
                from_tool,
            )
            == "url_not_in_prior_context"
        )


def test_a_client_side_search_loads_tools_by_tool_reference():
    """Claude Code's way: no server tool search, a deferred tool, and a client tool whose
    tool_result holds tool_reference blocks; the found tool is shown and callable."""
    finder = {
        "name": "find_tools",
        "description": "Finds tools",
        "input_schema": {"type": "object", "properties": {}},
    }
    client, engine = client_for(render_call(ToolCall("y", "get_weather", {"city": "Paris"})))
    history = [
        {"role": "user", "content": "Weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "find_tools", "input": {}}],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_1",
                    "content": [{"type": "tool_reference", "tool_name": "get_weather"}],
                }
            ],
        },
    ]
    forced = {"type": "tool", "name": "get_weather"}
    with client:
        response = client.post(
            "/v1/messages", json=body([finder, WEATHER], messages=history, tool_choice=forced)
        )
    assert response.status_code == 200, response.text
    assert response.json()["content"][0]["name"] == "get_weather"
    assert '"name": "get_weather"' in engine.requests[0].turns[-1].text


CITING = {**FETCH, "citations": {"enabled": True}}
QUOTE = "<cite {}>The plumb line is vertical.</cite> So it is."


def test_a_page_fetched_with_citations_on_is_quoted_with_a_char_location():
    """The page is document 1 after the request's own document; the model read it with the header
    of a citable document, and the answer's quote is a text block with its citation."""
    with serving_pages() as site:
        url = f"{site.url}/page"
        client, engine = client_for(
            calling(ToolCall("x", "web_fetch", {"url": url}), then=QUOTE.format(1)), allow_private_fetch=True
        )
        note = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "A note."}}
        content = [note, {"type": "text", "text": f"Read {url}"}]
        with client:
            message = client.post("/v1/messages", json=body([CITING], content)).json()
            events = sse_events(client.post("/v1/messages", json=body([CITING], content, stream=True)).text)
    assert types(message) == ["server_tool_use", "web_fetch_tool_result", "text", "text"]
    document = message["content"][1]["content"]["content"]
    assert document["citations"] == {"enabled": True}
    quoted, after = message["content"][2:]
    assert quoted["text"] == "The plumb line is vertical."
    assert quoted["citations"] == [
        {
            "type": "char_location",
            "cited_text": "The plumb line is vertical.",
            "document_index": 1,
            "document_title": "Plumb page",
            "file_id": None,
            "start_char_index": 0,
            "end_char_index": 27,
        }
    ]
    assert after == {"type": "text", "text": " So it is.", "citations": None}
    read = engine.requests[1].turns[-1].text
    assert "The plumb line is vertical." in read
    assert "<cite 1>" in read  # the header of a citable document: how to quote it
    deltas = [e["delta"] for e in events if e["type"] == "content_block_delta"]
    assert [d["citation"] for d in deltas if d["type"] == "citations_delta"] == quoted["citations"]


def test_without_citations_on_the_tool_a_cite_tag_is_only_text():
    with serving_pages() as site:
        url = f"{site.url}/page"
        client, _ = client_for(
            calling(ToolCall("x", "web_fetch", {"url": url}), then=QUOTE.format(0)), allow_private_fetch=True
        )
        with client:
            message = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
    assert "citations" not in message["content"][1]["content"]["content"]
    assert message["content"][2] == {"type": "text", "text": QUOTE.format(0), "citations": None}


def test_a_quote_may_be_followed_by_a_call_in_the_same_generation():
    """After a page fetched to cite, the next generation quotes it and may then call a tool."""
    with serving_pages() as site:
        url = f"{site.url}/page"
        then = QUOTE.format(0) + render_call(ToolCall("y", "get_time", {}))
        client, _ = client_for(
            calling(ToolCall("x", "web_fetch", {"url": url}), then=then), allow_private_fetch=True
        )
        with client:
            message = client.post("/v1/messages", json=body([CITING, CLOCK], f"Read {url}")).json()
    assert types(message) == ["server_tool_use", "web_fetch_tool_result", "text", "text", "tool_use"]
    assert message["content"][2]["citations"][0]["cited_text"] == "The plumb line is vertical."
    assert message["content"][4]["name"] == "get_time"
    assert message["stop_reason"] == "tool_use"


def test_citations_of_fetched_pages_refuse_structured_outputs():
    client, _ = client_for("{}")
    output = {"format": {"type": "json_schema", "schema": {"type": "object"}}}
    with client:
        response = client.post("/v1/messages", json=body([CITING], output_config=output))
    refused(response, "citations enabled on web fetch")


def test_an_indexed_page_is_fetched_from_the_index_without_the_network(index_dir):
    """The search index is the server's offline copy of its pages: no address is resolved (the
    URL's domain does not exist), the domain filters still apply."""
    url = "https://tides.example/brest"
    client, engine = client_for(calling(ToolCall("x", "web_fetch", {"url": url})), web_search_index=index_dir)
    with client:
        message = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
        blocked = client.post(
            "/v1/messages", json=body([{**FETCH, "blocked_domains": ["tides.example"]}], f"Read {url}")
        ).json()
        live = {"type": "web_fetch_20260309", "name": "web_fetch", "use_cache": False}
        uncached = client.post("/v1/messages", json=body([live], f"Read {url}")).json()
    page = message["content"][1]["content"]
    assert page["type"] == "web_fetch_result"
    assert page["content"]["title"] == "Tides of Brest"
    assert page["content"]["source"]["data"] == "High tide in Brest is at noon."
    assert "High tide in Brest is at noon." in engine.requests[1].turns[-1].text
    assert blocked["content"][1]["content"] == {
        "type": "web_fetch_tool_result_error",
        "error_code": "url_not_allowed",
    }
    # use_cache false: the network only, where the reserved domain never resolves
    assert uncached["content"][1]["content"]["error_code"] == "url_not_accessible"


def test_a_fetched_pdf_is_cited_by_page():
    """A PDF fetched with citations on is a citable PDF document: its quotes are page_location."""
    from ..test_documents import make_pdf
    from .pages import PAGES

    pdf = make_pdf(["The first page.", "The plumb line is vertical."])
    PAGES["/doc.pdf"] = (200, "application/pdf", pdf, {})
    try:
        with serving_pages() as site:
            url = f"{site.url}/doc.pdf"
            then = "<cite 0>The plumb line is vertical.\n</cite>"  # a whole chunk: the page's text
            client, _ = client_for(
                calling(ToolCall("x", "web_fetch", {"url": url}), then=then), allow_private_fetch=True
            )
            with client:
                message = client.post("/v1/messages", json=body([CITING], f"Read {url}")).json()
    finally:
        del PAGES["/doc.pdf"]
    document = message["content"][1]["content"]["content"]
    assert (document["source"]["media_type"], document["citations"]) == ("application/pdf", {"enabled": True})
    (citation,) = message["content"][2]["citations"]
    assert citation["type"] == "page_location"
    assert (citation["start_page_number"], citation["end_page_number"]) == (2, 3)
    assert citation["cited_text"] == "The plumb line is vertical.\n"


def test_quotes_before_calls_never_hold_the_call_tag_and_the_grammar_compiles():
    from reference_server.citations import CitableDocument, CitationPlan, citation_grammar
    from reference_server.engine import check_grammar
    from reference_server.tools.definitions import parse_tools
    from reference_server.tools.grammar import call_rules

    page = CitableDocument(0, "Formats", "text", (("Models write <tool_call>\n then JSON. ", "It ends."),))
    plan = CitationPlan((page,))
    with_calls = citation_grammar(plan, call_rules(parse_tools([CLOCK]), parallel=False))
    alone = citation_grammar(plan)
    assert with_calls is not None
    assert alone is not None
    check_grammar(with_calls)  # llguidance takes it
    assert "~/(?s:.*<tool_call>.*)/" in with_calls.lark
    assert "<tool_call>.*)/" not in alone.lark  # without calls, a quote may hold anything


def test_long_titles_are_clipped_and_indexed_urls_match_loosely(index_dir):
    from reference_server.server_tools.fetch import Fetched
    from reference_server.server_tools.results import fetch_result

    long = Fetched("https://a.example/", "text/plain", "Text.", "T" * 600, "2026-12-04T00:00:00Z")
    assert len(fetch_result("srvtoolu_1", long).content["content"]["title"]) == 500
    url = "https://TIDES.example/brest/#top"
    client, _ = client_for(calling(ToolCall("x", "web_fetch", {"url": url})), web_search_index=index_dir)
    with client:
        message = client.post("/v1/messages", json=body([FETCH], f"Read {url}")).json()
    assert message["content"][1]["content"]["content"]["source"]["data"] == "High tide in Brest is at noon."
