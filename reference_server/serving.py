"""Every Anthropic rule between the wire and the engine: model resolution, limits, tools and
tool_choice, structured outputs, stop sequences, stop_reason mapping, usage, and the assembly
of `Message` and stream events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from reference_server.assembly import events_of, message_of
from reference_server.catalog import ModelCatalog
from reference_server.citations import (
    CitationPlan,
    QuoteEnd,
    QuoteParser,
    QuoteStart,
    QuoteText,
    citation_grammar,
    plan_citations,
)
from reference_server.content import RenderedDocument
from reference_server.context_management import ClearToolUses, apply_tool_clearing, plan_context_edits
from reference_server.engine.base import (
    Engine,
    EngineRequest,
    FinishReason,
    Generation,
    ModelCard,
    Sampling,
    ToolSpec,
    Turn,
)
from reference_server.engine.errors import (
    EngineOverloadedError,
    PromptTooLongError,
    TokenizerError,
)
from reference_server.errors import InternalServerError, InvalidRequestError, OverloadedError
from reference_server.files.sources import has_file_sources, inline_file_sources
from reference_server.files.store import FileStore
from reference_server.model_behaviour import ModelBehaviour, check_model_behaviour
from reference_server.observability.metrics import ServingMetrics
from reference_server.pieces import Outcome, Piece
from reference_server.prepared import PreparedMessage
from reference_server.protocol import (
    ClearThinkingEdit,
    ClearToolUsesEdit,
    ContextManagementResponse,
    CountContextManagement,
    Message,
    MessageCountTokensParams,
    MessageCreateParams,
    MessageTokensCount,
    PromptParams,
    RawMessageStreamEvent,
    RedactedThinkingBlock,
    StopReason,
    ThinkingBlock,
)
from reference_server.server_tools.definitions import (
    NO_SEARCH_PROVIDER,
    WebFetchConfig,
    WebSearchConfig,
    check_container,
)
from reference_server.server_tools.history import loaded_tools, pending_call
from reference_server.server_tools.loop import (
    ServerToolRuntime,
    TurnState,
    next_generation,
    server_tool_turn,
)
from reference_server.server_tools.plan import ServerToolPlan
from reference_server.stops import StopMatcher
from reference_server.thinking import (
    ThinkingEnd,
    ThinkingPlan,
    ThinkingSigner,
    ThinkingSplitter,
    ThinkingText,
    kept_thinking,
    plan_thinking,
    shape_turns,
    thinking_grammar,
)
from reference_server.tools.calls import ArgsPiece, CallEnd, CallParser, CallStart, TextPiece
from reference_server.tools.definitions import (
    ToolDefinition,
    ToolPolicy,
    check_unique,
    parse_tools,
    tool_policy,
)
from reference_server.tools.enforceable import check_enforceable
from reference_server.tools.grammar import response_grammar
from reference_server.validation import (
    build_turns,
    check_cache_breakpoints,
    check_stop_sequences,
)
from reference_server.versioning import api_version, check_version_rules

__all__ = [
    "ContextWindowExceeded",
    "MessagesService",
]

P = TypeVar("P", bound=PromptParams)


class ContextWindowExceeded(InvalidRequestError):
    """The prompt leaves no room for a generated token (its own class so that every dialect
    can word it)."""

    def __init__(self, prompt_tokens: int, context_window: int) -> None:
        super().__init__(f"prompt is too long: {prompt_tokens} tokens > {context_window - 1} maximum")
        self.prompt_tokens = prompt_tokens
        self.context_window = context_window


@dataclass(frozen=True, slots=True)
class _Prompt:
    """What create and count_tokens share: the prompt as the engine reads it."""

    card: ModelCard
    turns: tuple[Turn, ...]
    tools: tuple[ToolDefinition, ...]
    policy: ToolPolicy
    thinking: ThinkingPlan | None
    cleared: _Cleared | None = None  # a clear_thinking edit was asked for
    managed: bool = False  # context management edits were asked for (the response reports them)
    tool_edit: ClearToolUses | None = None  # a clear_tool_uses edit was asked for
    loaded: frozenset[str] = frozenset()  # deferred tools found by earlier tool searches
    documents: tuple[RenderedDocument, ...] = ()  # the request's documents, in document_index order


@dataclass(frozen=True, slots=True)
class _Cleared:
    """What clear_thinking cleared: turns, and the prompt as it would have been (None: nothing)."""

    thinking_turns: int
    turns: tuple[Turn, ...] | None


class MessagesService:
    """The Messages API on top of an engine; routes call nothing else."""

    def __init__(
        self,
        engine: Engine,
        catalog: ModelCatalog,
        signer: ThinkingSigner,
        server_tools: ServerToolRuntime | None = None,
        files: FileStore | None = None,
        *,
        metrics: ServingMetrics | None = None,
        behaviour: ModelBehaviour = "classic",
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.signer = signer
        self.server_tools = server_tools or ServerToolRuntime()
        self.files = files  # the Files API's store: file sources are read from it
        self.metrics = metrics  # every admitted generation is measured (/metrics)
        self.behaviour = behaviour  # what the served model accepts (model_behaviour.py)

    async def _inlined(self, params: P) -> P:
        """`params` with file sources replaced by the files' content (files/sources.py)."""
        if not has_file_sources(params):
            return params
        return await asyncio.to_thread(inline_file_sources, params, self.files)

    def _prompt(
        self, params: PromptParams, betas: Collection[str], offered: tuple[ToolDefinition, ...] = ()
    ) -> _Prompt:
        """Model, rules and turns, the same for create and count_tokens (so counts agree)."""
        card = self.catalog.resolve(params.model)
        if isinstance(params, MessageCreateParams) and params.max_tokens > card.max_output_tokens:
            raise InvalidRequestError(
                f"max_tokens: {params.max_tokens} > {card.max_output_tokens}, which is the"
                f" maximum allowed number of output tokens for {params.model}"
            )
        tools, policy, loaded = _tools_of(params, offered)
        if self.server_tools.search_index is None:
            for index, tool in enumerate(tools):
                if isinstance(tool.server, WebSearchConfig):
                    raise InvalidRequestError(
                        f"tools.{index}: tool type web_search is not served: {NO_SEARCH_PROVIDER}"
                    )
        check_cache_breakpoints(params)
        thinking = plan_thinking(params, betas)
        edits = plan_context_edits(params, betas)
        keep = edits.keep_thinking if edits is not None else None
        history = kept_thinking(
            params.messages, self.signer, card.id, enabled=thinking is not None, keep=keep
        )
        by_name = {tool.name: tool for tool in tools}
        opener = self.server_tools.open_result
        documents: list[RenderedDocument] = []
        turns = build_turns(
            params,
            tools=by_name,
            thinking=history.kept,
            vision=card.vision,
            opener=opener,
            documents=documents,
        )
        uncleared: tuple[Turn, ...] | None = None
        if history.cleared_turns:  # what the prompt would have been, to count what was cleared
            uncleared = build_turns(
                params, tools=by_name, thinking=history.verified, vision=card.vision, opener=opener
            )
        if thinking is not None:
            turns = shape_turns(turns)
            uncleared = shape_turns(uncleared) if uncleared is not None else None
        cleared = None if edits is None or keep is None else _Cleared(history.cleared_turns, uncleared)
        tool_edit = edits.tool_uses if edits is not None else None
        return _Prompt(
            card,
            turns,
            tools,
            policy,
            thinking,
            cleared,
            edits is not None,
            tool_edit,
            loaded,
            tuple(documents),
        )

    async def _managed_prompt(
        self, params: PromptParams, betas: Collection[str]
    ) -> tuple[_Prompt, ClearToolUsesEdit | None]:
        """The prompt after every context management edit (context_management.py), and what
        clear_tool_uses cleared (None: it was not asked for, or did not apply)."""
        offered = await self._mcp_tools(params, betas)
        prompt = self._prompt(params, betas, offered)
        if prompt.tool_edit is None:
            return prompt, None
        return await apply_tool_clearing(
            params.messages,
            prompt.tool_edit,
            prompt,
            lambda messages: self._prompt(params.model_copy(update={"messages": messages}), betas, offered),
            self._prompt_tokens,
        )

    async def _mcp_tools(self, params: PromptParams, betas: Collection[str]) -> tuple[ToolDefinition, ...]:
        """The tools of the MCP servers the request lists (server_tools/mcp.py), listed now."""
        if not params.mcp_servers and not any(t.get("type") == "mcp_toolset" for t in params.tools or ()):
            return ()
        offered = await self.server_tools.mcp.offered(params.mcp_servers, params.tools, betas)
        return tuple(
            ToolDefinition(
                tool.name, tool.description, tool.input_schema, False, tool.config.deferred, tool.config
            )
            for tool in offered
        )

    async def _prompt_tokens(self, prompt: _Prompt, turns: tuple[Turn, ...] | None = None) -> int:
        """`prompt`'s input tokens (or those of other `turns` with its tools), even past the
        window: what an edit clears is measured before the window is checked."""
        request = EngineRequest(
            prompt.card.id, prompt.turns if turns is None else turns, 0, tools=_rendered(prompt.tools)
        )
        try:
            return await self.engine.count_tokens(request)
        except PromptTooLongError as exc:
            return exc.prompt_tokens
        except TokenizerError as exc:
            raise InvalidRequestError(f"messages: {exc}") from None

    async def _applied_edits(
        self, prompt: _Prompt, input_tokens: int, tool_uses: ClearToolUsesEdit | None
    ) -> ContextManagementResponse | None:
        """`context_management` of the response: what each applied edit took out of the prompt."""
        if not prompt.managed:
            return None
        applied: list[ClearThinkingEdit | ClearToolUsesEdit] = []
        if (cleared := prompt.cleared) is not None:
            tokens = 0
            if cleared.turns is not None:
                tokens = max(0, await self._prompt_tokens(prompt, cleared.turns) - input_tokens)
            applied.append(
                ClearThinkingEdit(cleared_input_tokens=tokens, cleared_thinking_turns=cleared.thinking_turns)
            )
        if tool_uses is not None:
            applied.append(tool_uses)
        return ContextManagementResponse(applied_edits=applied)

    async def prepare(
        self, params: MessageCreateParams, betas: Collection[str] = (), version: str | None = None
    ) -> PreparedMessage:
        """Validate and tokenize a create request; `version` is its `anthropic-version` header
        (None: 2023-06-01's rules)."""
        check_version_rules(params, api_version(version))
        check_model_behaviour(params, self.behaviour)
        check_container(params.container)
        params = await self._inlined(params)
        prompt, tool_uses = await self._managed_prompt(params, betas)
        card, tools, policy = prompt.card, prompt.tools, prompt.policy
        stops = check_stop_sequences(params.stop_sequences)
        output_schema = _output_schema(params)
        citations = _citation_plan(prompt, output_schema)
        grammar = response_grammar(policy, output_schema)
        if grammar is not None:
            check_enforceable(grammar, tools, policy, output_schema)
        if citations is not None:
            grammar = citation_grammar(citations)
        if prompt.thinking is not None:
            grammar = thinking_grammar(grammar, prompt.thinking.budget)
        sampling = Sampling(
            temperature=1.0 if params.temperature is None else params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
        )
        prepared = await self.plan(
            card,
            EngineRequest(
                card.id, prompt.turns, params.max_tokens, sampling, tools=_rendered(tools), constraint=grammar
            ),
            requested_model=params.model,
            stop_sequences=stops,
            parse_calls=policy.may_call,
            thinking=prompt.thinking,
        )
        if citations is not None:
            prepared = replace(prepared, citations=citations)
        if policy.may_call and any(tool.server is not None for tool in tools):
            plan = ServerToolPlan(
                tools,
                prompt.loaded,
                policy.parallel,
                output_schema,
                card.context_window,
                documents=len(prompt.documents),
            )
            prepared = await self._resume_call(replace(prepared, server_tools=plan), params)
        edits = await self._applied_edits(prompt, prepared.input_tokens, tool_uses)
        return replace(prepared, context_management=edits) if edits is not None else prepared

    async def _resume_call(self, prepared: PreparedMessage, params: MessageCreateParams) -> PreparedMessage:
        """A turn sent back with an unanswered server_tool_use at its end: run the call now, and
        generate after its result (which the answer shows first)."""
        plan = prepared.server_tools
        call = pending_call(params.messages)
        if plan is None or call is None:
            return prepared
        tool = plan.tool(call.name)
        if tool is None or tool.server is None:
            raise InvalidRequestError(
                f"messages.{len(params.messages) - 1}: server_tool_use {call.name!r} names no server tool of"
                " this request's tools"
            )
        turns = prepared.request.turns
        state = TurnState.of(turns, plan.loaded)
        block = await self.server_tools.execute(call, tool, plan, state)
        result, is_error = self.server_tools.read(block, plan, state, "server_tool_result")
        turns += (Turn("tool", result, tool_call_id=call.id, name=call.name, is_error=is_error),)
        resumed = replace(prepared, server_tools=replace(plan, resumed=((call.name, block),)))
        return next_generation(await self.continued(resumed, turns, prepared.request.max_tokens), plan, state)

    async def continued(
        self, prepared: PreparedMessage, turns: tuple[Turn, ...], max_tokens: int
    ) -> PreparedMessage:
        """The next generation of a server-tool turn (server_tools/loop.py): `turns` with the
        calls and results so far, at most `max_tokens`, no thinking."""
        request = replace(prepared.request, turns=turns, max_tokens=max_tokens)
        card = self.catalog.resolve(prepared.request.model)
        input_tokens = await self._count(request, card.context_window)
        budget = min(max_tokens, card.context_window - input_tokens)
        return replace(
            prepared,
            request=replace(request, max_tokens=budget),
            bounded_by_context=budget < max_tokens,
            thinking=None,
        )

    async def plan(
        self,
        card: ModelCard,
        request: EngineRequest,
        *,
        requested_model: str,
        stop_sequences: tuple[str, ...],
        parse_calls: bool,
        thinking: ThinkingPlan | None = None,
    ) -> PreparedMessage:
        """Count `request`'s prompt and bound its `max_tokens` (the caller's) by the context
        window: the common end of every dialect's preparation."""
        input_tokens = await self._count(request, card.context_window)
        budget = min(request.max_tokens, card.context_window - input_tokens)
        return PreparedMessage(
            request=replace(request, max_tokens=budget),
            requested_model=requested_model,
            input_tokens=input_tokens,
            stop_sequences=stop_sequences,
            bounded_by_context=budget < request.max_tokens,
            parse_calls=parse_calls,
            thinking=thinking,
        )

    async def count_tokens(
        self, params: MessageCountTokensParams, betas: Collection[str] = (), version: str | None = None
    ) -> MessageTokensCount:
        check_version_rules(params, api_version(version))
        params = await self._inlined(params)
        prompt, tool_uses = await self._managed_prompt(params, betas)
        request = EngineRequest(prompt.card.id, prompt.turns, 0, tools=_rendered(prompt.tools))
        tokens = await self._count(request, prompt.card.context_window)
        edits = await self._applied_edits(prompt, tokens, tool_uses)
        if edits is None:
            return MessageTokensCount(input_tokens=tokens)
        original = tokens + sum(edit.cleared_input_tokens for edit in edits.applied_edits)
        return MessageTokensCount(
            input_tokens=tokens, context_management=CountContextManagement(original_input_tokens=original)
        )

    async def _count(self, request: EngineRequest, context_window: int) -> int:
        """Prompt tokens; the prompt must leave room for at least one generated token."""
        try:
            tokens = await self.engine.count_tokens(request)
        except PromptTooLongError as exc:
            tokens = exc.prompt_tokens
        except TokenizerError as exc:  # e.g. a chat template refusing the conversation
            raise InvalidRequestError(f"messages: {exc}") from None
        if tokens >= context_window:
            raise ContextWindowExceeded(tokens, context_window)
        return tokens

    async def start(self, prepared: PreparedMessage) -> Generation:
        """Admit the generation (before any response byte, so refusals are plain HTTP errors):
        a full engine is a 529 `overloaded_error` with `retry-after`."""
        try:
            generation = await self.engine.start(prepared.request)
        except EngineOverloadedError as exc:
            raise OverloadedError("Overloaded", headers={"retry-after": str(exc.retry_after)}) from None
        return generation if self.metrics is None else self.metrics.metered(generation)

    async def run(self, prepared: PreparedMessage, deltas: Generation) -> AsyncIterator[Piece]:
        """Thinking pieces (with thinking on), text pieces (stop sequences cut out) and tool-call
        pieces, then one Outcome.

        Stop sequences apply to the answer's text only: never to thinking, and once a call starts,
        its JSON is never cut."""
        matcher = StopMatcher(prepared.stop_sequences)
        parser = CallParser() if prepared.parse_calls else None
        quotes = QuoteParser(prepared.citations) if prepared.citations is not None else None
        splitter = ThinkingSplitter() if prepared.thinking is not None else None
        output_tokens = 0
        finish: FinishReason | None = None
        calls = complete = 0
        try:
            async for delta in deltas:
                output_tokens = delta.output_tokens
                text = delta.text
                if splitter is not None:
                    thought, end, text = splitter.feed(text, output_tokens)
                    if thought:
                        yield ThinkingText(thought)
                    if delta.finish is not None and end is None:
                        end = splitter.flush(output_tokens)  # cut short by max_tokens
                    if end is not None:
                        yield end
                pieces = _pieces(text, parser, quotes, last=delta.finish is not None)
                for piece in pieces:
                    if isinstance(piece, QuoteStart):  # a quote is never cut by a stop sequence
                        if rest := matcher.flush():
                            yield rest
                        yield piece
                    elif isinstance(piece, QuoteText | QuoteEnd):
                        yield piece
                    elif isinstance(piece, TextPiece) and not calls:
                        scan = matcher.feed(piece.text)
                        if scan.text:
                            yield scan.text
                        if scan.matched is not None:
                            yield Outcome("stop_sequence", scan.matched, output_tokens)
                            return
                    elif isinstance(piece, CallStart | ArgsPiece | CallEnd):
                        if isinstance(piece, CallStart) and not calls and (rest := matcher.flush()):
                            yield rest
                        calls += isinstance(piece, CallStart)
                        complete += isinstance(piece, CallEnd) and piece.complete
                        yield piece
                if delta.finish is not None:
                    finish = delta.finish
                    break
        finally:
            # Stops the engine at once when we leave early (stop sequence, disconnect).
            await deltas.aclose()
        if finish is None:
            raise InternalServerError("The model stopped without a finish reason")
        if not calls and (rest := matcher.flush()):
            yield rest
        if finish == "stop" and calls and complete == calls:
            yield Outcome("tool_use", None, output_tokens)
        else:
            yield Outcome(self._stop_reason(finish, prepared), None, output_tokens)

    @staticmethod
    def _stop_reason(finish: FinishReason, prepared: PreparedMessage) -> StopReason:
        if finish == "stop":
            return "end_turn"
        return "model_context_window_exceeded" if prepared.bounded_by_context else "max_tokens"

    async def create(self, prepared: PreparedMessage, generation: Generation | None = None) -> Message:
        """The whole message; `generation` is the one `start` admitted (else started here)."""
        generation = generation or await self.start(prepared)
        seal = partial(self._thinking_block, prepared)
        return await message_of(prepared, generation, self._turn(prepared, generation), seal)

    def _turn(self, prepared: PreparedMessage, generation: Generation) -> AsyncIterator[Piece]:
        """The turn's pieces: one generation's, or every generation's of a server-tool loop."""
        if prepared.server_tools is None:
            return self.run(prepared, generation)
        return server_tool_turn(self, self.server_tools, prepared, generation, prepared.server_tools)

    def _thinking_block(
        self, prepared: PreparedMessage, ended: ThinkingEnd
    ) -> ThinkingBlock | RedactedThinkingBlock:
        """The finished thinking block: its text (none when `omitted`) and its signature; for the
        documented test string, a redacted_thinking block sealing the same text."""
        assert prepared.thinking is not None
        omitted = prepared.thinking.display == "omitted"
        signature = self.signer.seal(
            prepared.request.model, ended.thinking, "omitted" if omitted else "summarized"
        )
        if prepared.thinking.redacted:
            return RedactedThinkingBlock(data=signature)
        return ThinkingBlock(thinking="" if omitted else ended.thinking, signature=signature)

    async def stream(
        self, prepared: PreparedMessage, generation: Generation | None = None
    ) -> AsyncIterator[RawMessageStreamEvent]:
        """The same message as `create`, as typed stream events in the documented order."""
        generation = generation or await self.start(prepared)
        seal = partial(self._thinking_block, prepared)
        async for event in events_of(prepared, generation, self._turn(prepared, generation), seal):
            yield event


def _pieces(
    text: str, calls: CallParser | None, quotes: QuoteParser | None, *, last: bool
) -> list[TextPiece | CallStart | ArgsPiece | CallEnd | QuoteStart | QuoteText | QuoteEnd]:
    """`text` parsed for calls, then its text for quotes (an answer quoting fetched pages may end
    with calls: server_tools/citing.py)."""
    pieces = [TextPiece(text)] if calls is None else [*calls.feed(text), *(calls.flush() if last else ())]
    if quotes is None:
        return list(pieces)
    out: list[TextPiece | CallStart | ArgsPiece | CallEnd | QuoteStart | QuoteText | QuoteEnd] = []
    for piece in pieces:
        if isinstance(piece, TextPiece):
            out += _quoted(quotes.feed(piece.text))
        else:  # a call: what the quote parser held was text
            out += [*_quoted(quotes.flush()), piece]
    if last:
        out += _quoted(quotes.flush())
    return out


def _quoted(
    parsed: list[str | QuoteStart | QuoteText | QuoteEnd],
) -> list[TextPiece | QuoteStart | QuoteText | QuoteEnd]:
    """The quote parser's pieces, its text as text pieces."""
    return [TextPiece(p) if isinstance(p, str) else p for p in parsed]


def _citation_plan(prompt: _Prompt, output_schema: Mapping[str, Any] | None) -> CitationPlan | None:
    """The citable documents of the request; the API refuses citations with structured outputs
    (on documents or on web fetch), and this server does not serve the request's own cited
    documents with tools the model may call (pages fetched to cite: server_tools/citing.py)."""
    plan = plan_citations(prompt.documents)
    if output_schema is not None and any(
        isinstance(tool.server, WebFetchConfig) and tool.server.citations for tool in prompt.tools
    ):
        raise InvalidRequestError(
            "output_config.format: structured outputs cannot be used with citations enabled on web fetch"
        )
    if plan is None:
        return None
    if output_schema is not None:
        raise InvalidRequestError(
            "output_config.format: structured outputs cannot be used with citations enabled on documents"
        )
    if prompt.policy.may_call:
        raise InvalidRequestError(
            "tools: citations with tools the model may call are not served by this server; send"
            ' tool_choice {"type": "none"} or the documents without citations'
        )
    return plan


def _tools_of(
    params: PromptParams, offered: tuple[ToolDefinition, ...] = ()
) -> tuple[tuple[ToolDefinition, ...], ToolPolicy, frozenset[str]]:
    """The tools (the request's, then its MCP servers'), the policy, and the deferred tools tool
    searches found earlier (callable now)."""
    tools = parse_tools(params.tools) + offered
    if offered:
        check_unique(tools)
    loaded = loaded_tools(params.messages)
    return tools, tool_policy(params, tools, loaded), loaded


def _rendered(tools: tuple[ToolDefinition, ...]) -> tuple[ToolSpec, ...]:
    """The tools the prompt lists: all but deferred ones (a tool search's result shows those)."""
    return tuple(tool.spec() for tool in tools if not tool.deferred)


def _output_schema(params: PromptParams) -> Mapping[str, Any] | None:
    config = params.output_config
    return config.format.schema_ if config is not None and config.format is not None else None
