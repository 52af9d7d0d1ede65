"""What the console shows while a run goes on: each verdict line in catalogue order, whatever
order the workers finish in, and a live bar (done/total, elapsed, time left) on a terminal, or a
plain progress line now and then in a CI log."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from conformance.judging.verdicts import Result

__all__ = ["RunProgress"]

# In a CI log (no terminal): a line at most this often.
LOG_EVERY_S = 20.0


class RunProgress:
    """Results in, verdict lines out in the order of `ids`; `show(result)` prints one."""

    def __init__(self, console: Console, ids: Sequence[str], show: Callable[[Result], None]) -> None:
        self.console = console
        self.order = list(ids)
        self.show = show
        self.waiting: dict[str, Result] = {}
        self.next = 0
        self.done = 0
        self.started = time.monotonic()
        self.logged = self.started
        self.bar: Progress | None = None
        self.task = None
        if console.is_terminal and self.order:
            self.bar = Progress(
                TextColumn("judging"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("left"),
                TimeRemainingColumn(),
                console=console,
                transient=True,
            )
            self.task = self.bar.add_task("judging", total=len(self.order))
            self.bar.start()

    def record(self, result: Result) -> None:
        self.waiting[result.property.id] = result
        self.done += 1
        if result.property.id not in self.order:  # not in the collected plan: shown at once
            self.order.insert(self.next, result.property.id)
        while self.next < len(self.order) and self.order[self.next] in self.waiting:
            self.show(self.waiting.pop(self.order[self.next]))
            self.next += 1
        if self.bar is not None and self.task is not None:
            self.bar.update(self.task, completed=self.done)
        elif time.monotonic() - self.logged >= LOG_EVERY_S and self.done < len(self.order):
            self.logged = time.monotonic()
            self.console.print(f"[dim]{self.line()}[/]")

    def line(self) -> str:
        elapsed = time.monotonic() - self.started
        total = len(self.order)
        left = elapsed / self.done * (total - self.done) if self.done else 0.0
        return f"progress: {self.done}/{total} judged, {_clock(elapsed)} elapsed, about {_clock(left)} left"

    def close(self) -> None:
        for pid in self.order[self.next :]:  # anything held back (a worker lost) is shown now
            if pid in self.waiting:
                self.show(self.waiting.pop(pid))
        for result in self.waiting.values():
            self.show(result)
        self.waiting.clear()
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def _clock(seconds: float) -> str:
    minutes, rest = divmod(int(seconds), 60)
    return f"{minutes}m{rest:02d}s" if minutes else f"{rest}s"
