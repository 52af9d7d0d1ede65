"""Bounded time for generated-input properties.

Against a slow target, hypothesis would keep sending examples, then keep sending shrunk ones
to minimise a failure: minutes per property (31 minutes for one real peer). A CI gate needs a
bound, so each generated property runs its examples within a wall-clock budget (the profile's
`generated_budget_seconds`); the `ci` and `default` hypothesis profiles stop at the first
failing example and do not shrink it (hypothesis_profiles.py): that example is the evidence.
Examples past the budget are rejected before anything is sent (`hypothesis.reject`), which
ends the run at once; after a failure nothing is rejected, so hypothesis can replay the
failing example for the report. The `deep` profile (nightly fuzzing) has no budget.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, TypeVar

from hypothesis import reject, settings

__all__ = ["Tally", "budgeted"]

F = TypeVar("F", bound=Callable[..., Any])


def _unbounded() -> bool:
    chosen = os.environ.get("PLUMBLINE_HYPOTHESIS_PROFILE") or settings.get_current_profile_name()
    return chosen == "deep"


def budgeted(seconds: float) -> Callable[[F], F]:
    """Decorate the body of a `@given` test (below `@given`) to run within `seconds`."""

    def wrap(test: F) -> F:
        if _unbounded():
            return test
        started: float | None = None
        failed = False

        @functools.wraps(test)
        def run(*args: Any, **kwargs: Any) -> Any:
            nonlocal started, failed
            now = time.monotonic()
            started = now if started is None else started
            if not failed and now - started > seconds:
                reject()  # out of time and nothing failed: no more examples
            try:
                return test(*args, **kwargs)
            except Exception:
                failed = True
                raise

        return run  # type: ignore[return-value]

    return wrap


class Tally:
    """Examples of a generated property judged, and not judged because their answer was cut by
    max_tokens (the costly kind: a whole max_tokens of generation each) or lacked what the rule
    is about (a forced call that never came). When the first `limit` examples could not be
    judged, the target's answers to generated requests are not judgeable here: the rest are
    rejected before anything is sent, and the property is SKIP at once instead of after a
    budget's worth of requests. A property with no example judged is SKIP, never PASS: count
    `judged` only where the rule was applied to something."""

    def __init__(self, limit: int = 2) -> None:
        self.judged = 0
        self.unjudged = 0
        self.limit = limit

    @property
    def hopeless(self) -> bool:
        return self.judged == 0 and self.unjudged >= self.limit

    def next_example(self) -> None:
        """Call first in each example: rejects it (nothing sent) once the property is hopeless."""
        if self.hopeless and not _unbounded():
            reject()

    def skip_reason(self, what: str) -> str:
        if self.hopeless:
            return f"the first {self.unjudged} generated {what} could not be judged, so no more were sent"
        return f"no generated {what} could be judged"
