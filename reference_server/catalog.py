"""Which models the server answers to: the engine's models, plus glob aliases
(`claude-*=smollm2-135m-instruct`) so that clients sending Claude model names work."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from reference_server.engine.base import ModelCard
from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.protocol import (
    CapabilitySupport,
    ContextManagementCapability,
    EffortCapability,
    ModelCapabilities,
    ModelInfo,
    ModelListResponse,
    ServerToolsCapability,
    ThinkingCapability,
    ThinkingTypes,
)

_NO = CapabilitySupport(supported=False)
_YES = CapabilitySupport(supported=True)

# What this server can do today, stated up front (DESIGN: "capabilities say so up front"). Custom
# tools have no capability field in the API; they are served with every model.
CAPABILITIES = ModelCapabilities(
    batch=_YES,  # Message Batches on SQLite, run at background priority (batches/)
    citations=_YES,  # quotes verbatim by construction (citations/)
    code_execution=_NO,
    context_management=ContextManagementCapability(
        supported=True,  # clear_thinking and clear_tool_uses (context_management.py)
        clear_thinking_20251015=_YES,
        clear_tool_uses_20250919=_YES,
        compact_20260112=_NO,
    ),
    # Effort bounds how long the model thinks (thinking/rules.py EFFORT_THINKING_TOKENS).
    effort=EffortCapability(supported=True, low=_YES, medium=_YES, high=_YES, max=_YES, xhigh=_YES),
    image_input=_NO,
    pdf_input=_YES,  # text extracted page by page (content/documents.py); no page images
    # Tool search and web fetch run here (server_tools/); no search provider, no sandbox.
    server_tools=ServerToolsCapability(supported=True, code_execution=_NO, web_search=_NO),
    structured_outputs=_YES,  # output_config.format, by constrained decoding (tools/grammar.py)
    # A reasoning phase before each answer, signed (thinking/); not between tool calls of one answer.
    thinking=ThinkingCapability(
        supported=True,
        types=ThinkingTypes(adaptive=_YES, between_tools=_NO, disabled=_YES, enabled=_YES),
    ),
)


@dataclass(frozen=True, slots=True)
class Alias:
    pattern: str
    target: str

    @classmethod
    def parse(cls, spec: str) -> Alias:
        """`'claude-*=smollm2-135m-instruct'` → Alias; raises ValueError on a bad spec."""
        pattern, sep, target = spec.partition("=")
        if not sep or not pattern.strip() or not target.strip():
            raise ValueError(f"alias must look like 'PATTERN=MODEL', got {spec!r}")
        return cls(pattern.strip(), target.strip())


class ModelCatalog:
    """Resolves requested model ids and renders `/v1/models` pages."""

    def __init__(
        self,
        cards: Sequence[ModelCard],
        aliases: Sequence[Alias] = (),
        *,
        web_search: bool = False,
        code_execution: bool = False,
    ) -> None:
        self._web_search = web_search  # a web search provider is configured
        self._code_execution = code_execution  # code execution runs in this host's sandbox
        self._cards = {card.id: card for card in cards}
        self._order = [card.id for card in cards]
        for alias in aliases:
            if alias.target not in self._cards:
                raise ValueError(
                    f"alias {alias.pattern!r} points at {alias.target!r}, which is not served"
                    f" (served: {', '.join(self._order)})"
                )
        self._aliases = tuple(aliases)

    def resolve(self, model_id: str) -> ModelCard:
        """The card serving `model_id`; 404 `not_found_error` "model: <id>" otherwise."""
        card = self._cards.get(model_id)
        if card is not None:
            return card
        for alias in self._aliases:
            if fnmatch.fnmatchcase(model_id, alias.pattern):
                return self._cards[alias.target]
        raise NotFoundError(f"model: {model_id}")

    def cards(self) -> list[ModelCard]:
        """The served models, in list order (aliases are not models)."""
        return [self._cards[i] for i in self._order]

    def info(self, model_id: str) -> ModelInfo:
        return _model_info(self.resolve(model_id), self._web_search, self._code_execution)

    def page(self, *, after_id: str | None, before_id: str | None, limit: int) -> ModelListResponse:
        """A page in the list order, with the cursor semantics of the real API."""
        if not 1 <= limit <= 1000:
            raise InvalidRequestError("limit: Input should be between 1 and 1000")
        if after_id is not None and before_id is not None:
            raise InvalidRequestError("after_id and before_id cannot both be set")
        ids = self._order
        if after_id is not None:
            start = _cursor(ids, after_id, "after_id") + 1
            chunk = ids[start : start + limit]
            has_more = start + limit < len(ids)
        elif before_id is not None:
            end = _cursor(ids, before_id, "before_id")
            chunk = ids[max(0, end - limit) : end]
            has_more = end - limit > 0
        else:
            chunk = ids[:limit]
            has_more = limit < len(ids)
        data = [_model_info(self._cards[i], self._web_search, self._code_execution) for i in chunk]
        return ModelListResponse(
            data=data,
            has_more=has_more,
            first_id=chunk[0] if chunk else None,
            last_id=chunk[-1] if chunk else None,
        )


def _cursor(ids: Sequence[str], value: str, name: str) -> int:
    try:
        return ids.index(value)
    except ValueError:
        raise InvalidRequestError(f"{name}: unknown model id {value!r}") from None


def _model_info(card: ModelCard, web_search: bool = False, code_execution: bool = False) -> ModelInfo:
    return ModelInfo(
        id=card.id,
        # The API has no field for it; the name says which weights this server runs.
        display_name=f"{card.display_name} ({card.precision})" if card.precision else card.display_name,
        created_at=card.created_at.isoformat().replace("+00:00", "Z"),
        max_input_tokens=card.context_window,
        max_tokens=card.max_output_tokens,
        capabilities=capabilities(card, web_search=web_search, code_execution=code_execution),
    )


def capabilities(
    card: ModelCard, *, web_search: bool = False, code_execution: bool = False
) -> ModelCapabilities:
    """What the server does with `card`'s model: `CAPABILITIES`, with image input where the
    model has a vision tower (images are then read, not refused), web search where a provider
    is configured, and code execution where it runs in a sandbox (--code-execution)."""
    found = CAPABILITIES.model_copy(update={"image_input": _YES}) if card.vision else CAPABILITIES
    if web_search:
        tools = found.server_tools.model_copy(update={"web_search": _YES})
        found = found.model_copy(update={"server_tools": tools})
    if code_execution:
        tools = found.server_tools.model_copy(update={"code_execution": _YES})
        found = found.model_copy(update={"server_tools": tools, "code_execution": _YES})
    return found
