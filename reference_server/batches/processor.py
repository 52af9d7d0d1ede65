"""Runs the requests of Message Batches in the background, on the engine that serves interactive
requests, and writes each result durably.

One asyncio task, started in the app's lifespan, loops: settle batches being canceled or past
their expiry, then start pending requests up to `concurrency` at a time. Each request takes the
path of `POST /v1/messages` without streaming (`MessagesService.prepare`, `start`, `create`:
the same validation under the create call's `anthropic-version`, model and answer; the same
text as the same request sent alone, since sampling is seeded per request), with the engine's
background priority: interactive requests are prefilled first and always find a decode row
(engine/batching.py). Its result is written in one transaction with the batch's counts; the
last result ends the batch.

What a crash can do: a request that was running has no result, so it is still pending and runs
again after the restart; a written result is never run again (writes only replace `pending`).

Several servers may share one data directory, serving the same model or different ones. Each
request names the served model that runs it (store.py), and for each model only the server
holding its lock file `batches-<model>.lock` processes its requests: a request never reaches a
server that does not serve its model. Servers of the same model take over from each other within
a tick when the holder exits; a request whose model no server serves waits, and expires with its
batch after 24 hours. Every lock holder settles cancellations and expiry (idempotent writes).

The clock is injectable (`clock`, Unix seconds): expiry after 24 hours is tested by moving it.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import logging
import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

from reference_server.batches.store import BatchStore, PendingRequest, ResultState
from reference_server.batches.validation import read_params
from reference_server.engine.base import BACKGROUND_PRIORITY_MAX
from reference_server.engine.errors import EngineClosedError
from reference_server.errors import APIError, InternalServerError, OverloadedError, error_body
from reference_server.ids import new_request_id
from reference_server.serving import MessagesService
from reference_server.settings import DEFAULT_BATCH_CONCURRENCY

__all__ = ["BATCH_PRIORITY", "DEFAULT_CONCURRENCY", "DEFAULT_TICK_S", "BatchProcessor", "Clock", "lock_name"]

log = logging.getLogger(__name__)

Clock = Callable[[], float]
# The engine priority of batch requests: background (engine/base.py).
BATCH_PRIORITY = BACKGROUND_PRIORITY_MAX
DEFAULT_CONCURRENCY = DEFAULT_BATCH_CONCURRENCY  # requests generating at once (settings.py)
# Seconds between checks for expiry, cancellation by another process and the lock.
DEFAULT_TICK_S = 1.0
# Seconds (of the processor's clock) between looks for batches whose results are due to archive.
ARCHIVE_CHECK_S = 60.0


class BatchProcessor:
    """Processes pending batch requests with `service` (see the module docstring)."""

    def __init__(
        self,
        store: BatchStore,
        service: MessagesService,
        *,
        lock_dir: Path,
        models: Sequence[str],
        concurrency: int = DEFAULT_CONCURRENCY,
        clock: Clock = time.time,
        tick: float = DEFAULT_TICK_S,
    ) -> None:
        """Process the requests of `store` for the served `models`; a lock file per model in
        `lock_dir` elects one processor per model and database."""
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.store = store
        self.service = service
        self.concurrency = concurrency
        self.clock = clock
        self.tick = tick
        self._lock_paths = {model: lock_dir / lock_name(model) for model in models}
        self._lock_fds: dict[str, int] = {}  # model -> its lock file, held
        self._wake = asyncio.Event()
        self._running: dict[tuple[int, int], asyncio.Task[None]] = {}
        self._loop_task: asyncio.Task[None] | None = None
        self._archive_checked: float | None = None
        self._closing = False

    @property
    def leader(self) -> bool:
        """True when this processor holds a model's lock and so runs that model's requests."""
        return bool(self._lock_fds)

    @property
    def processed_models(self) -> frozenset[str]:
        """The models whose requests this processor runs (those whose lock it holds)."""
        return frozenset(self._lock_fds)

    @property
    def running(self) -> int:
        """Requests being generated now."""
        return len(self._running)

    def start(self) -> None:
        """Start the background loop (on the running event loop)."""
        if self._loop_task is None:
            self._loop_task = asyncio.get_running_loop().create_task(self._loop(), name="batch-processor")

    def wake(self) -> None:
        """Look at the database now (a batch was created or canceled)."""
        self._wake.set()

    async def aclose(self) -> None:
        """Stop: running requests are abandoned without a result (they run again after a restart)."""
        task, self._loop_task = self._loop_task, None
        self._closing = True  # the loop also stops by itself, should a cancellation be lost
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._abandon(list(self._running.values()))
        for fd in self._lock_fds.values():
            os.close(fd)  # releases the lock
        self._lock_fds.clear()

    async def _loop(self) -> None:
        while not self._closing:
            self._wake.clear()
            try:
                for model, path in self._lock_paths.items():
                    if model not in self._lock_fds and (fd := _try_lock(path)) is not None:
                        self._lock_fds[model] = fd
                if self._lock_fds:
                    await self._settle()
                    await self._fill()
            except Exception:  # a failing database must not end processing for good
                log.exception("batch processing failed; retrying")
            # Not asyncio.wait_for: before Python 3.12 it can swallow a cancellation that arrives
            # as the wait completes (the stop would then hang).
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.tick):
                    await self._wake.wait()

    async def _settle(self) -> None:
        """End batches being canceled (pending requests `canceled`) or expired (`expired`); their
        running requests are interrupted first."""
        now = self.clock()
        for seq, state in await asyncio.to_thread(self.store.due, now=now):
            await self._abandon([task for key, task in self._running.items() if key[0] == seq])
            await asyncio.to_thread(self.store.settle, seq, state, now=now)
        checked = self._archive_checked
        if checked is None or not 0 <= now - checked < ARCHIVE_CHECK_S:
            self._archive_checked = now
            await asyncio.to_thread(self.store.archive, now=now)

    async def _fill(self) -> None:
        free = self.concurrency - len(self._running)
        if free <= 0:
            return
        found = await asyncio.to_thread(
            self.store.pending, free, skip=list(self._running), models=self.processed_models
        )
        for request in found:
            task = asyncio.get_running_loop().create_task(self._process(request))
            self._running[request.key] = task

    async def _abandon(self, tasks: list[asyncio.Task[None]]) -> None:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _process(self, request: PendingRequest) -> None:
        try:
            outcome = await self._answer(request)
            if outcome is not None:
                state, result = outcome
                await asyncio.to_thread(self.store.record, request.key, state, result, now=self.clock())
        except asyncio.CancelledError:
            raise
        except Exception:  # e.g. the database; the request stays pending and is tried again
            log.exception("batch request %s/%s failed", request.batch_id, request.custom_id)
            await asyncio.sleep(self.tick)
        finally:
            self._running.pop(request.key, None)
            self._wake.set()

    async def _answer(self, request: PendingRequest) -> tuple[ResultState, str] | None:
        """The request's result, as `POST /v1/messages` would answer it; None to try again later."""
        service = self.service
        try:
            params = read_params(request.params)
            prepared = await service.prepare(params, request.betas, request.api_version, request.workspace)
            prepared = replace(prepared, request=replace(prepared.request, priority=BATCH_PRIORITY))
            generation = await service.start(prepared)
            try:
                message = await service.create(prepared, generation)
            finally:
                await generation.aclose()
        except OverloadedError as exc:  # the engine is full: wait as a client would, then retry
            await asyncio.sleep(float(exc.headers.get("retry-after", 1)))
            return None
        except EngineClosedError:  # shutting down: no result, it runs again after the restart
            await asyncio.sleep(self.tick)  # (and no busy loop should the engine have died)
            return None
        except APIError as exc:
            return "errored", _errored(exc)
        except Exception:
            log.exception("batch request %s/%s failed", request.batch_id, request.custom_id)
            return "errored", _errored(InternalServerError("Internal server error"))
        result = {"type": "succeeded", "message": message.model_dump(mode="json")}
        return "succeeded", json.dumps(result, ensure_ascii=False, separators=(",", ":"))


def _errored(error: APIError) -> str:
    """An `errored` result: the error envelope the Messages API would have answered."""
    envelope = error_body(error, new_request_id()).model_dump(mode="json")
    return json.dumps({"type": "errored", "error": envelope}, ensure_ascii=False, separators=(",", ":"))


def lock_name(model: str) -> str:
    """The lock file of a served model's batch requests (its id, made safe for a file name)."""
    return f"batches-{re.sub(r'[^A-Za-z0-9._-]', '_', model)}.lock"


def _try_lock(path: Path) -> int | None:
    """The open lock file, locked for this process; None while another process holds it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return None
    return fd
