"""SRVTOOL-*: Anthropic's own tools. Server tools (tool search, web fetch) run on the target
inside the turn: their calls are `server_tool_use` blocks (`srvtoolu_` ids) answered in the same
response by result blocks, failures are result blocks (not HTTP errors), `usage.server_tool_use`
counts the requests, deferred tools stay out of the prompt until found, and a `pause_turn` sent
back goes on. Anthropic-defined client tools (bash, text editor) are plain `tool_use` blocks
under their fixed names. And the documented test string gets a `redacted_thinking` block.

Each runs only on a target that serves the tool (the profile, or one probe request: a 400 for
the tool's type means absent, conformance/features.py). Every request forces the call it judges
(`tool_choice` naming the tool), so any model answers with one short call. Nothing here needs a
page the harness names: web fetch is judged on its failures, its refusal of a loopback address
(which a correctly configured server refuses whatever network it sits in), and on a page the
target's own web search found (SRVTOOL-014).
"""

from __future__ import annotations

import json
import re
from contextlib import ExitStack
from typing import Any

from conformance.catalogue import Level, prop
from conformance.features import SHOWN_BY, Features
from conformance.generating.thinking import thinking_body
from conformance.generating.tooluse import (
    BASH,
    COMPUTER,
    COMPUTER_ACTIONS,
    DEFERRED_TOOL,
    EDITOR,
    SERVER_TOOL_ID,
    WEB_FETCH_ERROR_CODES,
    WEB_SEARCH_ERROR_CODES,
    blocks_of,
    fetch_body,
    forced_tool,
    search_body,
    streamed_tool_calls,
    tool_body,
    tool_uses,
    web_search_body,
)
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_status,
    json_object,
    not_judged,
    read,
    read_optional,
)
from conformance.judging.citing import Source, citations_in, citations_of, judge_all
from conformance.wire.drivers import create_json, expect_stream, stream_raw
from conformance.wire.loopback import loopback_mcp, loopback_page
from conformance.wire.target import Exchange, Target

SEARCH = "agents-and-tools/tool-use/tool-search-tool"
FETCH = "agents-and-tools/tool-use/web-fetch-tool"
BASH_DOCS = "agents-and-tools/tool-use/bash-tool"
EDITOR_DOCS = "agents-and-tools/tool-use/text-editor-tool"
THINKING = "build-with-claude/extended-thinking"
STOP_REASONS = "build-with-claude/handling-stop-reasons"
MESSAGE = "the Message"
NO_SERVER_CALL = "the forced server tool call got no server_tool_use block"
# The string the docs give for testing redacted_thinking handling.
REDACTED_TRIGGER = (
    "ANTHROPIC_MAGIC_STRING_TRIGGER_REDACTED_THINKING_"
    "46C9A13E193C177646C7398A98432ECCCE4C1253D5E2D82641AC0E52CC2876CB"
)
Info = dict[str, Any] | None


def server_turn(message: Any) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The server_tool_use blocks of a Message, and the result block answering each (by id)."""
    content = read(message, "content", list, where=MESSAGE)
    uses = [b for b in content if isinstance(b, dict) and b.get("type") == "server_tool_use"]
    results = {
        b["tool_use_id"]: b
        for b in content
        if isinstance(b, dict)
        and str(b.get("type", "")).endswith("_tool_result")
        and "tool_use_id" in b
        and isinstance(b["tool_use_id"], str)
    }
    return uses, results


def expect_answered(message: Any, name: str) -> list[dict[str, Any]]:
    """Every server_tool_use of `name` has a srvtoolu_ id and is answered, later in the same
    content, by a result block whose tool_use_id is its id; no result answers nothing. The
    result blocks, in order."""
    content = read(message, "content", list, where=MESSAGE)
    uses, _ = server_turn(message)
    if not any(use.get("name") == name for use in uses):
        kinds = [b.get("type") for b in content if isinstance(b, dict)]
        expect(
            False,
            f"a server_tool_use block named {name!r}",
            f"content block types {kinds}",
            reason="no-server-call",
        )
    seen: dict[str, int] = {}
    answered: list[dict[str, Any]] = []
    for position, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "server_tool_use":
            tool_id = read(block, "id", str, where="a server_tool_use block")
            expect(
                re.match(SERVER_TOOL_ID, tool_id) is not None,
                f"a server_tool_use id matching {SERVER_TOOL_ID}",
                tool_id,
                reason="server-tool-id",
            )
            expect(
                isinstance(block.get("input"), dict),
                "its input an object",
                block.get("input"),
                reason="input",
            )
            seen[tool_id] = position
        elif str(block.get("type", "")).endswith("_tool_result"):
            tool_use_id = read(block, "tool_use_id", str, where=f"a {block.get('type')} block")
            expect(
                tool_use_id in seen,
                "a result block answering a server_tool_use earlier in the content",
                f"tool_use_id {tool_use_id!r}; server_tool_use ids before it: {sorted(seen)}",
                reason="unpaired-result",
            )
            seen.pop(tool_use_id)
            answered.append(block)
    expect(
        not seen,
        "every server_tool_use answered by its result",
        f"unanswered: {sorted(seen)}",
        reason="unanswered",
    )
    return answered


@prop(
    "SRVTOOL-001",
    Level.MUST,
    "A tool search is a server_tool_use answered by its tool_search_tool_result",
    url=f"{SEARCH}#how-tool-search-works",
    requirement="A server tool's call is a server_tool_use block (id srvtoolu_…, the tool's name, an "
    "object input) followed in the same response by its result block, whose tool_use_id is that "
    "id; for tool search a tool_search_tool_result holding a tool_search_tool_search_result (its "
    "tool_references) or a tool_search_tool_result_error.",
    source="schema: ResponseServerToolUseBlock id pattern ^srvtoolu_[a-zA-Z0-9_]+$, required [id, "
    "input, name, type]; ResponseToolSearchToolResultBlock required [content, tool_use_id, type]",
    requires=("tool_search",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].type",
        "request:tools[].name",
        "request:tools[].defer_loading",
        "request:tool_choice",
        "block:server_tool_use",
        "block:tool_search_tool_result",
    ),
)
def test_srvtool_001_tool_search_blocks(target: Target) -> None:
    """Forces a regex tool search: each server_tool_use is answered by its result block."""
    message = create_json(target, search_body(target))
    for result in expect_answered(message, "tool_search_tool_regex"):
        expect_equal(result.get("type"), "tool_search_tool_result", "the tool search's result block type")
        content = read(result, "content", dict, where="a tool_search_tool_result")
        kind = read(content, "type", str, where="a tool_search_tool_result's content")
        expect(
            kind in ("tool_search_tool_search_result", "tool_search_tool_result_error"),
            "content of type tool_search_tool_search_result or tool_search_tool_result_error",
            kind,
            reason="result-type",
        )
        if kind == "tool_search_tool_search_result":
            read(content, "tool_references", list, where="a tool_search_tool_search_result")


def sent_back(body: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    """`body` continued by an assistant turn that ends with `call`, unanswered: a turn paused
    before the target ran the call, sent back so that it runs it (every model makes the same
    call this way). Tool choice auto: the call is already made."""
    messages = [*body["messages"], {"role": "assistant", "content": [call]}]
    return {**body, "tool_choice": {"type": "auto"}, "messages": messages}


def answer_to(target: Target, body: dict[str, Any], call: dict[str, Any]) -> dict[str, Any]:
    """The result block answering `call` sent back unanswered; not judged where the target
    refuses such a turn with a 400."""
    return answered(target, body, call)[1]


def answered(target: Target, body: dict[str, Any], call: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
    """The Message answering `call` sent back unanswered, and its result block for the call."""
    response = target.request("POST", "/v1/messages", json_body=sent_back(body, call))
    if response.status_code == 400:
        not_judged("the target refused a turn sent back with an unanswered server_tool_use (HTTP 400)")
    expect_status(response, 200)
    message = json_object(response, MESSAGE)
    content = read(message, "content", list, where=MESSAGE)
    results = [b for b in content if isinstance(b, dict) and b.get("tool_use_id") == call["id"]]
    expect(
        bool(results),
        f"a result block answering the {call['name']} call sent back",
        "none",
        reason="unanswered",
    )
    return message, results[0]


@prop(
    "SRVTOOL-002",
    Level.SHOULD,
    "A tool search for a deferred tool's name finds it, and only deferred tools",
    url=f"{SEARCH}#how-tool-search-works",
    requirement="A regex search whose pattern is a deferred tool's name answers with a "
    "tool_reference to that tool, and references only tools of the request marked defer_loading "
    "(those the search exists to find). The call is one the client sends back unanswered (a "
    "paused turn), so every model searches the same pattern.",
    requires=("tool_search",),
    covers=("endpoint:POST /v1/messages", "request:tools[].defer_loading", "block:tool_search_tool_result"),
)
def test_srvtool_002_search_finds_the_deferred_tool(target: Target) -> None:
    """An unanswered search for "tide" sent back: its result references get_tide only."""
    call = {
        "type": "server_tool_use",
        "id": "srvtoolu_plumbline02",
        "name": "tool_search_tool_regex",
        "input": {"query": "tide"},
    }
    result = answer_to(target, search_body(target), call)
    content = read(result, "content", dict, where="the tool_search_tool_result")
    references = read(content, "tool_references", list, where="the tool search's result")
    names = [read(ref, "tool_name", str, where="a tool_reference") for ref in references]
    expect_equal(names, [DEFERRED_TOOL["name"]], "the tools found (the one deferred tool named *tide*)")


@prop(
    "SRVTOOL-003",
    Level.SHOULD,
    "Deferred tools count no input tokens until found",
    url=f"{SEARCH}#how-tool-search-works",
    requirement="A tool marked defer_loading is not loaded into the prompt until a search finds "
    "it, so count_tokens with one more deferred tool counts the same as without it (and a loaded "
    "tool does count).",
    requires=("tool_search",),
    covers=(
        "endpoint:POST /v1/messages/count_tokens",
        "count_request:tools[].defer_loading",
        "count_response:input_tokens",
    ),
)
def test_srvtool_003_deferred_tools_not_counted(target: Target) -> None:
    """count_tokens with and without the deferred tool (a search tool and a loaded one in both),
    and with no tools: equal counts show the deferred tool left out only where the loaded tools
    count at all (a count that ignores every tool is TOOL-014's finding: SKIP)."""
    body = search_body(target)
    body = {key: body[key] for key in ("model", "messages", "tools")}

    def count(tools: list[dict[str, Any]] | None) -> int:
        request = {**body, "tools": tools} if tools else {k: v for k, v in body.items() if k != "tools"}
        response = target.request("POST", "/v1/messages/count_tokens", json_body=request)
        expect_status(response, 200)
        return int(
            read(json_object(response, "the token count"), "input_tokens", int, where="the token count")
        )

    loaded = [tool for tool in body["tools"] if not tool.get("defer_loading")]
    with_loaded, without = count(loaded), count(None)
    if with_loaded <= without:
        not_judged(
            f"count_tokens counts the loaded tools as nothing ({with_loaded} with them, {without} without)",
            judged_by="TOOL-014",
        )
    expect_equal(count(body["tools"]), with_loaded, "input_tokens with the deferred tool (as without it)")


def fetch_results(message: Any) -> list[dict[str, Any]]:
    return [r for r in expect_answered(message, "web_fetch") if r.get("type") == "web_fetch_tool_result"]


def expect_fetch_result(result: dict[str, Any]) -> str | None:
    """A web_fetch_tool_result holds a web_fetch_result or an error with a documented code; the
    code (None for a fetched page)."""
    content = read(result, "content", dict, where="a web_fetch_tool_result")
    kind = read(content, "type", str, where="a web_fetch_tool_result's content")
    expect(
        kind in ("web_fetch_result", "web_fetch_tool_result_error"),
        "content of type web_fetch_result or web_fetch_tool_result_error",
        kind,
        reason="result-type",
    )
    if kind == "web_fetch_result":
        read(content, "url", str, where="a web_fetch_result")
        read(content, "content", dict, where="a web_fetch_result")
        return None
    code: str = read(content, "error_code", str, where="a web_fetch_tool_result_error")
    expect(
        code in WEB_FETCH_ERROR_CODES,
        f"a documented error_code ({', '.join(sorted(WEB_FETCH_ERROR_CODES))})",
        code,
        reason="error-code",
    )
    return code


@prop(
    "SRVTOOL-004",
    Level.MUST,
    "A failed web fetch is a result block with a documented error code",
    url=f"{FETCH}#errors",
    requirement="When the fetch tool cannot fetch (no such URL in the conversation, an invalid "
    "URL, a refused domain), the response is still 200: the web_fetch_tool_result holds a "
    "web_fetch_tool_result_error whose error_code is one of the documented codes.",
    source='docs: agents-and-tools/tool-use/web-fetch-tool#errors — "When the web fetch tool '
    "encounters an error, the Claude API returns a 200 (success) response with the error "
    'represented in the response body"; schema: BetaWebFetchToolResultErrorCode enum',
    requires=("web_fetch",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].max_uses",
        "block:server_tool_use",
        "block:web_fetch_tool_result",
    ),
)
def test_srvtool_004_failed_fetch_result(target: Target) -> None:
    """Forces a web fetch with no URL anywhere in the conversation: 200, and each result is a
    documented shape (a fetch of a URL the model made up is an error block). The rule is about
    the failed fetches: where every fetch worked, SKIP."""
    message = create_json(target, fetch_body(target))
    codes = [expect_fetch_result(result) for result in fetch_results(message)]
    if not any(code is not None for code in codes):
        not_judged(f"no web_fetch_tool_result_error among the {len(codes)} results: no failed fetch to judge")


@prop(
    "SRVTOOL-005",
    Level.MUST,
    "usage.server_tool_use counts the web fetches made",
    url="api/messages#response-usage",
    requirement="usage.server_tool_use.web_fetch_requests equals the number of web_fetch "
    "server_tool_use blocks of the response, in the Message and in the stream's last "
    "message_delta.",
    source="schema: Usage.server_tool_use — ServerToolUsage {web_fetch_requests, web_search_requests}: "
    '"The number of web fetch tool requests"',
    invariant=50,
    requires=("web_fetch",),
    covers=(
        "endpoint:POST /v1/messages",
        "response:usage.server_tool_use",
        "response:usage.server_tool_use.web_fetch_requests",
        "event:message_delta",
    ),
)
def test_srvtool_005_server_tool_usage(target: Target) -> None:
    """Forces one web fetch, plain and streamed: the count equals the web_fetch calls."""
    body = fetch_body(target)
    cases = Cases()
    with cases.case("create"):
        message = create_json(target, body)
        calls = [use for use in server_turn(message)[0] if use.get("name") == "web_fetch"]
        if not calls:
            not_judged(NO_SERVER_CALL, judged_by="SRVTOOL-004")
        usage = read(message, "usage", dict, where=MESSAGE)
        counted = read(usage, "server_tool_use.web_fetch_requests", int, where="the usage")
        expect_equal(counted, len(calls), "usage.server_tool_use.web_fetch_requests (web_fetch calls)")
    with cases.case("stream"):
        run = expect_stream(stream_raw(target, body))
        streamed = [
            c for c in streamed_tool_calls(run, "server_tool_use") if c.start.get("name") == "web_fetch"
        ]
        if not streamed:
            not_judged("the stream has no web_fetch server_tool_use block", judged_by="SRVTOOL-004")
        usage = read(run.last("message_delta"), "usage", dict, where="the last message_delta")
        counted = read(
            usage, "server_tool_use.web_fetch_requests", int, where="the last message_delta's usage"
        )
        expect_equal(counted, len(streamed), "the streamed web_fetch_requests (web_fetch calls)")
    cases.check()


@prop(
    "SRVTOOL-006",
    Level.MUST,
    "A streamed server_tool_use's input arrives as input_json_delta",
    url="build-with-claude/streaming#input-json-delta",
    requirement="A streamed server_tool_use block starts with an empty input; its input arrives "
    "in input_json_delta fragments whose concatenation is a JSON object; its result block "
    "arrives whole in its content_block_start (a result has no delta type).",
    source='docs: build-with-claude/streaming#input-json-delta — "The deltas for tool_use content '
    'blocks correspond to updates for the input field of the block"; schema: the delta union has '
    "no delta for result blocks",
    invariant=59,
    requires=("tool_search",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "event:content_block_start",
        "delta:input_json_delta",
        "block:server_tool_use",
        "block:tool_search_tool_result",
    ),
)
def test_srvtool_006_server_call_deltas(target: Target) -> None:
    """Streams a forced tool search: the call's fragments parse to an object; each result
    block's start already holds its content."""
    run = expect_stream(stream_raw(target, search_body(target)))
    calls = streamed_tool_calls(run, "server_tool_use")
    if not calls:
        not_judged("the stream has no server_tool_use block", judged_by="SRVTOOL-001")
    for call in calls:
        expect_equal(call.start.get("input"), {}, "a server_tool_use's input at content_block_start")
        try:
            value = json.loads(call.joined)
        except ValueError:
            value = None
        expect(
            isinstance(value, dict),
            "the input_json_delta fragments joined: a JSON object",
            call.joined[:300],
            reason="input-json",
        )
    for start in run.of_type("content_block_start"):
        block = start.get("content_block")
        if isinstance(block, dict) and str(block.get("type", "")).endswith("_tool_result"):
            expect(
                isinstance(block.get("content"), dict | list),
                "a result block whole at its start (its content)",
                json.dumps(block)[:300],
                reason="result-whole",
            )


@prop(
    "SRVTOOL-007",
    Level.SHOULD,
    "Web fetch refuses a loopback address",
    url=f"{FETCH}#security-considerations",
    requirement="A server that fetches for a model must not reach inside its own network: a "
    "fetch of a loopback URL (given in the conversation) is a web_fetch_tool_result error, no "
    "request reaches the page, and nothing of it comes back. The call is the one the client sends "
    "back unanswered (a paused turn), so every model makes the same call.",
    requires=("web_fetch",),
    covers=("endpoint:POST /v1/messages", "block:server_tool_use", "block:web_fetch_tool_result"),
)
def test_srvtool_007_loopback_fetch_refused(target: Target) -> None:
    """A turn sent back with an unanswered web_fetch of a loopback page: the answer's result for
    that call is an error, and the page saw no request."""
    with loopback_page() as page:
        call = {
            "type": "server_tool_use",
            "id": "srvtoolu_plumbline07",
            "name": "web_fetch",
            "input": {"url": page.url},
        }
        result = answer_to(target, fetch_body(target, f"Fetch {page.url} and tell me what it says."), call)
        code = expect_fetch_result(result)
        expect(
            code is not None,
            "a web_fetch_tool_result_error for a loopback URL",
            json.dumps(result)[:300],
            subject="a loopback page fetched",
            reason="private-fetch",
        )
    expect_equal(page.hits, [], "requests that reached the loopback page")


@prop(
    "SRVTOOL-008",
    Level.MUST,
    "bash and the text editor are tool_use blocks under their fixed names",
    url=f"{BASH_DOCS}",
    requirement="The Anthropic-defined client tools run on the client: a forced call of "
    "bash_20250124 is a tool_use block named bash whose input holds only command (a string) and "
    "restart (a boolean); one of text_editor_20250728 is named str_replace_based_edit_tool with a "
    "command of view, create, str_replace or insert and a string path.",
    source="docs: agents-and-tools/tool-use/bash-tool and text-editor-tool — the tool names bash and "
    "str_replace_based_edit_tool, and their input parameters; schema: ToolBash20250124.name const "
    "bash, ToolTextEditor20250728.name const str_replace_based_edit_tool",
    requires=("builtin_tools",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].type",
        "request:tools[].name",
        "request:tools[].max_characters",
        "block:tool_use",
    ),
)
def test_srvtool_008_builtin_client_tools(target: Target) -> None:
    """Forces bash, then the text editor: each call's name and input."""
    cases = Cases()
    with cases.case("bash"):
        message = create_json(target, tool_body(target, tools=[BASH], tool_choice=forced_tool("bash")))
        calls = tool_uses(message)
        expect(
            bool(calls),
            "a tool_use block",
            [b.get("type") for b in message.get("content", [])],
            reason="no-call",
        )
        for call in calls:
            expect_equal(call.get("name"), "bash", "the bash call's name")
            given = read(call, "input", dict, where="the bash call")
            expect(
                set(given) <= {"command", "restart"},
                "input keys within command, restart",
                sorted(given),
                reason="input-keys",
            )
            if "command" in given:
                expect(
                    isinstance(given["command"], str),
                    "command a string",
                    given["command"],
                    reason="input-type",
                )
    with cases.case("text editor"):
        name = "str_replace_based_edit_tool"
        message = create_json(target, tool_body(target, tools=[EDITOR], tool_choice=forced_tool(name)))
        calls = tool_uses(message)
        expect(
            bool(calls),
            "a tool_use block",
            [b.get("type") for b in message.get("content", [])],
            reason="no-call",
        )
        for call in calls:
            expect_equal(call.get("name"), name, "the text editor call's name")
            given = read(call, "input", dict, where="the text editor call")
            expect(
                given.get("command") in ("view", "create", "str_replace", "insert"),
                "command one of view, create, str_replace, insert",
                given.get("command"),
                reason="input-enum",
            )
            expect(
                isinstance(given.get("path"), str), "path a string", given.get("path"), reason="input-type"
            )
    cases.check()


@prop(
    "SRVTOOL-009",
    Level.SHOULD,
    "The documented test string gets a redacted_thinking block that goes back unchanged",
    url=f"{THINKING}#thinking-redaction",
    requirement="With thinking on, a prompt holding the test string the docs give returns a "
    "redacted_thinking block (a non-empty opaque data string), and the conversation sent back with "
    "that block unchanged is accepted (200).",
    requires=("thinking",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:thinking",
        "request:output_config.effort",
        "block:redacted_thinking",
    ),
)
def test_srvtool_009_redacted_block(target: Target, model_info: Info) -> None:
    """The test string with thinking on; then the answer sent back in the history."""
    body = thinking_body(target, model_info, messages=[{"role": "user", "content": REDACTED_TRIGGER}])
    message = create_json(target, body)
    redacted = blocks_of(message, "redacted_thinking")
    expect(
        bool(redacted),
        "a redacted_thinking block",
        [b.get("type") for b in message.get("content", [])],
        reason="no-redacted-thinking",
    )
    for block in redacted:
        data = read(block, "data", str, where="a redacted_thinking block")
        expect(bool(data), "non-empty data", repr(data), reason="empty-data")
    content = read(message, "content", list, where=MESSAGE)
    history = [
        *body["messages"],
        {"role": "assistant", "content": content},
        {"role": "user", "content": "And?"},
    ]
    response = target.request("POST", "/v1/messages", json_body={**body, "messages": history})
    expect_status(response, 200)


@prop(
    "SRVTOOL-010",
    Level.MUST,
    "A pause_turn sent back goes on",
    url=f"{STOP_REASONS}#pause-turn",
    requirement="A response that ends with stop_reason pause_turn is continued by sending it back "
    "as it is, as the last assistant message: the target answers 200 with a Message.",
    source='docs: api/messages (StopReason) — "pause_turn: we paused a long-running turn. You may '
    'provide the response back as-is in a subsequent request to let the model continue."',
    requires=("tool_search",),
    covers=("endpoint:POST /v1/messages", "stop_reason:pause_turn", "block:server_tool_use"),
)
def test_srvtool_010_pause_turn_resumes(target: Target) -> None:
    """Forces a tool search; when the target pauses the turn, sends it back."""
    body = search_body(target)
    message = create_json(target, body)
    if read(message, "stop_reason", str, where=MESSAGE) != "pause_turn":
        not_judged("the target did not pause the turn (it ran the whole loop)", judged_by="SRVTOOL-001")
    content = read(message, "content", list, where=MESSAGE)
    resumed = {
        **body,
        "tool_choice": {"type": "auto"},
        "messages": [*body["messages"], {"role": "assistant", "content": content}],
    }
    again = create_json(target, resumed)
    read(again, "content", list, where="the resumed Message")
    read(again, "stop_reason", str, where="the resumed Message")


MCP_BETA = "mcp-client-2025-11-20"


@prop(
    "SRVTOOL-011",
    Level.MUST,
    "An MCP server's tool is called as mcp_tool_use and answered by mcp_tool_result",
    url="agents-and-tools/mcp-connector",
    requirement="With the MCP connector (beta mcp-client-2025-11-20), the tools of a server listed "
    "in mcp_servers and enabled by its mcp_toolset are offered to the model; a call is an "
    "mcp_tool_use block (id, name, server_name, object input), the target calls the MCP server, "
    "and an mcp_tool_result (tool_use_id = that id, is_error, content) follows. The harness runs "
    "the MCP server on its loopback, so the target must run on this machine and may reach it.",
    source="docs: agents-and-tools/mcp-connector — response content types mcp_tool_use {id, name, "
    "server_name, input} and mcp_tool_result {tool_use_id, is_error, content}",
    requires=("mcp",),
    covers=(
        "endpoint:POST /v1/messages",
        "param:anthropic-beta",
        "request:tool_choice",
        "request:tools[].configs",
    ),
)
def test_srvtool_011_mcp_connector(target: Target) -> None:
    """Forces a call of the harness's MCP tool (the only tool offered)."""
    with ExitStack() as stack:
        try:
            running = stack.enter_context(loopback_mcp())
        except ImportError as exc:
            not_judged(
                f"the harness needs the mcp package and uvicorn to run its MCP server ({exc.name} missing)"
            )
        body = tool_body(
            target,
            tools=[
                {
                    "type": "mcp_toolset",
                    "mcp_server_name": "plumbline",
                    "configs": {"tide": {"enabled": True}},
                }
            ],
            tool_choice={"type": "any", "disable_parallel_tool_use": True},
            prompt="What is the tide at Brest? Use the tool.",
            mcp_servers=[{"type": "url", "url": running.url, "name": "plumbline"}],
        )
        response = target.request(
            "POST", "/v1/messages", json_body=body, headers={**target.headers(), "anthropic-beta": MCP_BETA}
        )
        expect_status(response, 200)
        message = json_object(response, MESSAGE)
        uses = blocks_of(message, "mcp_tool_use")
        kinds = [b.get("type") for b in read(message, "content", list, where=MESSAGE) if isinstance(b, dict)]
        expect(bool(uses), "an mcp_tool_use block", f"content block types {kinds}", reason="no-mcp-call")
        results = {b.get("tool_use_id"): b for b in blocks_of(message, "mcp_tool_result")}
        for use in uses:
            tool_id = read(use, "id", str, where="an mcp_tool_use block")
            expect_equal(use.get("name"), "tide", "the mcp_tool_use's name (the MCP server's one tool)")
            expect_equal(use.get("server_name"), "plumbline", "the mcp_tool_use's server_name")
            expect(
                isinstance(use.get("input"), dict), "its input an object", use.get("input"), reason="input"
            )
            expect(
                tool_id in results,
                "an mcp_tool_result answering it",
                sorted(map(str, results)),
                reason="unanswered",
            )
            result = results[tool_id]
            read(result, "is_error", bool, where="an mcp_tool_result")
            content = read(result, "content", object, where="an mcp_tool_result")
            expect(
                isinstance(content, list | str),
                "its content text blocks or a string",
                content,
                reason="content",
            )
        expect(bool(running.hits), "the MCP server called", "no call reached it", reason="not-called")


@prop(
    "SRVTOOL-012",
    Level.MUST,
    "Web fetch honours allowed_domains and blocked_domains",
    url=f"{FETCH}#domain-filtering",
    requirement="A URL outside allowed_domains, or inside blocked_domains, is not fetched: its "
    "web_fetch_tool_result is the error url_not_allowed, whatever the other options "
    "(max_content_tokens, citations off, use_cache). The URL is on the reserved .invalid domain, so "
    "a target that ignores the filters answers url_not_accessible instead. The call is one the "
    "client sends back unanswered, so every model fetches the same URL. A SHOULD sub-case: with "
    "url_sources (an SDK 2.14 field the docs do not describe yet) not counting user input, a URL "
    "only the user gave is url_not_in_prior_context.",
    source='docs: agents-and-tools/tool-use/web-fetch-tool#errors — "url_not_allowed: URL blocked by '
    'domain filtering rules and model restrictions"',
    requires=("web_fetch",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].allowed_domains",
        "request:tools[].blocked_domains",
        "request:tools[].max_uses",
        "request:tools[].max_content_tokens",
        "request:tools[].citations",
        "request:tools[].citations.enabled",
        "request:tools[].use_cache",
        "request:tools[].url_sources",
        "request:tools[].url_sources.user_input",
        "request:tools[].url_sources.client_tool_results",
        "request:tools[].url_sources.server_tool_results",
        "block:web_fetch_tool_result",
    ),
)
def test_srvtool_012_fetch_domain_filters(target: Target) -> None:
    url = "https://docs.plumbline.invalid/page"
    options = {"max_content_tokens": 2000, "citations": {"enabled": False}, "use_cache": False}
    fetch = {"type": "web_fetch_20260309", "name": "web_fetch", "max_uses": 1, **options}
    cases = Cases()
    only_results = {
        "user_input": {"type": "none"},
        "client_tool_results": {"type": "all"},
        "server_tool_results": {"type": "all"},
    }
    for name, rule, wanted in (
        ("allowed_domains", {"allowed_domains": ["example.com"]}, "url_not_allowed"),
        ("blocked_domains", {"blocked_domains": ["plumbline.invalid"]}, "url_not_allowed"),
        # SDK 2.14's url_sources: with user input not a source, a URL only the user gave is not fetched.
        ("url_sources", {"url_sources": only_results}, "url_not_in_prior_context"),
    ):
        # url_sources is an SDK 2.14 addition the docs do not describe yet: a SHOULD sub-case.
        with cases.case(name, level=Level.SHOULD if name == "url_sources" else None):
            call = {
                "type": "server_tool_use",
                "id": f"srvtoolu_plumbline12{name[0]}",
                "name": "web_fetch",
                "input": {"url": url},
            }
            body = fetch_body(target, f"Fetch {url} and summarise it.", tools=[{**fetch, **rule}])
            code = expect_fetch_result(answer_to(target, body, call))
            expect_equal(code, wanted, f"the error of a fetch the {name} rule refuses")
    cases.check()


def expect_search_result(result: dict[str, Any]) -> list[dict[str, Any]]:
    """A web_search_tool_result holds web_search_result blocks, or an error with a documented
    code; the results."""
    content = read(result, "content", object, where="a web_search_tool_result")
    if isinstance(content, dict):
        expect_equal(content.get("type"), "web_search_tool_result_error", "a non-list content's type")
        code = read(content, "error_code", str, where="a web_search_tool_result_error")
        expect(code in WEB_SEARCH_ERROR_CODES, "a documented error_code", code, reason="error-code")
        return []
    expect(
        isinstance(content, list), "content a list of web_search_result blocks", content, reason="result-type"
    )
    for item in content:
        expect_equal(
            read(item, "type", str, where="a web search result"), "web_search_result", "a result's type"
        )
        read(item, "url", str, where="a web_search_result")
        read(item, "title", str, where="a web_search_result")
        sealed = read(item, "encrypted_content", str, where="a web_search_result")
        expect(bool(sealed), "a non-empty encrypted_content", repr(sealed), reason="encrypted-content")
        age = item.get("page_age")
        expect(age is None or isinstance(age, str), "page_age a string or null", age, reason="page-age")
    return list(content)


@prop(
    "SRVTOOL-013",
    Level.MUST,
    "A web search answers with web_search_result blocks, counted in usage",
    url="agents-and-tools/tool-use/web-search-tool#response",
    requirement="A web search call (with a user_location) is a server_tool_use answered by a "
    "web_search_tool_result holding web_search_result blocks (url, title, a non-empty "
    "encrypted_content, page_age) or an error with a documented code; "
    "usage.server_tool_use.web_search_requests counts the searches; count_tokens takes the same "
    "tools. A search sent back unanswered (every model searches the same words) finds results.",
    source="schema: ResponseWebSearchResultBlock required [encrypted_content, title, type, url]; "
    "ServerToolUsage.web_search_requests; WebSearchTool20250305.user_location "
    "{type approximate, city, region, country, timezone}",
    invariant=50,
    requires=("web_search",),
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "request:tools[].user_location",
        "request:tools[].user_location.type",
        "request:tools[].user_location.city",
        "request:tools[].user_location.region",
        "request:tools[].user_location.country",
        "request:tools[].user_location.timezone",
        "count_request:tools[].user_location",
        "count_request:tools[].user_location.type",
        "count_request:tools[].user_location.city",
        "count_request:tools[].user_location.region",
        "count_request:tools[].user_location.country",
        "count_request:tools[].user_location.timezone",
        "block:web_search_tool_result",
        "response:usage.server_tool_use.web_search_requests",
    ),
)
def test_srvtool_013_web_search_results(target: Target) -> None:
    body = web_search_body(target)
    cases = Cases()
    with cases.case("forced search"):
        message = create_json(target, body)
        for result in expect_answered(message, "web_search"):
            expect_search_result(result)
        calls = [use for use in server_turn(message)[0] if use.get("name") == "web_search"]
        counted = read(message, "usage.server_tool_use.web_search_requests", int, where=MESSAGE)
        expect_equal(counted, len(calls), "usage.server_tool_use.web_search_requests (web_search calls)")
    with cases.case("search sent back"):
        call = {
            "type": "server_tool_use",
            "id": "srvtoolu_plumbline13",
            "name": "web_search",
            "input": {"query": "tide Brest"},
        }
        found = expect_search_result(answer_to(target, body, call))
        if not found:
            not_judged("the search found nothing (the target's index may not know Brest's tides)")
    with cases.case("count_tokens"):
        counted_body = {key: body[key] for key in ("model", "messages", "tools")}
        response = target.request("POST", "/v1/messages/count_tokens", json_body=counted_body)
        expect_status(response, 200)
    cases.check()


CITING_FETCH = {
    "type": "web_fetch_20250910",
    "name": "web_fetch",
    "max_uses": 1,
    "citations": {"enabled": True},
}
CITING_MAX_TOKENS = 160  # room for a quoted sentence or two, and their citations


def found_url(target: Target) -> str:
    """The URL of the first page the target's web search finds for the tides at Brest (the
    search is sent back unanswered, so any model makes it); not judged when it finds none."""
    call = {
        "type": "server_tool_use",
        "id": "srvtoolu_plumbline14s",
        "name": "web_search",
        "input": {"query": "tide Brest"},
    }
    found = expect_search_result(answer_to(target, web_search_body(target), call))
    url = found[0].get("url") if found and isinstance(found[0], dict) else None
    if not isinstance(url, str):
        not_judged("the target's web search found no page to fetch", judged_by="SRVTOOL-013")
    return url


def fetched_source(result: dict[str, Any]) -> Source:
    """The fetched page as the document its citations point into; not judged when the fetch
    failed or fetched a PDF (whose pages the harness cannot read)."""
    code = expect_fetch_result(result)
    if code is not None:
        not_judged(f"the target could not fetch the page its search found ({code})")
    document = read(result, "content.content", dict, where="the web_fetch_result")
    source = read(document, "source", dict, where="the fetched document")
    if read(source, "type", str, where="the fetched document's source") != "text":
        not_judged("the fetched page is not a text document (a PDF's pages are not read here)")
    text = read(source, "data", str, where="the fetched document's source")
    title = read_optional(document, "title", str, where="the fetched document")
    return Source("char_location", title or "", (text,))


@prop(
    "SRVTOOL-014",
    Level.MUST,
    "Citations of a fetched page quote it verbatim",
    url=f"{FETCH}#citations",
    requirement="With web fetch's citations enabled, each citation of the answer that follows a "
    "fetched text page is a char_location naming that document (document_index 0: the request "
    "has no other) whose cited_text is the page's text between start_char_index and "
    "end_char_index (0-based, exclusive end); streamed, each arrives in a citations_delta. The "
    "page is one the target's own web search found, its fetch sent back unanswered.",
    source='docs: agents-and-tools/tool-use/web-fetch-tool#citations — "Unlike web search where '
    "citations are always enabled, citations are optional for web fetch. Set "
    '`"citations": {"enabled": true}` to enable Claude to cite specific passages from fetched '
    'documents."; build-with-claude/citations (char_location: 0-indexed, exclusive end)',
    invariant=59,
    requires=("web_fetch", "web_search"),
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
        "request:tools[].citations",
        "block:web_fetch_tool_result",
        "delta:citations_delta",
    ),
)
def test_srvtool_014_fetched_page_citations(target: Target) -> None:
    """Judges the citations that come; a page its search found the target must be able to fetch."""
    url = found_url(target)
    body = tool_body(
        target,
        tools=[CITING_FETCH],
        prompt=f"What does {url} say about the tides? Quote the page.",
        max_tokens=CITING_MAX_TOKENS,
    )
    call: dict[str, Any] = {"type": "server_tool_use", "id": "srvtoolu_plumbline14", "name": "web_fetch"}
    call["input"] = {"url": url}
    message, result = answered(target, body, call)
    source = fetched_source(result)
    plain = citations_of(message)
    # The stream fetched the page again: its citations point into that fetch (a live page may
    # have changed in between).
    run = expect_stream(stream_raw(target, sent_back(body, call)))
    started = [event.get("content_block") for event in run.of_type("content_block_start")]
    again = [b for b in started if isinstance(b, dict) and b.get("tool_use_id") == call["id"]]
    expect(bool(again), "a web_fetch_tool_result answering the fetch, streamed", "none", reason="unanswered")
    streamed_source = fetched_source(again[0])
    streamed = citations_in(run)
    if not plain and not streamed:
        not_judged("no citation of the fetched page came, streamed or not")
    cases = Cases()
    judge_all(plain, [source], "the Message", cases)
    judge_all(streamed, [streamed_source], "the stream", cases)
    cases.check()


def _forced_calls_honoured(target: Target, features: Features, name: str) -> None:
    """An Anthropic-defined client tool (bash) runs on the client: the target's part is the
    forced call. Where a forced call of a custom tool gets no tool_use either, tool_choice is
    not honoured at all: TOOL-001's finding, not this tool's."""
    found = features.probe("tool_calls")
    if not found.supported or found.way == "auto":
        not_judged(
            f"a forced {name} call, like a forced custom tool's, got no tool_use", judged_by="TOOL-001"
        )


# Statuses that say the target is busy or limited, not whether it runs the tool.
_BUSY = frozenset({429, 503, 529})


@prop(
    "SRVTOOL-015",
    Level.MUST,
    "Anthropic's own tools are run or refused with a 400, never accepted and ignored",
    url="agents-and-tools/tool-use/server-tools#the-server_tool_use-block",
    requirement="A forced call of one of Anthropic's own tools (tool search, web fetch, web "
    "search, bash) is run, a server tool's server_tool_use answered by its result block in the "
    "same turn and bash's call a tool_use named bash, or the tool is refused with a 400 "
    "invalid_request_error. An answer without the tool's block (the tool accepted and ignored, or "
    "run as a client tool), or a 5xx, is neither. The run's own feature probe counts too: a tool "
    "whose probe failed fails here once, and the properties that need it are SKIP.",
    source="docs: agents-and-tools/tool-use/server-tools#the-server_tool_use-block; "
    'api/errors#http-errors — "The API executes the tool internally. You see the call and its '
    "result in the response ... The result block appears immediately after the server_tool_use "
    'block in the same assistant turn."; "400 - invalid_request_error: There was an issue with '
    'the format or content of your request."',
    detects=tuple(SHOWN_BY),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].type",
        "request:tool_choice",
        "block:server_tool_use",
    ),
)
def test_srvtool_015_run_or_refused(target: Target, features: Features) -> None:
    """Sends each tool's probe (conformance/features.py) and judges its answer, and the answer
    the run's detection got, made before any property (kept as evidence when it failed)."""
    cases = Cases()
    # The detections that failed, recorded after every probe: the evidence keeps the last
    # exchanges, and these are what the verdict is about.
    failed_detections: list[Exchange] = []
    for feature, (shown, name) in SHOWN_BY.items():
        with cases.case(f"{name} ({feature})"):
            detected = features.support(feature)
            if detected.failed and detected.evidence is not None:
                failed_detections.append(Exchange.from_evidence(detected.evidence))
            probed = features.probe(feature)
            failed = [s for s in (detected, probed) if s.failed]
            statuses = [(s.evidence or {}).get("response", {}).get("status") for s in failed]
            if failed and all(status in _BUSY for status in statuses):
                not_judged(f"the probe met a busy or limited target: {failed[0].detail}")
            status = statuses[0] if statuses else None
            accepted = status is not None and 200 <= status < 300
            if failed and accepted and shown == "tool_use":
                _forced_calls_honoured(target, features, name)
            expect(
                not failed,
                f"the tool run (a {shown} block) or refused with HTTP 400",
                "; ".join(dict.fromkeys(s.detail for s in failed)),
                reason="tool-not-run" if accepted else "probe-status",
                subject=f"{name} accepted, not run" if accepted else f"a forced {name} call got {status}",
            )
    target.recorder.exchanges.extend(failed_detections)
    cases.check()


COMPUTER_DOCS = "agents-and-tools/tool-use/computer-use-tool"


def _on_display(value: Any, width: int, height: int) -> bool:
    """A [x, y] pair of integers on the display."""
    return (
        isinstance(value, list)
        and len(value) == 2
        and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
        and 0 <= value[0] < width
        and 0 <= value[1] < height
    )


@prop(
    "SRVTOOL-016",
    Level.MUST,
    "A computer use call is a tool_use named computer, a documented action on the display",
    url=COMPUTER_DOCS,
    requirement="A forced call of computer_20250124 (display 1024 x 768) is a tool_use block named "
    "computer whose input has an action the docs list (screenshot, left_click, type, key, mouse_move, "
    "...); a coordinate or start_coordinate it gives is a pair of integers on the display; a "
    "scroll_direction one of up, down, left, right.",
    source="docs: agents-and-tools/tool-use/computer-use-tool (the tool's name computer; its actions; "
    "coordinates in the display's pixels, display_width_px x display_height_px); SDK 2.17 "
    "BetaToolComputerUse20250124Param",
    requires=("computer_use",),
    covers=("endpoint:POST /v1/messages", "request:tools[].type", "request:tools[].name", "block:tool_use"),
)
def test_srvtool_016_computer_actions(target: Target) -> None:
    width, height = COMPUTER["display_width_px"], COMPUTER["display_height_px"]
    body = tool_body(target, tools=[COMPUTER], tool_choice=forced_tool("computer"))
    headers = {**target.headers(), "anthropic-beta": "computer-use-2025-01-24"}
    message = create_json(target, body, headers=headers)
    calls = tool_uses(message)
    expect(
        bool(calls), "a tool_use block", [b.get("type") for b in message.get("content", [])], reason="no-call"
    )
    for call in calls:
        expect_equal(call.get("name"), "computer", "the computer call's name")
        given = read(call, "input", dict, where="the computer call")
        expect(
            given.get("action") in COMPUTER_ACTIONS,
            "a documented action",
            given.get("action"),
            reason="input-enum",
        )
        for field in ("coordinate", "start_coordinate"):
            if field in given:
                expect(
                    _on_display(given[field], width, height),
                    f"{field} a pair of integers on the {width} x {height} display",
                    given[field],
                    reason="off-display",
                )
        if "scroll_direction" in given:
            expect(
                given["scroll_direction"] in ("up", "down", "left", "right"),
                "scroll_direction up, down, left or right",
                given["scroll_direction"],
                reason="input-enum",
            )
