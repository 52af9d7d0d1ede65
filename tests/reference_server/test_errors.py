from __future__ import annotations

import pytest
from litestar.exceptions import HTTPException, NotFoundException

from reference_server import errors


@pytest.mark.parametrize(
    ("cls", "status", "kind"),
    [
        (errors.InvalidRequestError, 400, "invalid_request_error"),
        (errors.AuthenticationError, 401, "authentication_error"),
        (errors.BillingError, 402, "billing_error"),
        (errors.PermissionDeniedError, 403, "permission_error"),
        (errors.NotFoundError, 404, "not_found_error"),
        (errors.RequestTooLargeError, 413, "request_too_large"),
        (errors.RateLimitError, 429, "rate_limit_error"),
        (errors.InternalServerError, 500, "api_error"),
        (errors.GatewayTimeoutError, 504, "timeout_error"),
        (errors.OverloadedError, 529, "overloaded_error"),
    ],
)
def test_each_wire_type_has_its_status(cls, status, kind):
    assert (cls.status_code, cls.error_type) == (status, kind)
    body = errors.error_body(cls("m"), "req_1").model_dump(mode="json")
    assert body == {"type": "error", "error": {"type": kind, "message": "m"}, "request_id": "req_1"}


def test_framework_errors_map_by_status():
    assert errors.from_exception(NotFoundException()).error_type == "not_found_error"
    method = errors.from_exception(HTTPException(status_code=405))
    assert (method.status_code, method.error_type) == (405, "invalid_request_error")
    big = errors.from_exception(HTTPException(status_code=413))
    assert (big.status_code, big.error_type) == (413, "request_too_large")


def test_unknown_exceptions_are_500_api_error_without_internals():
    error = errors.from_exception(KeyError("secret detail"))
    assert (error.status_code, error.error_type) == (500, "api_error")
    assert "secret" not in error.message
