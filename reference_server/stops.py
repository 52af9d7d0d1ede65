"""Stop-sequence matching over streamed text (pure).

Text is released only once it can no longer be the start of a stop sequence, so a sequence
that spans several deltas (or tokens) is still found and never leaks into the output.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StopScan:
    """Result of feeding text: what may be emitted now, and the sequence hit, if any."""

    text: str
    matched: str | None = None


class StopMatcher:
    """Feed generated text piece by piece; emits safe text and reports the first match."""

    def __init__(self, stop_sequences: Sequence[str]) -> None:
        self._stops = tuple(s for s in stop_sequences if s)
        self._pending = ""
        self.matched: str | None = None

    def feed(self, text: str) -> StopScan:
        if self.matched is not None:
            return StopScan("")
        buffer = self._pending + text
        hit = self._earliest_match(buffer)
        if hit is not None:
            position, stop = hit
            self.matched = stop
            self._pending = ""
            return StopScan(buffer[:position], stop)
        keep = self._held_suffix_length(buffer)
        self._pending = buffer[len(buffer) - keep :]
        return StopScan(buffer[: len(buffer) - keep])

    def flush(self) -> str:
        """At the end of generation, whatever was held back is plain text."""
        rest, self._pending = self._pending, ""
        return "" if self.matched is not None else rest

    def _earliest_match(self, buffer: str) -> tuple[int, str] | None:
        best: tuple[int, str] | None = None
        for stop in self._stops:
            position = buffer.find(stop)
            # Earliest position wins; at the same position the longer sequence wins.
            if position >= 0 and (
                best is None or position < best[0] or (position == best[0] and len(stop) > len(best[1]))
            ):
                best = (position, stop)
        return best

    def _held_suffix_length(self, buffer: str) -> int:
        """Length of the longest suffix of `buffer` that is a proper prefix of a stop."""
        longest = 0
        for stop in self._stops:
            for size in range(min(len(stop) - 1, len(buffer)), longest, -1):
                if buffer.endswith(stop[:size]):
                    longest = size
                    break
        return longest
