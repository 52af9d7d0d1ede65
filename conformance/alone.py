"""A property judged again alone: one that timed out while other workers' properties loaded the
target gets a second try with the target to itself, before its timeout can be a FAIL.

Workers (`plumbline --jobs N`) share two lock files in the run's context directory (fcntl
locks, one open file each per process): every property runs holding the `main` lock shared; a
second try holds it exclusively, so it starts once the properties running elsewhere have
finished. The `gate` lock keeps new properties from starting meanwhile (a pending exclusive
lock would otherwise wait for ever behind a stream of shared ones): a property takes the gate
for a moment before its shared lock, a second try holds it throughout.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

__all__ = ["AloneLock"]


class AloneLock:
    """The workers' shared `main` lock and its `gate`, in `directory`."""

    def __init__(self, directory: Path) -> None:
        self._main: IO[bytes] = (directory / "alone.lock").open("ab")
        self._gate: IO[bytes] = (directory / "alone.gate").open("ab")

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Held while a property runs beside others."""
        with self._locked(self._gate, fcntl.LOCK_EX):
            fcntl.flock(self._main, fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._main, fcntl.LOCK_UN)

    @contextmanager
    def alone(self) -> Iterator[None]:
        """From inside `shared()`: the target to this process alone, then shared again."""
        fcntl.flock(self._main, fcntl.LOCK_UN)
        with self._locked(self._gate, fcntl.LOCK_EX):
            fcntl.flock(self._main, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(self._main, fcntl.LOCK_SH)  # a conversion: never unlocked in between

    @staticmethod
    @contextmanager
    def _locked(handle: IO[bytes], mode: int) -> Iterator[None]:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)

    def close(self) -> None:
        self._main.close()
        self._gate.close()
