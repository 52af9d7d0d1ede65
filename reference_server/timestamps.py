"""Times as the API writes them: RFC 3339 in UTC with a `Z` (`2026-12-07T16:45:43.123456Z`)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

__all__ = ["rfc3339"]


def rfc3339(seconds: float | None = None) -> str:
    """Unix `seconds` (now when None) as RFC 3339 in UTC."""
    when = time.time() if seconds is None else seconds
    return datetime.fromtimestamp(when, UTC).isoformat().replace("+00:00", "Z")
