"""Fixtures shared by the property modules (the target itself comes from the plugin)."""

from __future__ import annotations

from typing import Any

import pytest

from conformance.target import Target


@pytest.fixture(scope="session")
def model_info(target: Target) -> dict[str, Any] | None:
    """The target's ModelInfo for the model under test, or None when it has none."""
    response = target.request("GET", f"/v1/models/{target.model}")
    if response.status_code != 200:
        return None
    try:
        info = response.json()
    except ValueError:
        return None
    return info if isinstance(info, dict) else None
