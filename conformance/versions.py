"""The values of `anthropic-version` the API documents (api/versioning): a leaf module, so the
CLI can name them without importing the SDK. A run judges the target at one of them: by
default the one the installed SDK sends (`wire.target.API_VERSION`), as every official client
does."""

from __future__ import annotations

__all__ = ["API_VERSIONS", "CURRENT_VERSION", "LEGACY_VERSION"]

API_VERSIONS = ("2023-06-01", "2026-10-21")
LEGACY_VERSION, CURRENT_VERSION = API_VERSIONS
