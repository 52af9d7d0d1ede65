"""Wire errors: one class per `error.type`, each with its HTTP status, and the app-level
handlers that render every failure (ours, Litestar's, or unexpected) as the Anthropic
envelope `{"type":"error","error":{"type","message"},"request_id"}`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from litestar import Request, Response
from litestar.exceptions import HTTPException

from reference_server.ids import request_id_of
from reference_server.protocol import ErrorObject, ErrorResponse

__all__ = [
    "APIError",
    "AuthenticationError",
    "BillingError",
    "GatewayTimeoutError",
    "InternalServerError",
    "InvalidRequestError",
    "NotFoundError",
    "OverloadedError",
    "PermissionDeniedError",
    "RateLimitError",
    "RequestTooLargeError",
    "error_body",
    "exception_handlers",
    "from_exception",
]

log = logging.getLogger(__name__)


class APIError(Exception):
    """Base of every error the server reports on the wire."""

    status_code: ClassVar[int] = 500
    error_type: ClassVar[str] = "api_error"

    def __init__(
        self, message: str, *, status_code: int | None = None, headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        if status_code is not None:
            self.status_code = status_code  # type: ignore[misc]
        # Response headers the error brings (`retry-after` on 529).
        self.headers: dict[str, str] = dict(headers or {})


class InvalidRequestError(APIError):
    status_code = 400
    error_type = "invalid_request_error"


class AuthenticationError(APIError):
    status_code = 401
    error_type = "authentication_error"


class BillingError(APIError):
    status_code = 402
    error_type = "billing_error"


class PermissionDeniedError(APIError):
    status_code = 403
    error_type = "permission_error"


class NotFoundError(APIError):
    status_code = 404
    error_type = "not_found_error"


class RequestTooLargeError(APIError):
    status_code = 413
    error_type = "request_too_large"


class RateLimitError(APIError):
    status_code = 429
    error_type = "rate_limit_error"

    def __init__(
        self, message: str, *, limit: str = "requests", headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(message, headers=headers)
        self.limit = limit  # the limit met: requests, input or output (tokens)


class InternalServerError(APIError):
    status_code = 500
    error_type = "api_error"


class GatewayTimeoutError(APIError):
    status_code = 504
    error_type = "timeout_error"


class OverloadedError(APIError):
    status_code = 529
    error_type = "overloaded_error"


_BY_STATUS: dict[int, type[APIError]] = {
    cls.status_code: cls
    for cls in (
        InvalidRequestError,
        AuthenticationError,
        BillingError,
        PermissionDeniedError,
        NotFoundError,
        RequestTooLargeError,
        RateLimitError,
        InternalServerError,
        GatewayTimeoutError,
        OverloadedError,
    )
}


def from_exception(exc: BaseException) -> APIError:
    """Map any exception to a wire error; unknown ones become a 500 `api_error`."""
    if isinstance(exc, APIError):
        return exc
    if isinstance(exc, HTTPException):
        status = exc.status_code
        cls = _BY_STATUS.get(status)
        if cls is None:  # other 4xx (405, 415, ...) are `invalid_request_error` on the wire
            cls = InvalidRequestError if status < 500 else InternalServerError
        message = _litestar_message(exc)
        return cls(message, status_code=status)
    return InternalServerError("Internal server error")


def _litestar_message(exc: HTTPException) -> str:
    if exc.status_code == 404:
        return "Not found"
    if exc.status_code == 405:
        return "Method not allowed"
    if exc.status_code == 413:
        return "Request exceeds the maximum allowed number of bytes"
    return str(exc.detail)


def error_body(error: APIError, request_id: str | None) -> ErrorResponse:
    return ErrorResponse(
        error=ErrorObject(type=error.error_type, message=error.message), request_id=request_id
    )


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    error = from_exception(exc)
    if error.status_code >= 500 and not isinstance(exc, APIError | HTTPException):
        log.exception("unhandled error", exc_info=exc)
    headers: dict[str, str] = dict(error.headers)
    if isinstance(exc, HTTPException) and exc.headers:
        headers.update(exc.headers)  # e.g. Allow on 405
    return Response(
        content=error_body(error, request_id_of(request.scope)).model_dump(mode="json"),
        status_code=error.status_code,
        headers=headers,
        media_type="application/json",
    )


exception_handlers = {Exception: _handle}
