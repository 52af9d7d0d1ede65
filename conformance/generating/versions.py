"""What the two API versions change in a request (api/versioning, api/migration-2026-10-21),
for the properties that send one version's request on purpose (VER-*, MSG-018).

Under 2026-10-21: `temperature`, `top_p` and `top_k` are removed (a 400, even at the default
value); a `document` block directly in an `assistant` turn is a 400 (nested ones, such as a
web fetch result, are not); a `text` block with non-empty `citations` in a `user` turn,
directly or inside a `search_result`, is a 400 (citations on assistant text, and
`citations: {enabled: true}` on documents, are not). Under 2023-06-01 all of them are accepted.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "SAMPLING_FIELDS",
    "assistant_document_body",
    "nested_document_body",
    "refuses_sampling",
    "user_citations_body",
    "versioned",
]

SAMPLING_FIELDS = ("temperature", "top_p", "top_k")
DOCUMENT_TEXT = "The lighthouse at Cape Plumb was built in 1868."
QUOTE = "built in 1868"


def versioned(target: Target, version: str) -> dict[str, str]:
    """The run's raw headers, with `anthropic-version: version`."""
    return {**target.headers(), "anthropic-version": version}


def refuses_sampling(response: httpx.Response) -> bool:
    """A 400 invalid_request_error whose message names a sampling field: the refusal the
    newest models give a value other than their default (never raises)."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        return False
    if not isinstance(error, dict) or error.get("type") != "invalid_request_error":
        return False
    words = str(error.get("message", ""))
    return response.status_code == 400 and any(field in words for field in SAMPLING_FIELDS)


def _document(**more: Any) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "text", "media_type": "text/plain", "data": DOCUMENT_TEXT},
        "title": "Cape Plumb",
        **more,
    }


def assistant_document_body(target: Target) -> dict[str, Any]:
    """A `document` block placed directly in an `assistant` turn."""
    return message_body(
        target,
        max_tokens=4,
        messages=[
            {"role": "user", "content": "Show me the record."},
            {"role": "assistant", "content": [_document()]},
            {"role": "user", "content": "When was it built?"},
        ],
    )


def _citation() -> dict[str, Any]:
    start = DOCUMENT_TEXT.index(QUOTE)
    return {
        "type": "char_location",
        "cited_text": QUOTE,
        "document_index": 0,
        "document_title": "Cape Plumb",
        "start_char_index": start,
        "end_char_index": start + len(QUOTE),
    }


def user_citations_body(target: Target, *, in_search_result: bool = False) -> dict[str, Any]:
    """A `text` block with a non-empty `citations` array in a `user` turn: directly, or in the
    content of a `search_result` block."""
    text = {"type": "text", "text": "It was built in 1868.", "citations": [_citation()]}
    block: dict[str, Any] = text
    if in_search_result:
        block = {
            "type": "search_result",
            "source": "https://example.com/cape-plumb",
            "title": "Cape Plumb",
            "content": [text],
        }
    return message_body(
        target,
        max_tokens=4,
        messages=[
            {"role": "user", "content": [_document(), block, {"type": "text", "text": "Is that right?"}]}
        ],
    )


def nested_document_body(target: Target) -> dict[str, Any]:
    """What 2026-10-21 still accepts: citations on assistant text sent back, and
    `citations: {enabled: true}` on a user document."""
    answer = {"type": "text", "text": "It was built in 1868.", "citations": [_citation()]}
    return message_body(
        target,
        max_tokens=4,
        messages=[
            {
                "role": "user",
                "content": [_document(citations={"enabled": True}), {"type": "text", "text": "When?"}],
            },
            {"role": "assistant", "content": [answer]},
            {"role": "user", "content": "Thanks. Anything else?"},
        ],
    )


def describe(body: dict[str, Any]) -> str:
    """A short rendering of a request for a note."""
    return json.dumps(body)[:200]
