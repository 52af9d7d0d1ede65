"""`GET /v1/models` as OpenAI clients read it. The route is shared with the Anthropic API and
negotiated as LiteLLM's proxy does it: a request with `anthropic-version` gets Anthropic's
`ModelInfo` list, one without gets OpenAI's `{"object": "list", "data": [...]}` (OpenAI SDKs,
and gateways such as LiteLLM and OGX probing an OpenAI-compatible upstream, send no such header).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from reference_server.engine.base import ModelCard

from .responses import Wire

__all__ = ["OpenAIModel", "OpenAIModelList", "model_list", "openai_model"]

OWNER = "plumbline"


class OpenAIModel(Wire):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = OWNER


class OpenAIModelList(Wire):
    object: Literal["list"] = "list"
    data: list[OpenAIModel]


def openai_model(card: ModelCard) -> OpenAIModel:
    return OpenAIModel(id=card.id, created=int(card.created_at.timestamp()))


def model_list(cards: Sequence[ModelCard]) -> OpenAIModelList:
    return OpenAIModelList(data=[openai_model(card) for card in cards])
