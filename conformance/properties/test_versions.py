"""VER-*: the two API versions. `anthropic-version: 2026-10-21` (what every official client
sends now) removes the sampling parameters and refuses two misplaced content shapes that
2023-06-01 accepts; a server that claims the API honours the header it is sent.

Each property sends both versions on purpose, whatever version the run judges
(`conformance/generating/versions.py` builds the requests).
"""

from __future__ import annotations

from typing import Any

from conformance.catalogue import Level, prop
from conformance.generating.batches import BATCHES, batch_request, id_of, result_of, results, wait_ended
from conformance.generating.versions import (
    assistant_document_body,
    nested_document_body,
    refuses_sampling,
    user_citations_body,
    versioned,
)
from conformance.judging.checks import (
    Cases,
    expect_equal,
    expect_error,
    expect_status,
    json_object,
    not_judged,
    read,
)
from conformance.wire.drivers import expect_message, message_body
from conformance.wire.target import CURRENT_VERSION, LEGACY_VERSION, Target

VERSIONING = "https://platform.claude.com/docs/en/api/versioning"
MIGRATION = "https://platform.claude.com/docs/en/api/migration-2026-10-21"
COUNT = "/v1/messages/count_tokens"

# Each sampling field at a value the newest models take too (their defaults; top_k has none),
# so that a 400 under 2026-10-21 is the version's, and under 2023-06-01 an answer is due.
DEFAULT_VALUES = (("temperature", 1.0), ("top_p", 0.99), ("top_k", 40))


def _refused(target: Target, path: str, body: dict[str, object]) -> None:
    response = target.request("POST", path, json_body=body, headers=versioned(target, CURRENT_VERSION))
    expect_error(response, 400, "invalid_request_error")


def _answered(target: Target, path: str, body: dict[str, object]) -> None:
    response = target.request("POST", path, json_body=body, headers=versioned(target, LEGACY_VERSION))
    if path == COUNT:
        expect_status(response, 200)
        return
    if response.status_code == 400 and refuses_sampling(response):
        not_judged(
            "the model takes only its default sampling values (as the API documents for the newest models)"
        )
    expect_message(response)


@prop(
    "VER-001",
    Level.MUST,
    "2026-10-21 refuses temperature, top_p and top_k; 2023-06-01 takes them",
    url=f"{MIGRATION}",
    requirement="Under anthropic-version 2026-10-21 a request that sends temperature, top_p or top_k "
    "(even at the default value) is a 400 invalid_request_error, on create and on count_tokens; "
    "under 2023-06-01 the same request is answered.",
    source='docs: api/migration-2026-10-21; api/versioning — "temperature, top_p, and top_k are '
    "removed. Requests that include any of these parameters return a 400 error, even at the default "
    'value"; requests on 2023-06-01 keep working as before',
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "param:anthropic-version",
        "request:temperature",
        "request:top_p",
        "request:top_k",
        "error:invalid_request_error",
    ),
)
def test_ver_001_sampling_removed(target: Target) -> None:
    cases = Cases()
    for field, value in DEFAULT_VALUES:
        body = {**message_body(target, max_tokens=4), field: value}
        counted = {k: v for k, v in body.items() if k != "max_tokens"}
        with cases.case(f"{field} {value} under {CURRENT_VERSION}"):
            _refused(target, "/v1/messages", body)
        with cases.case(f"{field} {value} to count_tokens under {CURRENT_VERSION}"):
            _refused(target, COUNT, counted)
        with cases.case(f"{field} {value} under {LEGACY_VERSION}"):
            _answered(target, "/v1/messages", body)
    cases.check()


@prop(
    "VER-002",
    Level.MUST,
    "2026-10-21 refuses a document in an assistant turn; 2023-06-01 takes it",
    url=f"{MIGRATION}",
    requirement="Under anthropic-version 2026-10-21 a document block placed directly in an "
    "assistant message is a 400 invalid_request_error, on create and on count_tokens; under "
    "2023-06-01 the same request is answered.",
    source='docs: api/migration-2026-10-21 — "document blocks placed directly in assistant messages '
    'now return a 400 error"; nested documents (a web fetch result) are still accepted',
    requires=("documents",),
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "param:anthropic-version",
        "block:document",
        "error:invalid_request_error",
    ),
)
def test_ver_002_assistant_document(target: Target) -> None:
    body = assistant_document_body(target)
    cases = Cases()
    with cases.case(f"create under {CURRENT_VERSION}"):
        _refused(target, "/v1/messages", body)
    with cases.case(f"count_tokens under {CURRENT_VERSION}"):
        _refused(target, COUNT, {k: v for k, v in body.items() if k != "max_tokens"})
    with cases.case(f"create under {LEGACY_VERSION}"):
        _answered(target, "/v1/messages", body)
    cases.check()


@prop(
    "VER-003",
    Level.MUST,
    "2026-10-21 refuses citations in a user turn, and keeps the others",
    url=f"{MIGRATION}",
    requirement="Under anthropic-version 2026-10-21 a text block with a non-empty citations array "
    "in a user message, directly or inside a search_result block, is a 400 invalid_request_error; "
    "citations on assistant text sent back, and citations.enabled on a document, are still "
    "answered; under 2023-06-01 the user turn's citations are answered too.",
    source='docs: api/migration-2026-10-21 — "text blocks with a non-empty citations array in user '
    'messages, directly or inside search_result blocks, return a 400 error"; citations on assistant '
    "text and citations: {enabled: true} on documents are unaffected",
    requires=("documents", "citations"),
    covers=(
        "endpoint:POST /v1/messages",
        "param:anthropic-version",
        "block:search_result",
        "error:invalid_request_error",
    ),
)
def test_ver_003_user_citations(target: Target) -> None:
    cases = Cases()
    with cases.case(f"citations in a user text block under {CURRENT_VERSION}"):
        _refused(target, "/v1/messages", user_citations_body(target))
    with cases.case(f"citations inside a user search_result under {CURRENT_VERSION}"):
        _refused(target, "/v1/messages", user_citations_body(target, in_search_result=True))
    with cases.case(f"citations on assistant text, citations.enabled on a document, under {CURRENT_VERSION}"):
        body = nested_document_body(target)
        response = target.request(
            "POST", "/v1/messages", json_body=body, headers=versioned(target, CURRENT_VERSION)
        )
        expect_message(response)
    with cases.case(f"citations in a user text block under {LEGACY_VERSION}"):
        _answered(target, "/v1/messages", user_citations_body(target))
    cases.check()


def _batch_results(target: Target, version: str) -> dict[str, dict[str, Any]]:
    """A batch created under `version`: one request with `temperature: 1.0` (the default value)
    and one without; its results by custom_id."""
    sampled = batch_request(target, "plumbline-temperature")
    sampled["params"] = {**sampled["params"], "temperature": 1.0}
    requests = [sampled, batch_request(target, "plumbline-plain")]
    response = target.request(
        "POST", BATCHES, json_body={"requests": requests}, headers=versioned(target, version)
    )
    expect_status(response, 200)
    ended = wait_ended(target, id_of(json_object(response, "the MessageBatch")), what=f"the {version} batch")
    lines = results(target, id_of(ended)).lines
    return {
        custom_id: result_of(lines, custom_id) for custom_id in ("plumbline-temperature", "plumbline-plain")
    }


def _result_type(result: dict[str, Any], where: str, wanted: str) -> None:
    expect_equal(read(result, "type", str, where=where), wanted, f"{where}: type", reason=f"not-{wanted}")


@prop(
    "VER-004",
    Level.MUST,
    "A batch created under 2026-10-21 runs each request by its rules",
    url=f"{MIGRATION}",
    requirement="Every request of a Message Batch created with anthropic-version 2026-10-21 follows "
    "that version: one that sends temperature (even 1.0) comes back errored with an "
    "invalid_request_error while the others succeed; in a batch created under 2023-06-01 the same "
    "request succeeds.",
    source='docs: api/migration-2026-10-21 — the changes apply "to the Messages API, token counting, '
    'and each request in a Message Batch created with the new version"',
    requires=("batches",),
    covers=(
        "endpoint:POST /v1/messages/batches",
        "param:anthropic-version",
    ),
)
def test_ver_004_batches_follow_their_version(target: Target) -> None:
    cases = Cases()
    with cases.case(f"a batch created under {CURRENT_VERSION}"):
        found = _batch_results(target, CURRENT_VERSION)
        sampled, plain = found["plumbline-temperature"], found["plumbline-plain"]
        where = "the result of the request with temperature"
        _result_type(sampled, where, "errored")
        expect_equal(
            read(sampled, "error.error.type", str, where=where),
            "invalid_request_error",
            f"{where}: error.error.type",
        )
        _result_type(plain, "the result of the request without it", "succeeded")
    with cases.case(f"a batch created under {LEGACY_VERSION}"):
        sampled = _batch_results(target, LEGACY_VERSION)["plumbline-temperature"]
        _result_type(sampled, "the result of the request with temperature", "succeeded")
    cases.check()
