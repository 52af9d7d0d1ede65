"""Requests that force tool calls and structured outputs on any model, and readers of what
comes back (the tool-use twin of drivers.py).

A property must never need a sensible answer, only structure, so every request forces the
behaviour: `tool_choice` `any` or `tool` for a call, `output_config.format` for JSON; the
schemas are small and bounded (enums, booleans, bounded patterns), so a constrained answer of
any model, a random one included, is a few dozen tokens, well inside `TOOL_MAX_TOKENS`. Every
schema here is within what the real API's strict mode accepts (no numeric or length bounds;
`additionalProperties: false` on every object), so the properties judge any target alike.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from conformance.judging.checks import ConformanceFailure, read
from conformance.wire.drivers import StreamRun, message_body
from conformance.wire.target import Target

__all__ = [
    "BASH",
    "COLOUR_SCHEMA",
    "DEFERRED_TOOL",
    "EDITOR",
    "FETCH_PROMPT",
    "FORCING_WAYS",
    "ONE_CALL",
    "REGEX_SEARCH",
    "SEARCH_PROMPT",
    "SERVER_TOOL_ID",
    "SHAPE_SCHEMA",
    "STRUCTURED_PROMPT",
    "TOOLS",
    "TOOL_MAX_TOKENS",
    "TOOL_PROMPT",
    "WEB_FETCH",
    "WEB_FETCH_ERROR_CODES",
    "WEB_SEARCH",
    "WEB_SEARCH_ERROR_CODES",
    "StreamedToolCall",
    "blocks_of",
    "colour_tool",
    "expect_valid_instance",
    "fetch_body",
    "forced_tool",
    "forcing",
    "parse_json_text",
    "schema_errors",
    "search_body",
    "streamed_text_blocks",
    "streamed_tool_calls",
    "structured_body",
    "text_blocks",
    "tool_body",
    "tool_result_turns",
    "tool_uses",
    "way_choice",
    "web_search_body",
]

TOOL_MAX_TOKENS = 200  # a ceiling: one forced call ends the turn long before it
# The forced call of most properties: any tool, once. Without disable_parallel_tool_use a weak
# model under a grammar may call again and again until max_tokens (minutes on a CPU server).
ONE_CALL: dict[str, Any] = {"type": "any", "disable_parallel_tool_use": True}
TOOL_PROMPT = "Record the colour of the sky at noon and the shape of the full moon, using the tools."
STRUCTURED_PROMPT = "Describe the sky at noon as JSON."

COLOUR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "colour": {"type": "string", "enum": ["red", "green", "blue"]},
        "bright": {"type": "boolean"},
        "where": {
            "type": "object",
            "properties": {"part": {"type": "string", "enum": ["east", "west", "overhead"]}},
            "required": ["part"],
            "additionalProperties": False,
        },
    },
    "required": ["colour", "bright", "where"],
    "additionalProperties": False,
}
SHAPE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "shape": {"type": "string", "enum": ["circle", "square", "triangle"]},
        "sides": {"type": "integer", "enum": [0, 3, 4]},
        "label": {"type": "string", "pattern": "^[a-z]{1,6}$"},
    },
    "required": ["shape", "sides"],
    "additionalProperties": False,
}


def colour_tool(*, strict: bool = False) -> dict[str, Any]:
    """The tool the properties force most: a nested object of enums and a boolean."""
    tool: dict[str, Any] = {
        "name": "record_colour",
        "description": "Record a colour seen in the sky.",
        "input_schema": copy.deepcopy(COLOUR_SCHEMA),
    }
    if strict:
        tool["strict"] = True
    return tool


SHAPE_TOOL: dict[str, Any] = {
    "name": "record_shape",
    "description": "Record a shape seen in the sky.",
    "input_schema": SHAPE_SCHEMA,
}
TOOLS: list[dict[str, Any]] = [colour_tool(), SHAPE_TOOL]


# The ways to ask for a call, in the order the run's probe tries them (conformance/evidence.py):
# any tool, else the first tool by name, else auto (which forces nothing).
FORCING_WAYS = ("any", "tool", "auto")


def way_choice(way: str, tools: list[dict[str, Any]], *, parallel: bool = False) -> dict[str, Any]:
    """The tool_choice of one way to ask for a call (`tool`: the first of `tools` by name); one
    call unless `parallel`."""
    choice: dict[str, Any] = {"type": way}
    if way == "tool":
        choice["name"] = tools[0]["name"]
    if not parallel:
        choice["disable_parallel_tool_use"] = True
    return choice


def forcing(
    target: Target, tools: list[dict[str, Any]] | None = None, *, parallel: bool = False
) -> dict[str, Any]:
    """The tool_choice that asks for a call the way the target takes one (`target.ways`: the
    run's probe found tool_choice any refused, say, and the named tool taken): a refused set-up
    is TOOL-001's finding, never every tool property's."""
    return way_choice(target.ways.get("tools", "any"), TOOLS if tools is None else tools, parallel=parallel)


def tool_body(
    target: Target,
    *,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: dict[str, Any] | None = None,
    prompt: str = TOOL_PROMPT,
    **changes: Any,
) -> dict[str, Any]:
    """A greedy request offering `tools` (default: TOOLS) with `tool_choice` (default: one call,
    forced the way the target takes it: `forcing`); `changes` replace any field (messages,
    max_tokens, ...)."""
    offered = TOOLS if tools is None else tools
    body: dict[str, Any] = {
        "max_tokens": TOOL_MAX_TOKENS,
        "messages": [{"role": "user", "content": prompt}],
        "tools": copy.deepcopy(offered),
        "tool_choice": copy.deepcopy(tool_choice or forcing(target, offered)),
    }
    return message_body(target, **{**body, **changes})


def structured_body(target: Target, schema: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A greedy request whose answer must be JSON valid against `schema`."""
    body: dict[str, Any] = {
        "max_tokens": TOOL_MAX_TOKENS,
        "messages": [{"role": "user", "content": STRUCTURED_PROMPT}],
        "output_config": {"format": {"type": "json_schema", "schema": schema}},
    }
    return message_body(target, **{**body, **changes})


def tool_uses(message: Any, *, where: str = "the Message") -> list[dict[str, Any]]:
    """The tool_use blocks of a Message (blocks of another or no shape are not tool calls)."""
    content = read(message, "content", list, where=where)
    return [block for block in content if isinstance(block, dict) and block.get("type") == "tool_use"]


def text_blocks(message: Any, *, where: str = "the Message") -> list[str]:
    """The text of each text block of a Message (a text block without string text reads as '')."""
    content = read(message, "content", list, where=where)
    return [
        block["text"] if isinstance(block.get("text"), str) else ""
        for block in content
        if isinstance(block, dict) and block.get("type") == "text"
    ]


def tool_result_turns(calls: list[dict[str, Any]], result: Any = "recorded", **extra: Any) -> dict[str, Any]:
    """The user turn answering each of `calls` (tool_use blocks) with a tool_result."""
    return {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": call.get("id"), "content": result, **extra}
            for call in calls
        ],
    }


def schema_errors(schema: dict[str, Any], instance: Any) -> list[str]:
    """Why `instance` is not valid against `schema` (draft 2020-12), each with its path."""
    errors = sorted(Draft202012Validator(schema).iter_errors(instance), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path)) or '$'}: {e.message}" for e in errors]


def expect_valid_instance(schema: dict[str, Any], instance: Any, what: str, *, reason: str) -> None:
    errors = schema_errors(schema, instance)
    if errors:
        raise ConformanceFailure(
            f"{what} valid against its schema {json.dumps(schema)[:300]}",
            f"{json.dumps(instance)[:300]}: " + "; ".join(errors[:4]),
            reason=reason,
        )


def parse_json_text(text: str, what: str, *, stop: str | None) -> Any:
    """`text` parsed as one JSON value; anything else (prose, a fence, a cut answer) fails."""
    try:
        return json.loads(text)
    except ValueError as error:
        cut = f" (stop_reason {stop})" if stop else ""
        raise ConformanceFailure(
            f"{what}: one JSON value and nothing else", f"{error}{cut}: {text[:300]!r}", reason="not-json"
        ) from None


@dataclass(slots=True)
class StreamedToolCall:
    """One tool_use block of a stream: its content_block_start block and its fragments."""

    index: int
    start: dict[str, Any]
    fragments: list[str] = field(default_factory=list)

    @property
    def joined(self) -> str:
        return "".join(self.fragments)


def streamed_tool_calls(run: StreamRun, kind: str = "tool_use") -> list[StreamedToolCall]:
    """The tool_use (or `kind`: server_tool_use) blocks of a raw stream, in start order, with
    their input_json_delta fragments (events of another or no shape are the grammar's and the
    schemas' to judge)."""
    calls: dict[int, StreamedToolCall] = {}
    for event in run.events:
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            continue
        if event.get("type") == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, dict) and block.get("type") == kind:
                calls[index] = StreamedToolCall(index, block)
        elif event.get("type") == "content_block_delta" and index in calls:
            delta = event.get("delta")
            if isinstance(delta, dict) and delta.get("type") == "input_json_delta":
                fragment = delta.get("partial_json")
                if isinstance(fragment, str):
                    calls[index].fragments.append(fragment)
    return list(calls.values())


def streamed_text_blocks(run: StreamRun) -> list[str]:
    """The text of each streamed text block (its text_deltas joined), in start order."""
    texts: dict[int, list[str]] = {}
    for event in run.events:
        index = event.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            continue
        if event.get("type") == "content_block_start":
            block = event.get("content_block")
            if isinstance(block, dict) and block.get("type") == "text":
                texts[index] = [block["text"]] if isinstance(block.get("text"), str) else []
        elif event.get("type") == "content_block_delta" and index in texts:
            delta = event.get("delta")
            if (
                isinstance(delta, dict)
                and delta.get("type") == "text_delta"
                and isinstance(delta.get("text"), str)
            ):
                texts[index].append(delta["text"])
    return ["".join(parts) for parts in texts.values()]


# ---- Anthropic's own tools: server tools (tool search, web fetch) and Anthropic-defined
# client tools (bash, text editor), each forced with tool_choice as above.

REGEX_SEARCH: dict[str, Any] = {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}
WEB_FETCH: dict[str, Any] = {"type": "web_fetch_20250910", "name": "web_fetch", "max_uses": 1}
WEB_SEARCH: dict[str, Any] = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 1,
    "user_location": {
        "type": "approximate",
        "city": "Brest",
        "region": "Brittany",
        "country": "FR",
        "timezone": "Europe/Paris",
    },
}
BASH: dict[str, Any] = {"type": "bash_20250124", "name": "bash"}
# Computer use (beta computer-use-2025-01-24) on a small display; its actions as the docs list them.
COMPUTER: dict[str, Any] = {
    "type": "computer_20250124",
    "name": "computer",
    "display_width_px": 1024,
    "display_height_px": 768,
}
COMPUTER_ACTIONS = frozenset(
    {
        "screenshot", "left_click", "type", "key", "mouse_move", "cursor_position", "scroll",
        "left_click_drag", "right_click", "middle_click", "double_click", "triple_click",
        "left_mouse_down", "left_mouse_up", "hold_key", "wait",
    }
)  # fmt: skip
EDITOR: dict[str, Any] = {
    "type": "text_editor_20250728",
    "name": "str_replace_based_edit_tool",
    "max_characters": 10000,
}
# Found only by a search: the prompt does not list it (defer_loading).
DEFERRED_TOOL: dict[str, Any] = {
    "name": "get_tide",
    "description": "The height of the tide at a harbour.",
    "input_schema": {
        "type": "object",
        "properties": {"harbour": {"type": "string", "enum": ["brest", "dover"]}},
        "required": ["harbour"],
        "additionalProperties": False,
    },
    "defer_loading": True,
}
SEARCH_PROMPT = "Find a tool that tells the tide, then use it for Brest."
FETCH_PROMPT = "Fetch a web page with the web_fetch tool and summarise it."
# The documented error codes of web fetch results (SDK web_fetch_tool_result_error_code.py).
WEB_FETCH_ERROR_CODES = frozenset(
    {
        "invalid_tool_input",
        "url_too_long",
        "url_not_allowed",
        "url_not_in_prior_context",
        "url_not_accessible",
        "unsupported_content_type",
        "too_many_requests",
        "max_uses_exceeded",
        "unavailable",
    }
)
SERVER_TOOL_ID = r"^srvtoolu_[a-zA-Z0-9_]+$"  # the schema's pattern (ServerToolUseBlock.id)


def forced_tool(name: str) -> dict[str, Any]:
    return {"type": "tool", "name": name, "disable_parallel_tool_use": True}


def search_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A forced regex tool search over one deferred tool and one loaded one."""
    return tool_body(
        target,
        tools=[REGEX_SEARCH, DEFERRED_TOOL, SHAPE_TOOL],
        tool_choice=forced_tool("tool_search_tool_regex"),
        prompt=SEARCH_PROMPT,
        **changes,
    )


def fetch_body(
    target: Target, prompt: str = FETCH_PROMPT, tools: list[dict[str, Any]] | None = None, **changes: Any
) -> dict[str, Any]:
    """A forced web fetch (default tool: WEB_FETCH, at most one use)."""
    offered = tools or [WEB_FETCH]
    return tool_body(target, tools=offered, tool_choice=forced_tool("web_fetch"), prompt=prompt, **changes)


WEB_SEARCH_ERROR_CODES = frozenset(
    {
        "invalid_tool_input",
        "unavailable",
        "max_uses_exceeded",
        "too_many_requests",
        "query_too_long",
        "request_too_large",
    }
)


def web_search_body(target: Target, **changes: Any) -> dict[str, Any]:
    """A forced web search (at most one use, a user location)."""
    choice = forced_tool("web_search")
    return tool_body(
        target, tools=[WEB_SEARCH], tool_choice=choice, prompt="Search the web: tides at Brest.", **changes
    )


def blocks_of(message: Any, kind: str, *, where: str = "the Message") -> list[dict[str, Any]]:
    """The content blocks of one `type`."""
    content = read(message, "content", list, where=where)
    return [block for block in content if isinstance(block, dict) and block.get("type") == kind]
