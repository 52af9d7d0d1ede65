"""Thin HTTP handlers: parse, call `MessagesService`, return JSON or an SSE stream."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Awaitable, Callable
from functools import partial
from typing import Any, TypeVar

from litestar import Request, Response, get, post
from litestar.background_tasks import BackgroundTask
from litestar.response import Stream
from litestar.types import Receive

from reference_server.batches import batch_route_handlers
from reference_server.engine.base import Generation
from reference_server.errors import NotFoundError
from reference_server.files import file_route_handlers
from reference_server.ids import request_id_of
from reference_server.observability.routes import observability_route_handlers
from reference_server.openai import CHAT_COMPLETIONS_PATH, ChatCompletionsService, parse_request, sse_chunks
from reference_server.openai import exception_handlers as openai_exception_handlers
from reference_server.openai import models as openai_models
from reference_server.openai.errors import model_not_found
from reference_server.openai.responses import ErrorBody
from reference_server.prepared import PreparedMessage
from reference_server.protocol import MessageCountTokensParams, MessageCreateParams
from reference_server.ratelimits import RateLimiter, Ticket, metered
from reference_server.serving import MessagesService
from reference_server.settings import Settings
from reference_server.skills.routes import skill_route_handlers
from reference_server.streaming import sse_frames
from reference_server.validation import parse_body, parse_limit
from reference_server.workspaces import key_of, workspace_of

__all__ = ["route_handlers"]

T = TypeVar("T")
AnyRequest = Request[Any, Any, Any]


def _service(request: AnyRequest) -> MessagesService:
    service: MessagesService = request.app.state.service
    return service


def _json(model: Any) -> Response[Any]:
    return Response(model.model_dump(mode="json"), media_type="application/json")


@post("/v1/messages", status_code=200)
async def create_message(request: AnyRequest) -> Response[Any]:
    service = _service(request)
    params = parse_body(await request.body(), request.headers.get("content-type"), MessageCreateParams)
    prepared = await service.prepare(params, _betas(request), _version(request), workspace_of(request))
    ticket, generation = await _admitted(request, prepared, partial(service.start, prepared))
    if params.stream:
        settings: Settings = request.app.state.settings
        events = service.stream(prepared, generation)
        frames = sse_frames(
            metered(events, ticket) if ticket is not None else events,
            ping_interval=settings.ping_interval,
            request_id=request_id_of(request.scope),
        )
        return _event_stream(frames, generation, ticket=ticket)
    message = await _whole(request, service.create(prepared, generation), generation, ticket)
    if ticket is not None:
        ticket.settle(message.usage.output_tokens, message.usage.cache_read_input_tokens)
    return _json(message)


async def _admitted(
    request: AnyRequest, prepared: PreparedMessage, start: Callable[[], Awaitable[Generation]]
) -> tuple[Ticket | None, Generation]:
    """Charge the rate limits (if on: ratelimits/), then start the generation: both before the
    response starts, so a rate limit is a 429 and an overload a 529, never an in-stream error.
    A generation that does not start is charged nothing."""
    limiter: RateLimiter | None = request.app.state.limiters.of(key_of(request.scope))
    ticket = limiter.admit(prepared.input_tokens, prepared.request.max_tokens) if limiter else None
    try:
        return ticket, await start()
    except BaseException:
        if ticket is not None:
            ticket.cancel()
        raise


async def _whole(request: AnyRequest, work: Awaitable[T], generation: Generation, ticket: Ticket | None) -> T:
    """A whole (non-streamed) answer, cancelled if the client goes away; one cut off or failed
    keeps the ticket's estimate."""
    try:
        return await _unless_disconnected(request.receive, work)
    except BaseException:
        if ticket is not None:
            ticket.settle()
        raise
    finally:
        await generation.aclose()  # a no-op after a whole answer; frees the slot otherwise


@post("/v1/messages/count_tokens", status_code=200)
async def count_tokens(request: AnyRequest) -> Response[Any]:
    params = parse_body(await request.body(), request.headers.get("content-type"), MessageCountTokensParams)
    counted = await _service(request).count_tokens(
        params, _betas(request), _version(request), workspace_of(request)
    )
    return _json(counted)


def _betas(request: AnyRequest) -> frozenset[str]:
    """The `anthropic-beta` header's comma-separated features (the header may repeat)."""
    values = request.headers.getall("anthropic-beta", [])
    return frozenset(beta.strip() for value in values for beta in value.split(",") if beta.strip())


def _version(request: AnyRequest) -> str | None:
    """The `anthropic-version` header, as sent: the service applies its rules (versioning.py)."""
    return request.headers.get("anthropic-version")


def _speaks_openai(request: AnyRequest) -> bool:
    """A models request without `anthropic-version` is an OpenAI client's (openai/models.py)."""
    return not request.headers.get("anthropic-version")


@get("/v1/models", opt={"dialect": "negotiated"})
async def list_models(request: AnyRequest) -> Response[Any]:
    if _speaks_openai(request):
        return _json(openai_models.model_list(_service(request).catalog.cards()))
    query = request.query_params
    page = _service(request).catalog.page(
        after_id=query.get("after_id"),
        before_id=query.get("before_id"),
        limit=parse_limit(query.get("limit")),
    )
    return _json(page)


@get("/v1/models/{model_id:str}", opt={"dialect": "negotiated"})
async def get_model(request: AnyRequest) -> Response[Any]:
    catalog, model_id = _service(request).catalog, request.path_params["model_id"]
    if not _speaks_openai(request):
        return _json(catalog.info(model_id))
    try:
        return _json(openai_models.openai_model(catalog.resolve(model_id)))
    except NotFoundError:
        error = model_not_found(model_id)
        body = ErrorBody(error=error.detail()).model_dump(mode="json")
        return Response(body, status_code=error.status_code, media_type="application/json")


@post(
    CHAT_COMPLETIONS_PATH,
    status_code=200,
    opt={"dialect": "openai"},  # the guard skips `anthropic-version`
    exception_handlers=openai_exception_handlers,  # type: ignore[arg-type]
)
async def create_chat_completion(request: AnyRequest) -> Response[Any]:
    service: ChatCompletionsService = request.app.state.chat
    params = parse_request(await request.body(), request.headers.get("content-type"))
    prepared = await service.prepare(params)
    ticket, generation = await _admitted(request, prepared.plan, partial(service.start, prepared))
    headers = {"x-request-id": request_id_of(request.scope)}  # where the OpenAI SDK reads it
    if params.stream:
        settle = ticket.settle if ticket is not None else None
        chunks = sse_chunks(service.stream(prepared, generation, settle=settle))
        return _event_stream(chunks, generation, headers, ticket=ticket)
    completion = await _whole(request, service.create(prepared, generation), generation, ticket)
    if ticket is not None and completion.usage is not None:
        ticket.settle(completion.usage.completion_tokens)
    return Response(completion.model_dump(mode="json"), media_type="application/json", headers=headers)


def _event_stream(
    frames: AsyncGenerator[bytes, None],
    generation: Generation,
    headers: dict[str, str] | None = None,
    ticket: Ticket | None = None,
) -> Stream:
    """An SSE response that stops its generation however it ends.

    A client that hangs up cancels the response task wherever it is; in `send`, the frame
    generators stay suspended at a `yield` and their own `finally` would wait for the garbage
    collector while the engine generated on. The response's after-send task closes them.
    """

    async def close() -> None:
        try:
            await frames.aclose()
        finally:
            await generation.aclose()
            if ticket is not None:
                ticket.settle()  # a stream cut off: the estimate stands (a no-op once settled)

    return Stream(
        frames,
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})},
        background=BackgroundTask(close),
    )


async def _unless_disconnected(receive: Receive, work: Awaitable[T]) -> T:
    """Await `work`, cancelling it (and so the generation) if the client goes away first.
    The body has been read, so the next ASGI message can only be `http.disconnect`."""
    job = asyncio.ensure_future(work)
    watcher = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({job, watcher}, return_when=asyncio.FIRST_COMPLETED)
        if not job.done():
            job.cancel()
        return await job
    finally:
        watcher.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass


route_handlers = [
    create_message,
    count_tokens,
    list_models,
    get_model,
    create_chat_completion,
    *batch_route_handlers,
    *file_route_handlers,
    *skill_route_handlers,
    *observability_route_handlers,
]
