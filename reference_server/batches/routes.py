"""The six Message Batches endpoints, thin: parse, call the store, return JSON (or JSON Lines).

Each path also answers with `?beta=true` (the beta SDK's twins): the query string is not read.
`results_url` points at this server, at the address the client used to reach it.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import string
from collections.abc import AsyncIterator
from typing import Any

from litestar import Request, Response, delete, get, post
from litestar.response import Stream

from reference_server.batches.models import (
    DeletedMessageBatch,
    MessageBatchListResponse,
    message_batch,
)
from reference_server.batches.runtime import Batches
from reference_server.batches.store import BatchRecord, CursorNotFound, NotEnded, StoredResult
from reference_server.batches.validation import dump_params, parse_create, read_limited
from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.validation import parse_limit
from reference_server.workspaces import workspace_of

__all__ = ["batch_route_handlers", "new_batch_id"]

AnyRequest = Request[Any, Any, Any]
# Results read from the database per round trip while streaming the JSONL file.
RESULTS_PAGE = 500
_ALPHABET = string.ascii_letters + string.digits


def new_batch_id() -> str:
    """A batch id in the API's shape: `msgbatch_` and 24 random letters and digits."""
    return "msgbatch_" + "".join(secrets.choice(_ALPHABET) for _ in range(24))


def _batches(request: AnyRequest) -> Batches:
    batches: Batches = request.app.state.batches
    return batches


def _base_url(request: AnyRequest) -> str:
    return str(request.base_url)


def _betas(request: AnyRequest) -> list[str]:
    """The `anthropic-beta` features of the create call; they apply to every request in the batch."""
    values = request.headers.getall("anthropic-beta", [])
    return [beta.strip() for value in values for beta in value.split(",") if beta.strip()]


def _json(model: Any) -> Response[Any]:
    return Response(model.model_dump(mode="json"), media_type="application/json")


async def _find(request: AnyRequest, batch_id: str) -> BatchRecord:
    """The request's workspace's batch (another workspace's is a 404, as an unknown one)."""
    record = await asyncio.to_thread(_batches(request).store.get, batch_id, workspace=workspace_of(request))
    if record is None:
        raise NotFoundError(f"message_batch_id: no Message Batch with id {batch_id!r}")
    return record


# The body may be up to 256 MB, not the 32 MB of the Messages endpoints: read_limited checks it.
@post("/v1/messages/batches", status_code=200, request_max_body_size=None)
async def create_batch(request: AnyRequest) -> Response[Any]:
    batches = _batches(request)
    raw = await read_limited(request.stream(), request.headers.get("content-length"))
    # Up to 256 MB of JSON: parsed and stored off the event loop, so streams keep flowing.
    # The create call's anthropic-version governs every request of the batch (versioning.py).
    version = request.headers.get("anthropic-version")
    record = await asyncio.to_thread(
        _create,
        batches,
        raw,
        request.headers.get("content-type"),
        _betas(request),
        version,
        workspace_of(request),
    )
    batches.processor.wake()
    return _json(message_batch(record, _base_url(request)))


def _create(
    batches: Batches,
    raw: bytes,
    content_type: str | None,
    betas: list[str],
    version: str | None,
    workspace: str,
) -> BatchRecord:
    params = parse_create(raw, content_type)
    requests = [(item.custom_id, dump_params(item.params)) for item in params.requests]
    models = [batches.served_model(item.params) for item in params.requests]
    return batches.store.create(
        new_batch_id(),
        requests,
        betas=betas,
        now=batches.now(),
        models=models,
        api_version=version,
        workspace=workspace,
    )


@get("/v1/messages/batches")
async def list_batches(request: AnyRequest) -> Response[Any]:
    query = request.query_params
    limit = parse_limit(query.get("limit"))
    if not 1 <= limit <= 1000:
        raise InvalidRequestError("limit: Input should be between 1 and 1000")
    after_id, before_id = query.get("after_id"), query.get("before_id")
    if after_id is not None and before_id is not None:
        raise InvalidRequestError("after_id and before_id cannot both be set")
    try:
        records, has_more = await asyncio.to_thread(
            _batches(request).store.page,
            after_id=after_id,
            before_id=before_id,
            limit=limit,
            workspace=workspace_of(request),
        )
    except CursorNotFound as exc:
        name = exc.args[0]
        raise InvalidRequestError(f"{name}: no Message Batch with id {query.get(name)!r}") from None
    data = [message_batch(record, _base_url(request)) for record in records]
    page = MessageBatchListResponse(
        data=data,
        has_more=has_more,
        first_id=data[0].id if data else None,
        last_id=data[-1].id if data else None,
    )
    return _json(page)


@get("/v1/messages/batches/{message_batch_id:str}")
async def retrieve_batch(request: AnyRequest) -> Response[Any]:
    record = await _find(request, request.path_params["message_batch_id"])
    return _json(message_batch(record, _base_url(request)))


@post("/v1/messages/batches/{message_batch_id:str}/cancel", status_code=200)
async def cancel_batch(request: AnyRequest) -> Response[Any]:
    """Canceling starts at once; an ended batch (or one already canceling) is returned as it is."""
    batches = _batches(request)
    batch_id = request.path_params["message_batch_id"]
    record = await asyncio.to_thread(
        batches.store.cancel, batch_id, now=batches.now(), workspace=workspace_of(request)
    )
    if record is None:
        raise NotFoundError(f"message_batch_id: no Message Batch with id {batch_id!r}")
    batches.processor.wake()
    return _json(message_batch(record, _base_url(request)))


@delete("/v1/messages/batches/{message_batch_id:str}", status_code=200)
async def delete_batch(request: AnyRequest) -> Response[Any]:
    batch_id = request.path_params["message_batch_id"]
    try:
        deleted = await asyncio.to_thread(
            _batches(request).store.delete, batch_id, workspace=workspace_of(request)
        )
    except NotEnded:
        raise InvalidRequestError(
            f"Message Batch {batch_id} cannot be deleted while it is being processed;"
            " cancel it, then delete it once it has ended"
        ) from None
    if not deleted:
        raise NotFoundError(f"message_batch_id: no Message Batch with id {batch_id!r}")
    return _json(DeletedMessageBatch(id=batch_id))


@get("/v1/messages/batches/{message_batch_id:str}/results")
async def batch_results(request: AnyRequest) -> Stream:
    """JSON Lines, one line per request, read from the database a page at a time."""
    batches = _batches(request)
    record = await _find(request, request.path_params["message_batch_id"])
    if record.status != "ended":
        raise InvalidRequestError(
            f"Message Batch {record.id} has not ended ({record.status}): its results are available"
            " once processing has ended"
        )
    if record.archived_at is not None:
        raise NotFoundError(f"The results of Message Batch {record.id} are no longer available (archived)")
    return Stream(_lines(batches, record.seq), media_type="application/x-jsonl")


async def _lines(batches: Batches, seq: int) -> AsyncIterator[bytes]:
    after = -1
    while True:
        page = await asyncio.to_thread(batches.store.results, seq, after_idx=after, limit=RESULTS_PAGE)
        if not page:
            return
        yield b"".join(_line(result) for result in page)
        after = page[-1].idx


def _line(stored: StoredResult) -> bytes:
    # The result is stored as compact JSON (no newline inside): the line is built, not re-parsed.
    return f'{{"custom_id":{json.dumps(stored.custom_id)},"result":{stored.result}}}\n'.encode()


batch_route_handlers = [create_batch, list_batches, retrieve_batch, cancel_batch, delete_batch, batch_results]
