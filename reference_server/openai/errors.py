"""Errors in OpenAI's envelope, `{"error": {"message", "type", "param", "code"}}`, for the
chat completions route only: its own handler renders every failure there (the auth guard's,
the shared validation's, Litestar's) this way, while the Anthropic routes keep theirs."""

from __future__ import annotations

import logging
from typing import Any

from litestar import Request, Response
from litestar.exceptions import HTTPException

from reference_server.errors import APIError, RateLimitError, from_exception

from .responses import ErrorBody, ErrorDetail

__all__ = ["OpenAIError", "exception_handlers", "model_not_found", "to_openai_error"]

log = logging.getLogger(__name__)


class OpenAIError(Exception):
    """A failure as OpenAI reports it: HTTP status, `type`, the offending `param`, a `code`."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int = 400,
        type: str = "invalid_request_error",
        param: str | None = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status_code = status_code
        self.type = type
        self.param = param
        self.code = code

    def detail(self) -> ErrorDetail:
        return ErrorDetail(message=self.message, type=self.type, param=self.param, code=self.code)


def model_not_found(model_id: str) -> OpenAIError:
    """OpenAI's 404 for a model it does not serve (`param` null, as OpenAI sends it)."""
    return OpenAIError(
        f"The model `{model_id}` does not exist or you do not have access to it.",
        status_code=404,
        code="model_not_found",
    )


def to_openai_error(exc: BaseException) -> OpenAIError:
    """Any exception as an OpenAIError; the shared wire errors keep their status and message."""
    if isinstance(exc, OpenAIError):
        return exc
    if isinstance(exc, RateLimitError):  # OpenAI's 429: the kind of limit as its type
        kind = "requests" if exc.limit == "requests" else "tokens"
        return OpenAIError(exc.message, status_code=429, type=kind, code="rate_limit_exceeded")
    error = from_exception(exc)
    if error.status_code == 401:
        return OpenAIError("Incorrect API key provided.", status_code=401, code="invalid_api_key")
    kind = "invalid_request_error" if error.status_code < 500 else "server_error"
    return OpenAIError(error.message, status_code=error.status_code, type=kind)


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    error = to_openai_error(exc)
    if error.status_code >= 500 and not isinstance(exc, APIError | HTTPException | OpenAIError):
        log.exception("unhandled error", exc_info=exc)
    headers = dict(exc.headers) if isinstance(exc, HTTPException) and exc.headers else {}
    if isinstance(exc, APIError):
        headers.update(exc.headers)  # retry-after on an overload
    return Response(
        content=ErrorBody(error=error.detail()).model_dump(mode="json"),
        status_code=error.status_code,
        headers=headers,
        media_type="application/json",
    )


exception_handlers = {Exception: _handle}
