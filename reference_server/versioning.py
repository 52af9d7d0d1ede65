"""The two values of `anthropic-version` and what each changes in a Messages request.

Under `2023-06-01` a request is served as it always was. Under `2026-10-21` (what the official
clients send by default: api/versioning, api/migration-2026-10-21), on create, count_tokens and
each request of a batch created with it:
- `temperature`, `top_p` and `top_k` are removed: sending one is a 400, even at its default
  value; generation samples with the defaults (temperature 1.0);
- a `document` block placed directly in an `assistant` message is a 400 (one nested in another
  block, such as a web fetch result Claude returned, is not);
- a `text` block with a non-empty `citations` array in a `user` message, directly or inside a
  `search_result` block, is a 400 (citations on assistant text sent back, and
  `citations: {"enabled": true}` on documents and search results, are not).

A missing header is the app's guard's 400 (app.py); an unknown value is a 400 naming the known
ones, on every Anthropic route (the guard reads it with `api_version`).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Final, Literal

from reference_server.errors import InvalidRequestError
from reference_server.protocol import (
    DocumentBlockParam,
    MessageCreateParams,
    PromptParams,
    SearchResultBlockParam,
    TextBlockParam,
    ToolResultBlockParam,
)

__all__ = [
    "API_VERSIONS",
    "CURRENT_VERSION",
    "LEGACY_VERSION",
    "SAMPLING_FIELDS",
    "ApiVersion",
    "api_version",
    "check_version_rules",
]

ApiVersion = Literal["2023-06-01", "2026-10-21"]
LEGACY_VERSION: Final = "2023-06-01"
CURRENT_VERSION: Final = "2026-10-21"
API_VERSIONS: Final[tuple[ApiVersion, ...]] = (LEGACY_VERSION, CURRENT_VERSION)
SAMPLING_FIELDS: Final = ("temperature", "top_p", "top_k")


def api_version(header: str | None) -> ApiVersion:
    """The version a request's `anthropic-version` header names. None (no header: the routes
    the guard lets through without one, and callers inside the server) keeps 2023-06-01's
    rules; an unknown value is a 400 naming the known ones (never served as a guess: a client
    that names a version expects its rules)."""
    if header is None:
        return LEGACY_VERSION
    value = header.strip()
    for known in API_VERSIONS:
        if value == known:
            return known
    raise InvalidRequestError(
        f"anthropic-version: unknown version {value!r}; this server serves {' and '.join(API_VERSIONS)}"
    )


def check_version_rules(params: PromptParams, version: ApiVersion) -> None:
    """Refuse what `version` removed from `params` (a 400 naming the field); nothing under
    2023-06-01."""
    if version == LEGACY_VERSION:
        return
    if isinstance(params, MessageCreateParams):
        _check_sampling(params)
    for index, message in enumerate(params.messages):
        if isinstance(message.content, str):
            continue
        for position, block in enumerate(message.content):
            path = f"messages.{index}.content.{position}"
            if message.role == "assistant" and isinstance(block, DocumentBlockParam):
                raise InvalidRequestError(
                    f"{path}: document blocks cannot be placed directly in assistant messages in"
                    f" anthropic-version {CURRENT_VERSION}; send the document in a user message"
                )
            if message.role == "user":
                _check_user_citations(block, path)


def _check_sampling(params: MessageCreateParams) -> None:
    """The removed sampling fields. A key sent with null is refused too: the field no longer
    exists in this version (the API answers it with its unknown-field error), and a client that
    sends null means the default, which omitting the key gives."""
    for name in SAMPLING_FIELDS:
        if name in params.model_fields_set:
            raise InvalidRequestError(
                f"{name}: not supported in anthropic-version {CURRENT_VERSION} (removed; requests"
                f" sample with the defaults); send anthropic-version: {LEGACY_VERSION} to set it"
            )


def _check_user_citations(block: object, path: str) -> None:
    """A user turn's text may not carry citations: on its own, or in the content of a search
    result (one in the user message, or in a tool result's content there)."""
    if isinstance(block, TextBlockParam) and block.citations:
        raise _user_citations(f"{path}.citations")
    if isinstance(block, SearchResultBlockParam):
        for inner, text in enumerate(block.content):
            if text.citations:
                raise _user_citations(f"{path}.content.{inner}.citations")
    if isinstance(block, ToolResultBlockParam) and isinstance(block.content, list):
        for where in _cited_search_result_texts(block.content, f"{path}.content"):
            raise _user_citations(where)


def _cited_search_result_texts(items: list[dict[str, Any]], path: str) -> Iterator[str]:
    """The paths of the cited texts of the search results among a tool result's content (raw
    dicts: validation.py reads them later)."""
    for position, item in enumerate(items):
        if not isinstance(item, dict) or item.get("type") != "search_result":
            continue
        content = item.get("content")
        for inner, text in enumerate(content if isinstance(content, list) else ()):
            if isinstance(text, dict) and text.get("citations"):
                yield f"{path}.{position}.content.{inner}.citations"


def _user_citations(path: str) -> InvalidRequestError:
    return InvalidRequestError(
        f"{path}: text blocks in user messages cannot carry citations in anthropic-version"
        f" {CURRENT_VERSION} (citations belong to the assistant's answers); send the text without"
        " them, or cite a document with citations enabled"
    )
