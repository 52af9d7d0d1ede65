"""The server-tool loop: one turn, several generations.

The model writes a call of a server tool like any call; the loop turns it into a
`server_tool_use` block (a `srvtoolu_` id), runs the tool, answers with the result block, and
once the generation ends on its calls feeds the calls and results back into the prompt and
generates again, in the same turn and the same response. It stops when the model ends without
calling a server tool, when it calls a client tool (the client must answer: `tool_use`), when
the turn's `max_tokens` is spent, or after `max_iterations` generations, with `pause_turn`:
the client sends the turn back as it is and the next request goes on from there.

A forced `tool_choice` holds the first generation only; later ones are `auto` over every tool
callable by then (deferred tools included once a tool search has found them). Thinking, when
on, happens in the first generation only.
"""

from __future__ import annotations

import json
import secrets
from collections import Counter
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol

from reference_server.citations import QuoteText
from reference_server.code_execution import OFF, CodeExecutor, Container, Paused
from reference_server.content import RenderedDocument
from reference_server.engine.base import Generation, Grammar, ToolCall, Turn
from reference_server.errors import InvalidRequestError, OverloadedError
from reference_server.ids import new_mcp_tool_use_id, new_server_tool_use_id
from reference_server.pieces import Outcome, Piece
from reference_server.prepared import PreparedMessage
from reference_server.protocol import ServerToolResultBlock
from reference_server.thinking import ThinkingSigner
from reference_server.tools.calls import ArgsPiece, CallEnd, CallStart
from reference_server.tools.definitions import ToolDefinition, ToolPolicy
from reference_server.tools.grammar import response_grammar

from .citing import citable_fetch, cited_generation
from .definitions import (
    CODE_EXECUTION_TYPES,
    STATEFUL_CODE_TYPES,
    CodeExecutionConfig,
    McpToolConfig,
    ToolSearchConfig,
    WebFetchConfig,
    WebSearchConfig,
)
from .fetch import FetchFailed, FetchPolicy, WebFetcher
from .mcp import McpConnector
from .pieces import ProgrammaticCall, ServerCallStart, ServerResult
from .plan import ServerToolPlan
from .results import (
    fetch_error,
    fetch_result,
    found_tools,
    result_text,
    search_error,
    search_result,
    web_search_error,
    web_search_result,
)
from .search import Searchable, SearchError, search_tools
from .search_index import WebSearchIndex

__all__ = [
    "DEFAULT_MAX_ITERATIONS",
    "ServerToolRuntime",
    "TurnHost",
    "TurnState",
    "next_generation",
    "paused_calls",
    "server_tool_turn",
]

DEFAULT_MAX_ITERATIONS = 10  # generations in one turn before `pause_turn`, as the API's loop
MAX_QUERY_CHARS = 500  # a longer web search query is `query_too_long`
SERVER_RUN_IDS = ("srvtoolu_", "mcptoolu_")  # results of tools the server ran
_SEARCH_SEAL = "web_search"  # the associated data of sealed results: never a model id


class TurnHost(Protocol):
    """What the loop needs of the service (serving.py)."""

    def run(self, prepared: PreparedMessage, deltas: Generation) -> AsyncIterator[Piece]: ...

    async def start(self, prepared: PreparedMessage) -> Generation: ...

    async def continued(
        self, prepared: PreparedMessage, turns: tuple[Turn, ...], max_tokens: int
    ) -> PreparedMessage: ...


@dataclass(slots=True)
class _Call:
    id: str
    name: str
    parts: list[str] = field(default_factory=list)

    def input(self) -> dict[str, Any]:
        try:
            value = json.loads("".join(self.parts))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class UrlSource:
    """Text a URL may come from: the user's, or a tool's result (client or server tool)."""

    kind: Literal["user", "client", "server"]
    tool: str | None
    text: str

    def allowed(self, config: WebFetchConfig) -> bool:
        if self.kind == "user":
            return config.user_input
        rule = config.client_results if self.kind == "client" else config.server_results
        return rule.allows(self.tool)


@dataclass(slots=True)
class TurnState:
    """What a turn's server tools have done so far."""

    sources: list[UrlSource]  # where a URL must already appear to be fetched
    loaded: set[str]
    uses: Counter[str] = field(default_factory=Counter)
    cited: list[RenderedDocument] = field(default_factory=list)  # pages fetched to cite, in order
    fresh: bool = False  # a page to cite was fetched since the last generation began
    container: Container | None = None  # code execution's, once named or made

    def ended(self, outcome: Outcome) -> Outcome:
        """The turn's Outcome with its container (the response's `container`)."""
        return replace(outcome, container=self.container.response() if self.container else None)

    @classmethod
    def of(
        cls, turns: Sequence[Turn], loaded: frozenset[str], container: Container | None = None
    ) -> TurnState:
        """The state at the start of a turn: the conversation's user text and tool results
        (the assistant's own text is no source of URLs)."""
        sources = [
            UrlSource("user", None, turn.text)
            if turn.role in ("user", "system")
            else UrlSource(
                "server" if (turn.tool_call_id or "").startswith("srvtoolu_") else "client",
                turn.name,
                turn.text,
            )
            for turn in turns
            if turn.role in ("user", "system", "tool")
        ]
        return cls(sources, set(loaded), container=container)

    def mentions(self, url: str, config: WebFetchConfig) -> bool:
        return any(
            (url in source.text or url.rstrip("/") in source.text) and source.allowed(config)
            for source in self.sources
        )


class ServerToolRuntime:
    """Runs server tools for the service: the operator's fetch policy and the iteration limit."""

    def __init__(
        self,
        fetch: FetchPolicy | None = None,
        max_iterations: int = DEFAULT_MAX_ITERATIONS,
        fetcher: WebFetcher | None = None,
        search_index: WebSearchIndex | None = None,
        signer: ThinkingSigner | None = None,
        mcp: FetchPolicy | None = None,
        code: CodeExecutor | None = None,
        code_refusal: str = OFF,
    ) -> None:
        """`fetch` and `mcp`: which addresses web fetch and the MCP connector may reach (by
        default public ones only); `code`: code execution's sandbox and containers (None: the
        tool is refused, `code_refusal` says why)."""
        self.code = code
        self.code_refusal = code_refusal
        self.fetcher = fetcher or WebFetcher(fetch or FetchPolicy())
        self.max_iterations = max_iterations
        self.search_index = search_index
        self.mcp = McpConnector(WebFetcher(mcp or FetchPolicy()))
        # Seals web search results' encrypted_content (a fresh key when none is given: results
        # then verify only within this process).
        self._signer = signer or ThinkingSigner(secrets.token_bytes(32))

    def seal_result(self, text: str) -> str:
        return self._signer.seal(_SEARCH_SEAL, text, "web_search")

    def open_result(self, encrypted: str) -> str | None:
        sealed = self._signer.open(_SEARCH_SEAL, encrypted)
        return sealed.thinking if sealed is not None and sealed.kind == "web_search" else None

    async def execute(
        self, call: ToolCall, tool: ToolDefinition, plan: ServerToolPlan, state: TurnState
    ) -> ServerToolResultBlock | Paused:
        """Run one server call; `Paused`: its Python called client tools (the turn ends on them)."""
        arguments = call.arguments
        config = tool.server
        state.uses[call.name] += 1
        if isinstance(config, ToolSearchConfig):
            query = arguments.get("query")
            if not isinstance(query, str):
                return search_error(call.id, "the input needs a string `query`")
            deferred = [Searchable(t.name, t.description, t.input_schema) for t in plan.tools if t.deferred]
            try:
                names = search_tools(config.kind, query, deferred)
            except SearchError as exc:
                return search_error(call.id, str(exc))
            state.loaded.update(names)
            return search_result(call.id, names)
        if isinstance(config, WebSearchConfig):
            return self._web_search(call, config, state)
        if isinstance(config, McpToolConfig):
            return await self.mcp.call(config, call.id, call.name, dict(arguments))
        if isinstance(config, CodeExecutionConfig):
            assert self.code is not None  # refused in prepare without it
            if state.container is None:
                state.container = await self.code.container(None, plan.workspace)
            stateful = config.version in STATEFUL_CODE_TYPES
            tools = [spec.name for spec in config.callable]
            ran = await self.code.execute(
                call.id, call.name, arguments, state.container, stateful=stateful, tools=tools
            )
            if isinstance(ran, Paused):
                state.uses[call.name] -= 1  # counted once, in the response its result is in
            return ran
        assert isinstance(config, WebFetchConfig)
        url = arguments.get("url")
        if not isinstance(url, str):
            return fetch_error(call.id, "invalid_tool_input")
        if config.max_uses is not None and state.uses[call.name] > config.max_uses:
            return fetch_error(call.id, "max_uses_exceeded")
        if not state.mentions(url, config):
            return fetch_error(call.id, "url_not_in_prior_context")
        indexed = self.search_index.fetched(url, config) if self.search_index and config.use_cache else None
        try:
            fetched = indexed or await self.fetcher.fetch(url, config)
        except FetchFailed as exc:
            return fetch_error(call.id, exc.code)
        if fetched.media_type == "text/plain":
            state.sources.append(
                UrlSource("server", "web_fetch", fetched.data)
            )  # its links may be fetched next
        return fetch_result(call.id, fetched, citable=config.citations)

    def read(
        self, block: ServerToolResultBlock, plan: ServerToolPlan, state: TurnState, path: str
    ) -> tuple[str, bool]:
        """What the model reads of a result the server produced in this turn, and whether it is
        an error; a page fetched to cite is numbered and kept in `state.cited`."""
        document = citable_fetch(block, plan.documents + len(state.cited), path)
        if document is not None:
            state.cited.append(document)
            state.fresh = True
            return document.text, False
        return result_text(block, {t.name: t for t in plan.tools}, path, self.open_result)

    def _web_search(self, call: ToolCall, config: WebSearchConfig, state: TurnState) -> ServerToolResultBlock:
        query = call.arguments.get("query")
        if self.search_index is None:
            return web_search_error(call.id, "unavailable")
        if not isinstance(query, str) or not query.strip():
            return web_search_error(call.id, "invalid_tool_input")
        if len(query) > MAX_QUERY_CHARS:
            return web_search_error(call.id, "query_too_long")
        if config.max_uses is not None and state.uses[call.name] > config.max_uses:
            return web_search_error(call.id, "max_uses_exceeded")
        hits = self.search_index.search(
            query, allowed=config.allowed_domains, blocked=config.blocked_domains, near=config.near
        )
        found = "".join(f"\n{hit.url}\n{hit.text}" for hit in hits)
        state.sources.append(UrlSource("server", "web_search", found))  # results' URLs may be fetched
        return web_search_result(call.id, hits, self.seal_result)


def continuation_grammar(plan: ServerToolPlan, loaded: set[str]) -> Grammar | None:
    return response_grammar(
        ToolPolicy("auto", plan.callable(loaded), plan.parallel), plan.output_schema, plan.special
    )


def next_generation(prepared: PreparedMessage, plan: ServerToolPlan, state: TurnState) -> PreparedMessage:
    """The turn's next generation as `continued` prepared it; right after a page fetched to
    cite, one that quotes this turn's fetched pages (server_tools/citing.py)."""
    if not state.fresh:
        return prepared
    state.fresh = False
    return cited_generation(prepared, state.cited, plan.callable(state.loaded), plan.parallel, plan.special)


_CODE_TOOLS = frozenset(name for names in CODE_EXECUTION_TYPES.values() for name in names)


def server_tool_counts(uses: Counter[str]) -> dict[str, int]:
    """`usage.server_tool_use`: requests made per tool, under the documented counters (code
    execution's, as the docs show it, once it ran: SDK 2.17 types only the first two)."""
    counts = {"web_search_requests": uses["web_search"], "web_fetch_requests": uses["web_fetch"]}
    code = sum(uses[name] for name in _CODE_TOOLS)
    return counts | {"code_execution_requests": code} if code else counts


async def server_tool_turn(
    host: TurnHost,
    runtime: ServerToolRuntime,
    prepared: PreparedMessage,
    generation: Generation,
    plan: ServerToolPlan,
) -> AsyncIterator[Piece]:
    """`host.run`'s pieces over every generation of the turn, server calls and their results
    among them, then one Outcome for the whole turn."""
    turns = list(prepared.request.turns)
    state = TurnState.of(turns, plan.loaded, plan.container)
    for name, block in plan.resumed:  # a call the client sent back unanswered, run in prepare
        state.uses[name] += 1
        runtime.read(block, plan, state, "server_tool_result")  # numbers a page fetched to cite
        state.fresh = False  # the generation prepare made after it quotes it already
        yield ServerResult(block)
    if plan.paused:  # prepare ran code that called client tools again: no generation
        for called in plan.paused:
            yield called
        yield state.ended(Outcome("tool_use", None, 0, server_tool_counts(state.uses)))
        return
    output_tokens = 0
    current, deltas = prepared, generation
    for iteration in range(1, runtime.max_iterations + 1):
        text: list[str] = []
        executed: list[tuple[_Call, ServerToolResultBlock]] = []
        call: _Call | None = None
        client_calls = 0
        outcome: Outcome | None = None
        paused = False
        async for piece in host.run(current, deltas):
            if isinstance(piece, Outcome):
                outcome = piece
                continue
            if paused:  # the turn ends on the calls the code made: the rest is not shown
                continue
            if isinstance(piece, CallStart):
                tool = plan.tool(piece.name)
                if tool is not None and isinstance(tool.server, McpToolConfig):
                    call = _Call(new_mcp_tool_use_id(), piece.name)
                    yield ServerCallStart(call.id, call.name, tool.server.server_name)
                    continue
                if tool is not None and tool.server is not None:
                    call = _Call(new_server_tool_use_id(), piece.name)
                    yield ServerCallStart(call.id, call.name)
                    continue
                call, client_calls = None, client_calls + 1
            elif isinstance(piece, ArgsPiece) and call is not None:
                call.parts.append(piece.json)
            elif isinstance(piece, CallEnd) and call is not None:
                yield piece
                if piece.complete:
                    tool = plan.tool(call.name)
                    assert tool is not None
                    ran = await runtime.execute(ToolCall(call.id, call.name, call.input()), tool, plan, state)
                    if isinstance(ran, Paused):
                        assert isinstance(tool.server, CodeExecutionConfig)
                        for called in paused_calls(ran, tool.server):
                            yield called
                        paused = True
                    else:
                        executed.append((call, ran))
                        yield ServerResult(ran)
                call = None
                continue
            elif isinstance(piece, str | QuoteText):
                text.append(piece if isinstance(piece, str) else piece.text)
            yield piece
        assert outcome is not None
        output_tokens += outcome.output_tokens
        counts = server_tool_counts(state.uses)
        if paused:
            yield state.ended(Outcome("tool_use", None, output_tokens, counts))
            return

        if outcome.stop_reason != "tool_use" or client_calls or not executed:
            yield state.ended(replace(outcome, output_tokens=output_tokens, server_tool_use=counts))
            return
        if iteration == runtime.max_iterations:
            break
        remaining = prepared.request.max_tokens - output_tokens
        if remaining <= 0:
            yield state.ended(Outcome("max_tokens", None, output_tokens, counts))
            return
        calls = tuple(ToolCall(c.id, c.name, c.input()) for c, _ in executed)
        turns.append(Turn("assistant", "".join(text), tool_calls=calls))
        for index, (c, block) in enumerate(executed):
            result, is_error = runtime.read(block, plan, state, f"server_tool_result.{index}")
            turns.append(Turn("tool", result, tool_call_id=c.id, name=c.name, is_error=is_error))
        grammar = continuation_grammar(plan, state.loaded)
        try:
            current = await host.continued(
                replace(prepared, request=replace(prepared.request, constraint=grammar)),
                tuple(turns),
                remaining,
            )
            current = next_generation(current, plan, state)
            deltas = await host.start(current)
        except InvalidRequestError:  # the results left no room in the context window
            yield state.ended(Outcome("model_context_window_exceeded", None, output_tokens, counts))
            return
        except OverloadedError:  # no room to go on now: the client resumes the turn later
            break
    yield state.ended(Outcome("pause_turn", None, output_tokens, server_tool_counts(state.uses)))


def paused_calls(paused: Paused, config: CodeExecutionConfig) -> tuple[ProgrammaticCall, ...]:
    """The tool_use blocks of the calls a paused Python call's code made."""
    return tuple(
        ProgrammaticCall(call.id, call.name, call.input, config.caller, paused.tool_use_id)
        for call in paused.calls
    )


def loaded_from_history(blocks: list[Mapping[str, Any]]) -> frozenset[str]:
    """Deferred tools found by tool searches in earlier turns."""
    return frozenset(name for block in blocks for name in found_tools(block))
