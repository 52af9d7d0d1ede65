"""The keys the server holds now: read at start (a bad file stops the start) and again on
SIGHUP, when a bad file keeps the keys held (and says why in the log). The swap is one
assignment: a request in flight keeps the key it was admitted with, none is dropped."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable
from pathlib import Path

from reference_server.workspaces.keys import KeyFileError, KeyRing

__all__ = ["KeyFile"]

log = logging.getLogger("reference_server.workspaces")


class KeyFile:
    def __init__(self, path: Path | None, api_key: str | None) -> None:
        self.path = path
        self.api_key = api_key
        self.ring = self._read()
        # Told of each new ring (the rate limiters drop the buckets of keys no longer held).
        self.listeners: list[Callable[[KeyRing], None]] = []

    def _read(self) -> KeyRing:
        if self.path is None:
            return KeyRing.single(self.api_key)
        return KeyRing.from_file(self.path, self.api_key)

    def reload(self) -> bool:
        """Read the file again; False (the keys held kept) when it cannot be used."""
        try:
            ring = self._read()
        except KeyFileError as exc:
            log.error("keys file not reloaded, the keys held are kept: %s", exc)
            return False
        self.ring = ring
        for listener in self.listeners:
            listener(ring)
        log.info("keys reloaded: %d keys in %d workspaces", len(ring.entries), len(ring.workspaces()))
        return True

    def watch(self) -> bool:
        """Reload on SIGHUP (the running loop's handler); False where signals cannot be taken
        (not the main thread, or not a keys file)."""
        if self.path is None:
            return False
        try:
            asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, self.reload)
        except (RuntimeError, ValueError, NotImplementedError):
            return False
        return True

    def unwatch(self) -> None:
        with contextlib.suppress(RuntimeError, ValueError, NotImplementedError):
            asyncio.get_running_loop().remove_signal_handler(signal.SIGHUP)
