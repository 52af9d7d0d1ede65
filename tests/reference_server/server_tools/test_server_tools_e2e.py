"""Anthropic's own tools end to end: `python -m reference_server` on MLX (tiny-random) over a
real socket, driven by the official SDK: a bash call valid against the documented schema, a
regex tool search that finds a deferred tool and goes on, a web fetch of a loopback page (read
with --allow-private-fetch, refused without it and never requested), an indexed page fetched
with citations on and quoted verbatim, a web search on a local index, an MCP tool on a loopback MCP server listed and called, and usage.server_tool_use.

The random model writes random search queries and URLs, so where the words matter the call is
one the client sends back unanswered (a paused turn), which the server runs first."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import jsonschema
import pytest

from conformance.wire.launcher import reference_server

from .mcp_server import mcp_server
from .pages import serving_pages

# One worker runs this module (pytest-xdist): its servers start once, not once per worker.
pytestmark = [pytest.mark.mlx, pytest.mark.xdist_group("server_tools_e2e")]
# The SDK sends anthropic-version 2026-10-21, which removed temperature: these tests decode
# greedily (temperature 0), so they speak 2023-06-01.
LEGACY = {"anthropic-version": "2023-06-01"}

# bash_20250124's input, as the bash tool docs give it.
BASH_SCHEMA = {
    "type": "object",
    "properties": {"command": {"type": "string"}, "restart": {"type": "boolean"}},
    "additionalProperties": False,
}
WEATHER = {
    "name": "get_weather",
    "description": "The weather of a city",
    "input_schema": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris"]}}},
    "defer_loading": True,
}
REGEX = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
FETCH = {"type": "web_fetch_20250910", "name": "web_fetch"}


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("index")
    (folder / "tides.md").write_text("URL: https://tides.example/brest\n# Tides of Brest\nHigh tide at noon.")
    return folder


@pytest.fixture(scope="module")
def open_url(tmp_path_factory: pytest.TempPathFactory, index: Path) -> Iterator[str]:
    """A server that may reach loopback (fetch and MCP) and searches `index`."""
    log = tmp_path_factory.mktemp("open") / "server.log"
    args = ["--allow-private-fetch", "--allow-private-mcp", "--web-search-index", str(index)]
    with reference_server("tiny-random", log=log, args=args) as url:
        yield url


@pytest.fixture(scope="module")
def default_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("default") / "server.log"
    with reference_server("tiny-random", log=log) as url:
        yield url


def sdk(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="unused", default_headers=LEGACY, max_retries=0)


def create(client: anthropic.Anthropic, **kwargs: Any) -> Any:
    kwargs.setdefault("model", "tiny-random")
    kwargs.setdefault("max_tokens", 120)
    return client.messages.create(extra_body={"temperature": 0}, **kwargs)


def paused(user: str, call: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": [call]}]


def test_a_bash_call_validates_against_the_documented_schema(default_url):
    with sdk(default_url) as client:
        message = create(
            client,
            messages=[{"role": "user", "content": "List the files."}],
            tools=[{"type": "bash_20250124", "name": "bash"}],
            tool_choice={"type": "tool", "name": "bash", "disable_parallel_tool_use": True},
        )
    (call,) = [block for block in message.content if block.type == "tool_use"]
    assert call.name == "bash"
    assert call.id.startswith("toolu_")
    jsonschema.validate(call.input, BASH_SCHEMA)


def test_a_regex_search_finds_a_deferred_tool_and_the_turn_goes_on(default_url):
    search = {
        "type": "server_tool_use",
        "id": "srvtoolu_e2e1",
        "name": "tool_search_tool_regex",
        "input": {"query": "weather"},
    }
    with sdk(default_url) as client:
        message = create(client, messages=paused("Weather in Paris?", search), tools=[REGEX, WEATHER])
        result = message.content[0]
        assert result.type == "tool_search_tool_result"
        assert result.tool_use_id == "srvtoolu_e2e1"
        assert [ref.tool_name for ref in result.content.tool_references] == ["get_weather"]
        assert message.usage.output_tokens > 0  # the model went on after the result
        assert len(message.content) > 1
        # Found, it is callable from then on: forced in the next request.
        history = [
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": [search, result.model_dump(exclude_none=True)]},
            {"role": "user", "content": "Call it."},
        ]
        forced = create(
            client,
            messages=history,
            tools=[REGEX, WEATHER],
            tool_choice={"type": "tool", "name": "get_weather"},
        )
    assert [b.name for b in forced.content if b.type == "tool_use"] == ["get_weather"]


def test_a_loopback_page_is_fetched_only_with_the_flag(open_url, default_url):
    with serving_pages() as site:
        url = f"{site.url}/page"
        call = {"type": "server_tool_use", "id": "srvtoolu_e2e2", "name": "web_fetch", "input": {"url": url}}
        with sdk(default_url) as client:
            refused = create(client, messages=paused(f"Read {url}", call), tools=[FETCH])
        assert refused.content[0].type == "web_fetch_tool_result"
        assert refused.content[0].content.error_code == "url_not_allowed"
        assert site.hits == []
        with sdk(open_url) as client:
            fetched = create(client, messages=paused(f"Read {url}", call), tools=[FETCH])
        page = fetched.content[0].content
        assert page.type == "web_fetch_result"
        assert page.content.source.data == "The plumb line is vertical."
        assert site.hits == ["/page"]
        assert fetched.usage.server_tool_use.web_fetch_requests >= 1


def test_a_page_fetched_with_citations_on_is_quoted_verbatim(open_url):
    """The indexed page, fetched from the index: whatever the random model does, the answer after
    the fetch opens with a quote of whole sentences of the page, at the right characters."""
    url = "https://tides.example/brest"
    call = {"type": "server_tool_use", "id": "srvtoolu_e2e5", "name": "web_fetch", "input": {"url": url}}
    tools = [{**FETCH, "citations": {"enabled": True}}]
    with sdk(open_url) as client:
        message = create(client, messages=paused(f"What does {url} say?", call), tools=tools)
    page = message.content[0].content
    assert page.type == "web_fetch_result"
    text = page.content.source.data
    assert text == "# Tides of Brest\nHigh tide at noon."
    cited = message.content[1]
    assert cited.type == "text"
    assert cited.citations is not None
    (citation,) = cited.citations
    assert citation.type == "char_location"
    assert citation.document_index == 0
    assert citation.cited_text == cited.text == text[citation.start_char_index : citation.end_char_index]


def test_forced_server_calls_are_counted_in_usage(open_url):
    with sdk(open_url) as client:
        message = create(
            client,
            messages=[{"role": "user", "content": "Search the web for tides."}],
            tools=[{"type": "web_search_20250305", "name": "web_search", "max_uses": 1}],
            tool_choice={"type": "tool", "name": "web_search"},
        )
    calls = [b for b in message.content if b.type == "server_tool_use" and b.name == "web_search"]
    assert calls
    assert message.usage.server_tool_use.web_search_requests == len(calls)
    results = [b for b in message.content if b.type == "web_search_tool_result"]
    assert [r.tool_use_id for r in results] == [c.id for c in calls]


def test_an_mcp_tool_on_loopback_is_listed_and_called(open_url):
    with mcp_server() as site, sdk(open_url) as client:
        message = client.beta.messages.create(
            model="tiny-random",
            max_tokens=120,
            betas=["mcp-client-2025-11-20"],
            messages=[{"role": "user", "content": "Tide at Brest?"}],
            mcp_servers=[{"type": "url", "url": site.url, "name": "tides", "authorization_token": "t0k"}],
            tools=[{"type": "mcp_toolset", "mcp_server_name": "tides"}],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            extra_body={"temperature": 0},
        )
    uses = [b for b in message.content if b.type == "mcp_tool_use"]
    results = [b for b in message.content if b.type == "mcp_tool_result"]
    assert uses
    assert uses[0].server_name == "tides"
    assert uses[0].name in ("tide", "wind")
    assert [r.tool_use_id for r in results] == [u.id for u in uses]
    assert site.authorizations
    assert set(site.authorizations) == {"Bearer t0k"}
