"""Message Batches in a running server: the store in the data directory and its processor, opened
and closed by the app's lifespan (app.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reference_server.batches.processor import DEFAULT_CONCURRENCY, DEFAULT_TICK_S, BatchProcessor, Clock
from reference_server.batches.store import BatchStore
from reference_server.catalog import ModelCatalog
from reference_server.errors import NotFoundError
from reference_server.serving import MessagesService

__all__ = ["DATABASE_NAME", "Batches", "open_batches"]

# In the data directory (next to the thinking signing key), with a `batches-<model>.lock` per
# served model (processor.py).
DATABASE_NAME = "batches.sqlite3"


@dataclass(frozen=True, slots=True)
class Batches:
    """What the batch endpoints use: the store and the processor (whose clock they share)."""

    store: BatchStore
    processor: BatchProcessor
    catalog: ModelCatalog

    def served_model(self, params: dict[str, Any]) -> str:
        """The served model that runs a batch request: the card its model resolves to here; for
        a model this server does not serve (or none), this server's own, so that a server like
        it answers the request as this one would (a not_found_error, or the validation error)."""
        name = params.get("model")
        if isinstance(name, str):
            with contextlib.suppress(NotFoundError):
                return self.catalog.resolve(name).id
        return self.catalog.cards()[0].id

    def now(self) -> float:
        """The processor's clock (Unix seconds), so that expiry and timestamps agree."""
        return self.processor.clock()

    async def aclose(self) -> None:
        """Stop processing (running requests stay pending) and close the database."""
        await self.processor.aclose()
        await asyncio.to_thread(self.store.close)


async def open_batches(
    data_dir: Path,
    service: MessagesService,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    clock: Clock = time.time,
    tick: float | None = None,
) -> Batches:
    """Open `data_dir`'s batch database and start processing it on the running loop."""
    store = await asyncio.to_thread(BatchStore, data_dir / DATABASE_NAME)
    processor = BatchProcessor(
        store,
        service,
        lock_dir=data_dir,
        models=[card.id for card in service.catalog.cards()],
        concurrency=concurrency,
        clock=clock,
        tick=DEFAULT_TICK_S if tick is None else tick,
    )
    processor.start()
    return Batches(store, processor, service.catalog)
