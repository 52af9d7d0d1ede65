"""`create_app(settings, engine=None)`: the Litestar application. Nothing runs at import;
the model loads once, in the lifespan."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from litestar import Litestar
from litestar.connection import ASGIConnection
from litestar.datastructures import MutableScopeHeaders
from litestar.handlers.base import BaseRouteHandler
from litestar.types import Guard, Message, Scope

from reference_server.batches import open_batches
from reference_server.catalog import ModelCatalog
from reference_server.code_execution.setup import code_executor
from reference_server.engine.base import Engine
from reference_server.errors import (
    AuthenticationError,
    InvalidRequestError,
    PermissionDeniedError,
    exception_handlers,
)
from reference_server.files.store import FileStore
from reference_server.ids import request_id_of
from reference_server.observability import ServingMetrics
from reference_server.observability.hooks import observe_response, timed
from reference_server.openai import CHAT_COMPLETIONS_PATH, ChatCompletionsService
from reference_server.ratelimits import Limits
from reference_server.routes import route_handlers
from reference_server.server_tools.fetch import FetchPolicy
from reference_server.server_tools.loop import ServerToolRuntime
from reference_server.server_tools.search_index import WebSearchIndex
from reference_server.serving import MessagesService
from reference_server.settings import Settings
from reference_server.skills.store import SkillStore
from reference_server.thinking import ThinkingSigner
from reference_server.versioning import api_version
from reference_server.workspaces import KeyRing, key_of, workspace_of
from reference_server.workspaces.limits import KeyLimiters
from reference_server.workspaces.reload import KeyFile
from reference_server.workspaces.scope import remember

__all__ = ["create_app"]

log = logging.getLogger(__name__)


def create_app(settings: Settings, engine: Engine | None = None) -> Litestar:
    """Build the app. With `engine=None` the lifespan loads `settings.model` on MLX and
    closes it at shutdown; a given engine is used as is and left open for its owner."""

    keys = KeyFile(settings.keys_file, settings.api_key)  # a bad keys file stops the start here

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        owned = engine is None
        app.state.keyfile = keys
        keys.watch()  # SIGHUP reads the keys file again
        if engine is None:
            from reference_server.engine import load_engine
            from reference_server.engine.mlx import ServingLimits

            limits = ServingLimits(
                max_batch=settings.max_batch,
                max_pending=settings.max_pending,
                cache_budget_bytes=settings.cache_budget_mb << 20,
                cache_min_tokens=settings.cache_min_tokens,
                speculative=settings.speculative,
            )
            log.info("loading model %s", settings.model)
            active: Engine = await asyncio.to_thread(
                load_engine,
                settings.model,
                blas=settings.blas,
                precision=settings.precision,
                seed=settings.seed,
                context_window=settings.context_window,
                limits=limits,
            )
        else:
            active = engine
        signer = await asyncio.to_thread(ThinkingSigner.in_directory, settings.resolved_data_dir())
        index = None
        if settings.web_search_index is not None:
            index = await asyncio.to_thread(WebSearchIndex.from_directory, settings.web_search_index)
            log.info("web search index: %d documents from %s", index.size, settings.web_search_index)
        code, refusal = await asyncio.to_thread(code_executor, settings)
        catalog = ModelCatalog(
            active.models(), settings.aliases, web_search=index is not None, code_execution=code is not None
        )
        server_tools = ServerToolRuntime(
            FetchPolicy(allow_private=settings.allow_private_fetch),
            settings.server_tool_iterations,
            search_index=index,
            signer=signer,
            mcp=FetchPolicy(allow_private=settings.allow_private_mcp),
            code=code,
            code_refusal=refusal,
        )
        # The Files API: metadata in SQLite, bytes beside it, in the data directory.
        app.state.files = await asyncio.to_thread(FileStore.open, settings.resolved_data_dir())
        if code is not None:
            code.files = app.state.files  # what code writes comes back as Files API files
            if code.egress is not None:
                await code.egress.start()  # the hosts code may reach (--code-execution-allow-host)
        # The Skills API: rows in SQLite, each version's files beside it, in the data directory.
        app.state.skills = await asyncio.to_thread(SkillStore, settings.resolved_data_dir())
        # Queue depth, batch size and the prompt cache's size, where the engine tells them.
        app.state.metrics = ServingMetrics(load=getattr(active, "load", None))
        app.state.started = time.monotonic()
        app.state.service = MessagesService(
            active,
            catalog,
            signer,
            server_tools,
            app.state.files,
            skills=app.state.skills,
            metrics=app.state.metrics,
            behaviour=settings.model_behaviour,
        )
        app.state.chat = ChatCompletionsService(app.state.service)
        app.state.settings = settings
        rates = Limits(settings.rate_limit_rpm, settings.rate_limit_itpm, settings.rate_limit_otpm)
        app.state.limiters = KeyLimiters(rates)
        keys.listeners.append(lambda ring: app.state.limiters.forget_others({e.key for e in ring.entries}))
        # Message Batches: SQLite in the data directory; pending requests resume at once.
        app.state.batches = await open_batches(
            settings.resolved_data_dir(), app.state.service, concurrency=settings.batch_concurrency
        )
        try:
            yield
        finally:
            keys.unwatch()
            if code is not None:
                await code.close()  # Python calls paused on client tools end with the server
            if code is not None and code.egress is not None:
                await code.egress.close()
            await app.state.batches.aclose()  # before the engine: running requests stay pending
            app.state.files.close()
            app.state.skills.close()
            if owned:
                await active.aclose()

    return Litestar(
        route_handlers=route_handlers,
        lifespan=[lifespan],
        guards=[_check_headers(settings)],
        exception_handlers=exception_handlers,  # type: ignore[arg-type]
        middleware=[timed],
        before_send=[_add_request_id, _add_rate_limit_headers, observe_response],
        request_max_body_size=settings.max_body_bytes,
        openapi_config=None,
        # The process's logging is configure_logging's (text or json): Litestar's default config
        # would replace the root's handler with its own format.
        logging_config=None,
        debug=False,
    )


async def _add_request_id(message: Message, scope: Scope) -> None:
    """`request-id` on every response, 404s and 405s included (before_send sees them all)."""
    if message["type"] == "http.response.start":
        headers = MutableScopeHeaders.from_message(message)
        headers["request-id"] = request_id_of(scope)


async def _add_rate_limit_headers(message: Message, scope: Scope) -> None:
    """The `anthropic-ratelimit-*` headers on every response while rate limits are on; OpenAI's
    `x-ratelimit-*` on the chat completions route, where OpenAI clients read them."""
    if message["type"] != "http.response.start":
        return
    limiters: KeyLimiters | None = getattr(scope["app"].state, "limiters", None)
    limiter = limiters.of(key_of(scope)) if limiters is not None else None
    if limiter is not None:
        headers = MutableScopeHeaders.from_message(message)
        openai = scope.get("path") == CHAT_COMPLETIONS_PATH
        for name, value in (limiter.openai_headers() if openai else limiter.headers()).items():
            headers[name] = value


def _check_headers(settings: Settings) -> Guard:
    """Guard: API key (x-api-key or Bearer, constant-time against every key, never logged; not on
    /health), whose workspace the request's is (`anthropic-workspace-id`, when sent, must name
    it); then the `anthropic-version` header the API requires, one of the versions it documents
    (not on the OpenAI, negotiated or plain routes; a negotiated route that gets one checks it)."""

    def guard(connection: ASGIConnection, handler: BaseRouteHandler) -> None:  # type: ignore[type-arg]
        headers = connection.headers
        ring: KeyRing = connection.app.state.keyfile.ring
        if ring.required and not handler.opt.get("public"):
            offered = headers.get("x-api-key")
            if offered is None:
                scheme, _sep, token = headers.get("authorization", "").partition(" ")
                offered = token.strip() if scheme.lower() == "bearer" else None
            entry = ring.match(offered)
            if entry is None:
                raise AuthenticationError("invalid x-api-key")
            remember(connection.scope, entry)
        named = headers.get("anthropic-workspace-id")
        if named is not None and named.strip() != workspace_of(connection):
            # The same answer whether or not the named workspace exists: nothing is disclosed.
            raise PermissionDeniedError(
                f"anthropic-workspace-id: this API key cannot act on workspace {named.strip()!r}"
            )
        # The OpenAI route needs no version; the models routes serve OpenAI's shape without one.
        version = headers.get("anthropic-version")
        if handler.opt.get("dialect") is None and not version:
            raise InvalidRequestError("anthropic-version: header is required")
        if version and handler.opt.get("dialect") in (None, "negotiated"):
            api_version(version)  # an unknown version is a 400 naming the known ones

    return guard
