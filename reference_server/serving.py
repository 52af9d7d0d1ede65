"""Every Anthropic rule between the wire and the engine, as one orchestrator: each feature's piece
of a turn lives beside the feature (files/, thinking/, context_management.py, tools/, citations/,
server_tools/prepare.py, stops.py, assembly.py) and `MessagesService` calls them phase by phase:
the prompt (create and count_tokens alike), the request's preparation, generation as pieces,
and the answer (`Message` or stream events).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from reference_server.assembly import events_of, message_of
from reference_server.catalog import ModelCatalog
from reference_server.citations import (
    CitationPlan,
    QuoteEnd,
    QuoteParser,
    QuoteStart,
    QuoteText,
    citation_grammar,
    citation_plan,
    quoted_pieces,
)
from reference_server.citations.parser import Quoted
from reference_server.code_execution.uploads import Upload, has_uploads, uploaded
from reference_server.content import RenderedDocument
from reference_server.context_management import (
    ClearedThinking,
    ClearToolUses,
    applied_edits,
    apply_tool_clearing,
    plan_context_edits,
    tokens_count,
)
from reference_server.engine.base import (
    Engine,
    EngineDelta,
    EngineRequest,
    FinishReason,
    Generation,
    Grammar,
    ModelCard,
    PromptUsage,
    Sampling,
    StartedGeneration,
    Turn,
)
from reference_server.engine.errors import (
    EngineOverloadedError,
    PromptTooLongError,
    TokenizerError,
)
from reference_server.errors import InternalServerError, InvalidRequestError, OverloadedError
from reference_server.files.sources import inlined
from reference_server.files.store import FileStore
from reference_server.model_behaviour import ModelBehaviour, check_model_behaviour
from reference_server.observability.metrics import ServingMetrics
from reference_server.pieces import Outcome, Piece
from reference_server.prepared import PreparedMessage
from reference_server.protocol import (
    ClearToolUsesEdit,
    ContainerParam,
    ContextManagementResponse,
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
from reference_server.server_tools.loop import ServerToolRuntime, server_tool_turn
from reference_server.server_tools.prepare import (
    check_served,
    mcp_tools,
    named_container,
    request_tools,
    resume_call,
    resume_programmatic,
    server_tool_plan,
    with_skills,
    with_uploads,
)
from reference_server.skills.loading import requested_skills, resolve_skills, with_skill_note
from reference_server.skills.store import SkillStore
from reference_server.stops import StopMatcher
from reference_server.thinking import (
    ThinkingEnd,
    ThinkingPlan,
    ThinkingSigner,
    ThinkingSplitter,
    kept_thinking,
    plan_thinking,
    shape_turns,
    thinking_grammar,
)
from reference_server.tools.calls import ArgsPiece, CallEnd, CallParser, CallStart, TextPiece
from reference_server.tools.calls import Piece as CallPiece
from reference_server.tools.definitions import ToolDefinition, ToolPolicy, prompt_tools
from reference_server.tools.enforceable import check_enforceable
from reference_server.tools.grammar import output_schema, response_grammar
from reference_server.validation import (
    build_turns,
    check_cache_breakpoints,
    check_stop_sequences,
)
from reference_server.versioning import api_version, check_version_rules
from reference_server.workspaces.keys import DEFAULT_WORKSPACE

__all__ = [
    "ContextWindowExceeded",
    "MessagesService",
]


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
    cleared: ClearedThinking | None = None  # a clear_thinking edit was asked for
    managed: bool = False  # context management edits were asked for (the response reports them)
    tool_edit: ClearToolUses | None = None  # a clear_tool_uses edit was asked for
    loaded: frozenset[str] = frozenset()  # deferred tools found by earlier tool searches
    documents: tuple[RenderedDocument, ...] = ()  # the request's documents, in document_index order


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
        skills: SkillStore | None = None,
        metrics: ServingMetrics | None = None,
        behaviour: ModelBehaviour = "classic",
    ) -> None:
        self.engine = engine
        self.catalog = catalog
        self.signer = signer
        self.server_tools = server_tools or ServerToolRuntime()
        self.files = files  # the Files API's store: file sources are read from it
        self.skills = skills  # the Skills API's store: container.skills are loaded from it
        self.metrics = metrics  # every admitted generation is measured (/metrics)
        self.behaviour = behaviour  # what the served model accepts (model_behaviour.py)

    # The prompt: create and count_tokens alike, so that counts agree.

    def _card(self, params: PromptParams) -> ModelCard:
        """The model the request names; a create request's max_tokens within its output limit."""
        card = self.catalog.resolve(params.model)
        if isinstance(params, MessageCreateParams) and params.max_tokens > card.max_output_tokens:
            raise InvalidRequestError(
                f"max_tokens: {params.max_tokens} > {card.max_output_tokens}, which is the"
                f" maximum allowed number of output tokens for {params.model}"
            )
        return card

    def _prompt(
        self, params: PromptParams, betas: Collection[str], offered: tuple[ToolDefinition, ...] = ()
    ) -> _Prompt:
        """Model, rules and turns; `offered`: the tools of the request's MCP servers."""
        card = self._card(params)
        tools, policy, loaded = request_tools(params, offered)
        check_served(self.server_tools, tools)
        if not card.vision and any(tool.images for tool in tools):
            raise InvalidRequestError(
                f"tools: computer use needs a model that reads images (its results are screenshots);"
                f" {params.model} is text-only"
            )
        check_cache_breakpoints(params)
        thinking = plan_thinking(params, betas)
        edits = plan_context_edits(params, betas)
        keep = edits.keep_thinking if edits is not None else None
        history = kept_thinking(
            params.messages, self.signer, card.id, enabled=thinking is not None, keep=keep
        )
        build = partial(
            build_turns,
            params,
            tools={tool.name: tool for tool in tools},
            vision=card.vision,
            opener=self.server_tools.open_result,
        )
        documents: list[RenderedDocument] = []
        turns = build(thinking=history.kept, documents=documents)
        # What the prompt would have been, to count what clear_thinking cleared.
        uncleared = build(thinking=history.verified) if history.cleared_turns else None
        if thinking is not None:
            turns = shape_turns(turns)
            uncleared = shape_turns(uncleared) if uncleared is not None else None
        cleared = None if edits is None or keep is None else ClearedThinking(history.cleared_turns, uncleared)
        tool_edit = edits.tool_uses if edits is not None else None
        managed = edits is not None
        return _Prompt(
            card, turns, tools, policy, thinking, cleared, managed, tool_edit, loaded, tuple(documents)
        )

    async def _managed_prompt(
        self, params: PromptParams, betas: Collection[str]
    ) -> tuple[_Prompt, ClearToolUsesEdit | None]:
        """The prompt after every context management edit (context_management.py), and what
        clear_tool_uses cleared (None: it was not asked for, or did not apply)."""
        offered = await mcp_tools(self.server_tools, params, betas)
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

    async def _prompt_tokens(self, prompt: _Prompt, turns: tuple[Turn, ...] | None = None) -> int:
        """`prompt`'s input tokens (or those of other `turns` with its tools), even past the
        window: what an edit clears is measured before the window is checked."""
        request = EngineRequest(
            prompt.card.id, prompt.turns if turns is None else turns, 0, tools=prompt_tools(prompt.tools)
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
        """`context_management` of the response (None: no edit was asked for)."""
        if not prompt.managed:
            return None
        count = partial(self._prompt_tokens, prompt)
        return await applied_edits(prompt.cleared, tool_uses, input_tokens, count)

    # The request: validated, tokenized, bounded, ready to generate.

    async def prepare(
        self,
        params: MessageCreateParams,
        betas: Collection[str] = (),
        version: str | None = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> PreparedMessage:
        """Validate and tokenize a create request; `version` is its `anthropic-version` header
        (None: 2023-06-01's rules); `workspace` the one whose files, skills and containers it
        may name (its key's)."""
        files = self.files.scoped(workspace) if self.files is not None else None
        check_version_rules(params, api_version(version))
        check_model_behaviour(params, self.behaviour)
        params = await inlined(params, files)
        skills_store = self.skills.scoped(workspace) if self.skills is not None else None
        skills = await asyncio.to_thread(resolve_skills, requested_skills(params.container), skills_store)
        params = with_skill_note(params, skills)
        uploads: tuple[Upload, ...] = ()
        if has_uploads(params):  # container_upload: text for the model, files for the container
            params, uploads = await asyncio.to_thread(uploaded, params, files)
        prompt, tool_uses = await self._managed_prompt(params, betas)
        card, tools, policy = prompt.card, prompt.tools, prompt.policy
        stops = check_stop_sequences(params.stop_sequences)
        schema = output_schema(params)
        citations = citation_plan(prompt.documents, tools, may_call=policy.may_call, output_schema=schema)
        grammar = _grammar(prompt, schema, citations)
        sampling = Sampling(
            temperature=1.0 if params.temperature is None else params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
        )
        prepared = await self.plan(
            card,
            EngineRequest(
                card.id,
                prompt.turns,
                params.max_tokens,
                sampling,
                tools=prompt_tools(tools),
                constraint=grammar,
                cache_scope=workspace,  # a workspace never reads another's prompt cache
            ),
            requested_model=params.model,
            stop_sequences=stops,
            parse_calls=policy.may_call,
            thinking=prompt.thinking,
        )
        if citations is not None:
            prepared = replace(prepared, citations=citations)
        documents = len(prompt.documents)
        plan = server_tool_plan(
            tools, prompt.loaded, policy, schema, card.context_window, documents, card.special_tags
        )
        if plan is not None:
            named = params.container
            container = named.id if isinstance(named, ContainerParam) else named
            plan = await named_container(self.server_tools, replace(plan, workspace=workspace), container)
        plan = await with_uploads(self.server_tools, plan, uploads, files)
        plan = await with_skills(self.server_tools, plan, skills)
        if plan is not None:
            prepared = replace(prepared, server_tools=plan)
            prepared = await resume_call(self, self.server_tools, prepared, params.messages)
        # (without a plan too: results for code's calls in a request that cannot run code are a 400)
        prepared = await resume_programmatic(self, self.server_tools, prepared, params.messages)
        edits = await self._applied_edits(prompt, prepared.input_tokens, tool_uses)
        return replace(prepared, context_management=edits) if edits is not None else prepared

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
        self,
        params: MessageCountTokensParams,
        betas: Collection[str] = (),
        version: str | None = None,
        workspace: str = DEFAULT_WORKSPACE,
    ) -> MessageTokensCount:
        check_version_rules(params, api_version(version))
        files = self.files.scoped(workspace) if self.files is not None else None
        params = await inlined(params, files)
        if has_uploads(params):  # counted as the text the model reads of them
            params, _ = await asyncio.to_thread(uploaded, params, files)
        prompt, tool_uses = await self._managed_prompt(params, betas)
        request = EngineRequest(prompt.card.id, prompt.turns, 0, tools=prompt_tools(prompt.tools))
        tokens = await self._count(request, prompt.card.context_window)
        return tokens_count(tokens, await self._applied_edits(prompt, tokens, tool_uses))

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
        a full engine is a 529 `overloaded_error` with `retry-after`. A turn that ends on calls
        code made (the plan's `paused`) generates nothing."""
        if prepared.server_tools is not None and prepared.server_tools.paused:
            return StartedGeneration(PromptUsage(0), _no_deltas())
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
        names = frozenset(tool.name for tool in prepared.request.tools)
        parser = CallParser(bare=names) if prepared.parse_calls else None
        quotes = QuoteParser(prepared.citations) if prepared.citations is not None else None
        splitter = ThinkingSplitter() if prepared.thinking is not None else None
        output_tokens = 0
        finish: FinishReason | None = None
        calls = complete = 0
        try:
            async for delta in deltas:
                output_tokens = delta.output_tokens
                text = delta.text
                if splitter is not None:  # thinking text, then its end once it ends
                    thinking, text = splitter.split(text, output_tokens, last=delta.finish is not None)
                    for thought in thinking:
                        yield thought
                for piece in _pieces(text, parser, quotes, last=delta.finish is not None):
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
        """The finished thinking block, signed (thinking/signatures.py)."""
        assert prepared.thinking is not None
        return self.signer.block(prepared.request.model, prepared.thinking, ended.thinking)

    async def stream(
        self, prepared: PreparedMessage, generation: Generation | None = None
    ) -> AsyncIterator[RawMessageStreamEvent]:
        """The same message as `create`, as typed stream events in the documented order."""
        generation = generation or await self.start(prepared)
        seal = partial(self._thinking_block, prepared)
        async for event in events_of(prepared, generation, self._turn(prepared, generation), seal):
            yield event


async def _no_deltas() -> AsyncIterator[EngineDelta]:
    return
    yield  # an async generator that yields nothing


def _grammar(
    prompt: _Prompt, schema: Mapping[str, Any] | None, citations: CitationPlan | None
) -> Grammar | None:
    """The answer's constraint: its tool calls and output format (enforceable, or a 400), or
    quotes of the cited documents; the thinking paragraph first when thinking is on."""
    grammar = response_grammar(prompt.policy, schema, prompt.card.special_tags)
    if grammar is not None:
        check_enforceable(grammar, prompt.tools, prompt.policy, schema)
    if citations is not None:
        grammar = citation_grammar(citations)
    if prompt.thinking is not None:
        grammar = thinking_grammar(grammar, prompt.thinking.budget)
    return grammar


def _pieces(text: str, calls: CallParser | None, quotes: QuoteParser | None, *, last: bool) -> list[Quoted]:
    """`text` parsed for calls, then its text for quotes (citations/parser.py)."""
    pieces: list[CallPiece] = (
        [TextPiece(text)] if calls is None else [*calls.feed(text), *(calls.flush() if last else ())]
    )
    return [*pieces] if quotes is None else quoted_pieces(pieces, quotes, last=last)
