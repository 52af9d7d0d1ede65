"""Every Anthropic rule between the wire and the engine: model resolution, limits, stop
sequences, stop_reason mapping, usage, and the assembly of `Message` and stream events.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

from reference_server.catalog import ModelCatalog
from reference_server.engine.base import Engine, EngineRequest, FinishReason, Sampling
from reference_server.engine.errors import PromptTooLongError, TokenizerError
from reference_server.errors import InternalServerError, InvalidRequestError
from reference_server.ids import new_message_id
from reference_server.protocol import (
    Message,
    MessageCountTokensParams,
    MessageCreateParams,
    MessageDelta,
    MessageDeltaUsage,
    MessageTokensCount,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RawMessageStreamEvent,
    StopReason,
    TextBlock,
    TextDelta,
    Usage,
)
from reference_server.stops import StopMatcher
from reference_server.validation import (
    build_turns,
    check_cache_breakpoints,
    check_stop_sequences,
    reject_unsupported,
)

__all__ = ["MessagesService", "Outcome", "PreparedMessage"]


@dataclass(frozen=True, slots=True)
class PreparedMessage:
    """A validated create request, tokenized and ready to generate."""

    request: EngineRequest
    requested_model: str
    input_tokens: int
    stop_sequences: tuple[str, ...]
    # True when the context window, not the caller's max_tokens, bounds generation.
    bounded_by_context: bool


@dataclass(frozen=True, slots=True)
class Outcome:
    stop_reason: StopReason
    stop_sequence: str | None
    output_tokens: int


class MessagesService:
    """The Messages API on top of an engine; routes call nothing else."""

    def __init__(self, engine: Engine, catalog: ModelCatalog) -> None:
        self.engine = engine
        self.catalog = catalog

    async def prepare(self, params: MessageCreateParams) -> PreparedMessage:
        card = self.catalog.resolve(params.model)
        if params.max_tokens > card.max_output_tokens:
            raise InvalidRequestError(
                f"max_tokens: {params.max_tokens} > {card.max_output_tokens}, which is the"
                f" maximum allowed number of output tokens for {params.model}"
            )
        reject_unsupported(params)
        check_cache_breakpoints(params)
        stops = check_stop_sequences(params.stop_sequences)
        turns = build_turns(params)
        sampling = Sampling(
            temperature=1.0 if params.temperature is None else params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
        )
        probe = EngineRequest(card.id, turns, params.max_tokens, sampling)
        input_tokens = await self._count(probe, card.context_window)
        room = card.context_window - input_tokens
        budget = min(params.max_tokens, room)
        return PreparedMessage(
            request=EngineRequest(card.id, turns, budget, sampling),
            requested_model=params.model,
            input_tokens=input_tokens,
            stop_sequences=stops,
            bounded_by_context=budget < params.max_tokens,
        )

    async def count_tokens(self, params: MessageCountTokensParams) -> MessageTokensCount:
        card = self.catalog.resolve(params.model)
        reject_unsupported(params)
        check_cache_breakpoints(params)
        request = EngineRequest(card.id, build_turns(params), 0)
        return MessageTokensCount(input_tokens=await self._count(request, card.context_window))

    async def _count(self, request: EngineRequest, context_window: int) -> int:
        """Prompt tokens; the prompt must leave room for at least one generated token."""
        try:
            tokens = await self.engine.count_tokens(request)
        except PromptTooLongError as exc:
            tokens = exc.prompt_tokens
        except TokenizerError as exc:  # e.g. a chat template refusing the conversation
            raise InvalidRequestError(f"messages: {exc}") from None
        if tokens >= context_window:
            raise InvalidRequestError(f"prompt is too long: {tokens} tokens > {context_window - 1} maximum")
        return tokens

    async def run(self, prepared: PreparedMessage) -> AsyncIterator[str | Outcome]:
        """Generated text pieces (stop sequences already cut out), then one Outcome."""
        matcher = StopMatcher(prepared.stop_sequences)
        deltas = self.engine.generate(prepared.request)
        output_tokens = 0
        finish: FinishReason | None = None
        try:
            async for delta in deltas:
                output_tokens = delta.output_tokens
                scan = matcher.feed(delta.text)
                if scan.text:
                    yield scan.text
                if scan.matched is not None:
                    yield Outcome("stop_sequence", scan.matched, output_tokens)
                    return
                if delta.finish is not None:
                    finish = delta.finish
                    break
        finally:
            # Stops the engine at once when we leave early (stop sequence, disconnect).
            aclose = getattr(deltas, "aclose", None)
            if aclose is not None:
                await aclose()
        if finish is None:
            raise InternalServerError("The model stopped without a finish reason")
        rest = matcher.flush()
        if rest:
            yield rest
        yield Outcome(self._stop_reason(finish, prepared), None, output_tokens)

    @staticmethod
    def _stop_reason(finish: FinishReason, prepared: PreparedMessage) -> StopReason:
        if finish == "stop":
            return "end_turn"
        return "model_context_window_exceeded" if prepared.bounded_by_context else "max_tokens"

    async def create(self, prepared: PreparedMessage) -> Message:
        parts: list[str] = []
        outcome: Outcome | None = None
        async for piece in self.run(prepared):
            if isinstance(piece, Outcome):
                outcome = piece
            else:
                parts.append(piece)
        assert outcome is not None  # run() always ends with an Outcome or raises
        text = "".join(parts)
        return Message(
            id=new_message_id(),
            content=[TextBlock(text=text)] if text else [],  # never an empty text block
            model=prepared.requested_model,
            stop_reason=outcome.stop_reason,
            stop_sequence=outcome.stop_sequence,
            usage=Usage(input_tokens=prepared.input_tokens, output_tokens=outcome.output_tokens),
        )

    async def stream(self, prepared: PreparedMessage) -> AsyncIterator[RawMessageStreamEvent]:
        """The same message as `create`, as typed stream events in the documented order."""
        yield RawMessageStartEvent(
            message=Message(
                id=new_message_id(),
                content=[],
                model=prepared.requested_model,
                stop_reason=None,
                stop_sequence=None,
                usage=Usage(input_tokens=prepared.input_tokens, output_tokens=0),
            )
        )
        block_open = False
        outcome: Outcome | None = None
        async for piece in self.run(prepared):
            if isinstance(piece, Outcome):
                outcome = piece
                continue
            if not block_open:  # opened lazily: an empty answer has no (empty) text block
                yield RawContentBlockStartEvent(index=0, content_block=TextBlock(text=""))
                block_open = True
            yield RawContentBlockDeltaEvent(index=0, delta=TextDelta(text=piece))
        assert outcome is not None
        if block_open:
            yield RawContentBlockStopEvent(index=0)
        yield RawMessageDeltaEvent(
            delta=MessageDelta(stop_reason=outcome.stop_reason, stop_sequence=outcome.stop_sequence),
            usage=MessageDeltaUsage(output_tokens=outcome.output_tokens, input_tokens=prepared.input_tokens),
        )
        yield RawMessageStopEvent()
