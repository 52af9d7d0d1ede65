"""Wire models of the Message Batches API (names as the official SDK's types) and the mapping from
a stored batch to its `MessageBatch` object."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictStr

from reference_server.batches.store import BatchRecord, ProcessingStatus
from reference_server.timestamps import rfc3339

__all__ = [
    "CUSTOM_ID_PATTERN",
    "MAX_REQUESTS",
    "DeletedMessageBatch",
    "MessageBatch",
    "MessageBatchCreateParams",
    "MessageBatchListResponse",
    "MessageBatchRequestCounts",
    "MessageBatchRequestParam",
    "message_batch",
]

# The API's limits (OpenAPI `MessageBatchIndividualRequestParams`, `CreateMessageBatchParams`).
CUSTOM_ID_PATTERN = r"^[a-zA-Z0-9_-]{1,64}$"
MAX_REQUESTS = 100_000


class _Param(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class MessageBatchRequestParam(_Param):
    """One request of a batch. `params` is validated like a Messages request only when the
    request is processed: a request that would be a 400 comes back as an `errored` result."""

    custom_id: Annotated[StrictStr, Field(pattern=CUSTOM_ID_PATTERN)]
    params: dict[str, Any]


class MessageBatchCreateParams(_Param):
    requests: Annotated[list[MessageBatchRequestParam], Field(min_length=1, max_length=MAX_REQUESTS)]


class MessageBatchRequestCounts(BaseModel):
    processing: int
    succeeded: int
    errored: int
    canceled: int
    expired: int


class MessageBatch(BaseModel):
    id: str
    type: Literal["message_batch"] = "message_batch"
    processing_status: ProcessingStatus
    request_counts: MessageBatchRequestCounts
    created_at: str
    expires_at: str
    ended_at: str | None
    cancel_initiated_at: str | None
    archived_at: str | None
    results_url: str | None


class MessageBatchListResponse(BaseModel):
    data: list[MessageBatch]
    has_more: bool
    first_id: str | None
    last_id: str | None


class DeletedMessageBatch(BaseModel):
    id: str
    type: Literal["message_batch_deleted"] = "message_batch_deleted"


def message_batch(record: BatchRecord, base_url: str) -> MessageBatch:
    """The `MessageBatch` of a stored batch. As documented, every request counts as `processing`
    until the whole batch has ended; `results_url` (on this server, `base_url`) only then."""
    ended = record.status == "ended"
    counts = MessageBatchRequestCounts(
        processing=0 if ended else record.total,
        succeeded=record.succeeded if ended else 0,
        errored=record.errored if ended else 0,
        canceled=record.canceled if ended else 0,
        expired=record.expired if ended else 0,
    )
    results_url = f"{base_url.rstrip('/')}/v1/messages/batches/{record.id}/results" if ended else None
    return MessageBatch(
        id=record.id,
        processing_status=record.status,
        request_counts=counts,
        created_at=rfc3339(record.created_at),
        expires_at=rfc3339(record.expires_at),
        ended_at=rfc3339(record.ended_at) if record.ended_at is not None else None,
        cancel_initiated_at=(
            rfc3339(record.cancel_initiated_at) if record.cancel_initiated_at is not None else None
        ),
        archived_at=rfc3339(record.archived_at) if record.archived_at is not None else None,
        results_url=results_url,
    )
