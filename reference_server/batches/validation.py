"""What the Message Batches API checks, and when.

At creation (a 400 refuses the whole batch): the body's shape, 1 to 100,000 requests, each
`custom_id` matching `^[a-zA-Z0-9_-]{1,64}$` and unique within the batch, each `params` an
object; the body at most 256 MB (a 413).

When a request is processed (`read_params`): its `params` are validated exactly like a
`POST /v1/messages` body, plus the few parameters the batch docs list as not supported in a
batch (`stream: true`, `speed`, `max_tokens: 0`); the rules of the create call's
`anthropic-version` apply when it is prepared (versioning.py). A request that fails is an
`errored` result carrying the error envelope the Messages API would have answered; the rest of
the batch runs
(the API documents that params are validated asynchronously).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from reference_server.batches.models import MessageBatchCreateParams
from reference_server.errors import InvalidRequestError, RequestTooLargeError
from reference_server.protocol import MessageCreateParams
from reference_server.validation import parse_body

__all__ = [
    "MAX_BATCH_BODY_BYTES",
    "check_batch_rules",
    "dump_params",
    "parse_create",
    "read_limited",
    "read_params",
]

# "Batches may contain up to 100,000 requests and be up to 256 MB in total size."
MAX_BATCH_BODY_BYTES = 256 * 1024 * 1024


async def read_limited(
    chunks: AsyncIterator[bytes], content_length: str | None, limit: int | None = None
) -> bytes:
    """The request body, or a 413 `request_too_large` once it exceeds `limit` bytes (the
    batch limit by default), announced or not."""
    limit = MAX_BATCH_BODY_BYTES if limit is None else limit
    too_large = RequestTooLargeError(f"Request exceeds the maximum allowed number of bytes ({limit})")
    if content_length is not None and content_length.strip().isdigit() and int(content_length) > limit:
        raise too_large
    body = bytearray()
    async for chunk in chunks:
        body += chunk
        if len(body) > limit:
            raise too_large
    return bytes(body)


def parse_create(raw: bytes, content_type: str | None) -> MessageBatchCreateParams:
    """A create body, validated as the API validates it at creation (400 on the first problem)."""
    params = parse_body(raw, content_type, MessageBatchCreateParams)
    first: dict[str, int] = {}
    for index, request in enumerate(params.requests):
        earlier = first.setdefault(request.custom_id, index)
        if earlier != index:
            raise InvalidRequestError(
                f"requests.{index}.custom_id: duplicate custom_id {request.custom_id!r} (also"
                f" requests.{earlier}.custom_id); each custom_id must be unique within the batch"
            )
    return params


def read_params(params: str) -> MessageCreateParams:
    """A stored request's params (JSON text) as Messages create params, validated exactly as
    `POST /v1/messages` validates its body, then by the batch rules."""
    create = parse_body(params.encode(), "application/json", MessageCreateParams)
    check_batch_rules(create)
    return create


def check_batch_rules(params: MessageCreateParams) -> None:
    """The Messages parameters that a batch request may not use (the batch docs' list)."""
    if params.stream:
        raise InvalidRequestError(
            "stream: streaming is not supported in a batch request; batch results come back as a file"
        )
    if params.speed is not None:
        raise InvalidRequestError("speed: fast mode is not supported in a batch request")
    if params.max_tokens == 0:
        raise InvalidRequestError(
            "max_tokens: must be at least 1 in a batch request (max_tokens: 0, a cache pre-warm,"
            " is not supported in a batch)"
        )


def dump_params(params: dict[str, Any]) -> str:
    """A request's params as stored: compact JSON text, as sent."""
    return json.dumps(params, ensure_ascii=False, separators=(",", ":"))
