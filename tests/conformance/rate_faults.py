"""The faults of the RATE-* properties (part of faults.fault_catalogue): resets sent as
durations (OpenAI's `x-ratelimit-reset-*` style), a limit met answered in OpenAI's envelope
without `retry-after` (peers.md #47), and a `retry-after` shorter than the real wait."""

from __future__ import annotations

from .fault_proxy import Fault, Request, Response

__all__ = ["rate_fault_catalogue"]


def _resets_as_durations(headers: dict[str, str]) -> dict[str, str]:
    return {
        k: ("20s" if k.startswith("anthropic-ratelimit-") and k.endswith("-reset") else v)
        for k, v in headers.items()
    }


def _openai_429(request: Request, response: Response) -> Response:
    if response.status != 429:
        return response
    headers = {k: v for k, v in response.headers.items() if k not in ("retry-after", "content-length")}
    body = b'{"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}'
    return Response(429, headers, body)


def _short_retry_after(headers: dict[str, str]) -> dict[str, str]:
    return {k: ("1" if k == "retry-after" else v) for k, v in headers.items()}


def rate_fault_catalogue() -> dict[str, Fault]:
    return {
        "RATE-001": Fault(
            "ratelimit resets as durations ('20s'), not RFC 3339", headers=_resets_as_durations
        ),
        "RATE-002": Fault("a limit met: OpenAI's 429 envelope, no retry-after", response=_openai_429),
        "RATE-003": Fault("retry-after says 1 s whatever the real wait", headers=_short_retry_after),
    }
