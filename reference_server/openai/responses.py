"""Response bodies of `POST /v1/chat/completions` (the SDK's `ChatCompletion`), the error
envelope, and the identifiers in OpenAI's shapes (`chatcmpl-…`, `call_…`)."""

from __future__ import annotations

import secrets
import string
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

__all__ = [
    "ChatCompletion",
    "Choice",
    "CompletionUsage",
    "ErrorBody",
    "ErrorDetail",
    "FinishReason",
    "Function",
    "ResponseMessage",
    "ToolCall",
    "Wire",
    "new_call_id",
    "new_completion_id",
]

FinishReason = Literal["stop", "length", "tool_calls"]

_ALPHABET = string.ascii_letters + string.digits


def _token(length: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(length))


def new_completion_id() -> str:
    return f"chatcmpl-{_token(29)}"


def new_call_id() -> str:
    return f"call_{_token(24)}"


class Wire(BaseModel):
    """A response model; the fields in `omit_none` are left out, as OpenAI leaves them out,
    rather than sent as null."""

    model_config = ConfigDict(frozen=True)
    omit_none: ClassVar[frozenset[str]] = frozenset()

    @model_serializer(mode="wrap")
    def _omit(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None or key not in self.omit_none}


class Function(Wire):
    name: str
    arguments: str  # JSON text


class ToolCall(Wire):
    id: str
    type: Literal["function"] = "function"
    function: Function


class ResponseMessage(Wire):
    omit_none = frozenset({"tool_calls"})
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    tool_calls: list[ToolCall] | None = None


class Choice(Wire):
    index: int = 0
    message: ResponseMessage
    logprobs: None = None
    finish_reason: FinishReason


class CompletionUsage(Wire):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class ChatCompletion(Wire):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[Choice]
    usage: CompletionUsage


class ErrorDetail(Wire):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(Wire):
    error: ErrorDetail
