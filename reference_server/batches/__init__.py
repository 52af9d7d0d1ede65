"""Message Batches: the six endpoints, a SQLite store that survives a crash, and a processor that
runs batch requests on the interactive engine at background priority."""

from __future__ import annotations

from .processor import BATCH_PRIORITY, BatchProcessor
from .routes import batch_route_handlers
from .runtime import Batches, open_batches
from .store import BatchStore

__all__ = [
    "BATCH_PRIORITY",
    "BatchProcessor",
    "BatchStore",
    "Batches",
    "batch_route_handlers",
    "open_batches",
]
