"""BATCH-*: Message Batches: the MessageBatch object, request_counts while it runs, the results
file (JSON Lines, one line per request, raw and through the SDK's results_url), an invalid
request errored while the rest succeed, custom_id rules, cancel, delete, the list and its
pagination, the ?beta=true twins, unknown ids, and results equal to the non-batch answers. Each
runs only on a target that serves batches (the profile, or the model's `capabilities.batch`:
conformance/features.py); a target that says it serves them and breaks them fails.

Requests are cheap (conformance/generating/batches.py): a few per batch, max_tokens 8, temperature 0, and
batches a property need not see end are canceled once judged. The properties that read a
finished batch share one, made once per run; every wait is bounded by the profile's
`batch_wait_seconds`. The MessageBatch's schema is BATCH-001's rule and the counts BATCH-002's;
the others read the fields they need.
"""

from __future__ import annotations

import itertools
from typing import Any

import httpx
import pytest

from conformance.catalogue import Level, prop
from conformance.generating.batches import (
    BATCH,
    BATCHES,
    TERMINAL,
    SharedBatch,
    batch_path,
    batch_request,
    cancel_quietly,
    counts_of,
    create,
    id_of,
    invalid_request,
    parse_jsonl,
    result_of,
    results,
    retrieve,
    sdk_batch_call,
    shared_batch,
    status_of,
    wait_ended,
)
from conformance.judging.batch_checks import (
    cancel_created,
    judge_shape,
    list_page,
    page_ids,
    sdk_results,
    skip_if_ended_first,
    walk_list,
)
from conformance.judging.checks import (
    Cases,
    expect,
    expect_equal,
    expect_error,
    expect_id_prefix,
    expect_json,
    expect_no_schema_errors,
    expect_status,
    json_object,
    read,
)
from conformance.judging.schemas import validate_response
from conformance.wire.drivers import create_json
from conformance.wire.target import Target

GUIDE = "build-with-claude/batch-processing"
API = "api"
RESULTS = "GET /v1/messages/batches/{message_batch_id}/results"
BETA = "message-batches-2024-09-24"
UNKNOWN_ID = "msgbatch_plumbline000000000000000000"
ENDPOINT_CREATE = "endpoint:POST /v1/messages/batches"
ENDPOINT_RETRIEVE = "endpoint:GET /v1/messages/batches/{message_batch_id}"
ENDPOINT_RESULTS = "endpoint:GET /v1/messages/batches/{message_batch_id}/results"
ENDPOINT_CANCEL = "endpoint:POST /v1/messages/batches/{message_batch_id}/cancel"
ENDPOINT_DELETE = "endpoint:DELETE /v1/messages/batches/{message_batch_id}"
ENDPOINT_LIST = "endpoint:GET /v1/messages/batches"
BATCH_ID = "param:message_batch_id"


@prop(
    "BATCH-001",
    Level.MUST,
    "A batch is a MessageBatch",
    url=f"{API}/messages/batches/create",
    requirement="Create and retrieve answer a MessageBatch (type 'message_batch', an id, every key "
    "the schema requires); ended_at and results_url are null until processing ends and set once "
    "it has; expires_at is 24 hours after created_at. (The msgbatch_ prefix is BATCH-014's rule.)",
    source="docs and schema: OpenAPI MessageBatch required[...]; SDK types/messages/message_batch.py "
    "docstrings (api/messages/batches/retrieve) — required: [archived_at, cancel_initiated_at, "
    "created_at, ended_at, expires_at, id, processing_status, request_counts, results_url, type];"
    ' ended_at/results_url "Specified only once processing ends"; expires_at "24 hours after '
    'creation"; id: …',
    invariant=73,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, ENDPOINT_RETRIEVE, BATCH_ID),
)
def test_batch_001_message_batch_shape(target: Target) -> None:
    """Creates a batch of two requests (canceled once judged) and retrieves it, then retrieves
    the run's shared batch once it has ended; the property that judges the MessageBatch's schema."""
    response = target.request(
        "POST",
        BATCHES,
        json_body={"requests": [batch_request(target, f"plumbline-shape-{n}") for n in (1, 2)]},
    )
    expect_status(response, 200)
    created = expect_json(response)
    batch_id = id_of(created)
    try:
        judge_shape(created, "the created batch")
        expect(
            status_of(created) in ("in_progress", "ended"),
            "the created batch: processing_status 'in_progress' (processing starts at once)",
            status_of(created),
            reason="batch-state",
        )
        found = target.request("GET", batch_path(batch_id))
        expect(
            found.status_code == 200,
            "HTTP 200: the batch just created, retrieved by its id",
            f"HTTP {found.status_code}: {found.text[:300]}",
            reason="batch-lost",
        )
        again = json_object(found, BATCH)
        judge_shape(again, "the retrieved batch")
        expect_equal(id_of(again), batch_id, "the retrieved batch's id", reason="batch-state")
        expect_equal(again.get("created_at"), created.get("created_at"), "created_at", reason="batch-state")
    finally:
        cancel_quietly(target, batch_id)
    ended = retrieve(target, shared_batch(target).batch_id)
    judge_shape(ended, "an ended batch")
    expect_equal(
        status_of(ended), "ended", "processing_status of a batch that has ended", reason="batch-state"
    )


@prop(
    "BATCH-002",
    Level.MUST,
    "request_counts add up, and terminal counts wait for the end",
    url=f"{API}/messages/batches/retrieve",
    requirement="At every poll the five request_counts add up to the number of requests; each "
    "request counts as processing, and succeeded, errored, canceled and expired stay zero, until "
    "the whole batch has ended (then processing is zero).",
    source="docs: api/messages/batches/retrieve (SDK types/messages/message_batch.py request_counts; "
    'message_batch_request_counts.py) — "Requests start as `processing` and move to one of the '
    "other statuses only once processing of the entire batch ends. The sum of all values always "
    'matches the total number of requests in the batch."; each terminal count: "This is zero '
    "until …",
    invariant=74,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, ENDPOINT_RETRIEVE, BATCH_ID),
)
def test_batch_002_request_counts(target: Target) -> None:
    """Creates a batch of two requests and polls it until it ends; judges the counts of the
    create answer and of every poll."""
    requests = [batch_request(target, f"plumbline-counts-{n}", f"Count to {n}.") for n in (1, 2)]
    polls: list[dict[str, int]] = []

    def judge(batch: dict[str, Any]) -> None:
        counts, status = counts_of(batch), status_of(batch)
        polls.append(counts)
        where = f"request_counts at observation {len(polls)} ({status})"
        expect(
            sum(counts.values()) == len(requests),
            f"{where}: adding up to {len(requests)}",
            counts,
            reason="counts",
        )
        if status != "ended":
            early = {k: counts[k] for k in TERMINAL if counts[k]}
            expect(
                not early,
                f"{where}: terminal counts zero until the batch ends",
                counts,
                reason="counts-early",
            )

    created = create(target, requests)
    batch_id, done = id_of(created), False
    try:
        judge(created)
        ended = wait_ended(target, batch_id, observe=judge)
        done = True
    finally:
        if not done:
            cancel_quietly(target, batch_id)
    expect_equal(counts_of(ended)["processing"], 0, "request_counts.processing once ended", reason="counts")


@prop(
    "BATCH-003",
    Level.MUST,
    "Results are JSON Lines, one line per request",
    url=f"{API}/messages/batches/results",
    requirement="The results of an ended batch are one JSON object per line (no blank line, no "
    "JSON array), each {custom_id, result} valid against the schema with a documented result "
    "type, and every request's custom_id on exactly one line.",
    source="docs and schema: api/messages/batches/results; OpenAPI MessageBatchIndividualResponse "
    "required[custom_id,result]; OpenAPI "
    "paths/~1v1~1messages~1batches~1{message_batch_id}~1results/get/responses/200/content "
    '(application/x-jsonl) — "Streams the results of a Message Batch as a `.jsonl` file. Each '
    "line in the file is a JSON object containing the result of a single request in the Message "
    'Batch."',
    invariant=77,
    requires=("batches",),
    covers=(ENDPOINT_RESULTS, BATCH_ID),
)
def test_batch_003_results_jsonl(target: Target) -> None:
    shared = shared_batch(target)
    got = results(target, shared.batch_id)
    for number, line in enumerate(got.lines, 1):
        errors = validate_response(RESULTS, 200, line, media_type="application/x-jsonl")
        expect_no_schema_errors(errors, f"results line {number}")
    expect(
        sorted(map(str, got.custom_ids)) == sorted(shared.custom_ids),
        f"one line for each of {sorted(shared.custom_ids)}, each once",
        got.custom_ids,
        reason="results-lines",
    )


@prop(
    "BATCH-004",
    Level.MUST,
    "Results are served as application/x-jsonl",
    url=f"{API}/messages/batches/results",
    requirement="The results file is sent with Content-Type application/x-jsonl, the media type "
    "the API reference gives it.",
    source="schema: OpenAPI paths /v1/messages/batches/{message_batch_id}/results get responses 200 — "
    "the one content type of the results is application/x-jsonl",
    invariant=77,
    requires=("batches",),
    covers=(ENDPOINT_RESULTS, BATCH_ID),
)
def test_batch_004_results_content_type(target: Target) -> None:
    response = target.request("GET", batch_path(shared_batch(target).batch_id, "/results"))
    expect_status(response, 200)
    media = response.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    expect(
        media == "application/x-jsonl",
        "Content-Type: application/x-jsonl",
        media or "<none>",
        reason="content-type",
    )


@prop(
    "BATCH-005",
    Level.MUST,
    "An invalid request comes back errored, the rest succeed",
    url=f"{GUIDE}#how-the-message-batches-api-works",
    requirement="Each request's params are validated when it is processed: one the Messages API "
    "would refuse is an `errored` result carrying that error envelope (invalid_request_error), "
    "not a refused batch, and the other requests of the batch succeed.",
    source='docs: build-with-claude/batch-processing#prepare-and-create-your-batch — "Validation of the '
    "`params` object for each message request is performed asynchronously, and validation errors "
    'are returned when processing of the entire batch has ended."',
    invariant=82,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, ENDPOINT_RETRIEVE, ENDPOINT_RESULTS, BATCH_ID),
)
def test_batch_005_invalid_request_errored(target: Target) -> None:
    """A batch of one valid request and one its schema refuses (max_tokens -1: a 400 for /v1/messages)."""
    requests = [batch_request(target, "plumbline-valid"), invalid_request(target, "plumbline-invalid")]
    response = target.request("POST", BATCHES, json_body={"requests": requests})
    expect(
        response.status_code == 200,
        "HTTP 200: the batch accepted (params are validated when each request runs)",
        f"HTTP {response.status_code}: {response.text[:300]}",
        reason="batch-refused",
    )
    ended = wait_ended(target, id_of(json_object(response, BATCH)))
    lines = results(target, id_of(ended)).lines
    bad = result_of(lines, "plumbline-invalid")
    where = "the invalid request's result"
    expect_equal(read(bad, "type", str, where=where), "errored", f"{where}: type", reason="not-errored")
    expect_equal(read(bad, "error.type", str, where=where), "error", f"{where}: error.type (an envelope)")
    expect_equal(
        read(bad, "error.error.type", str, where=where), "invalid_request_error", f"{where}: error.error.type"
    )
    read(bad, "error.error.message", str, where=where)
    good = result_of(lines, "plumbline-valid")
    where = "the valid request's result"
    expect_equal(read(good, "type", str, where=where), "succeeded", f"{where}: type", reason="not-succeeded")
    expect_equal(read(good, "message.type", str, where=where), "message", f"{where}: message.type")
    counts = counts_of(ended)
    expect(
        counts["errored"] == 1 and counts["succeeded"] == 1,
        "request_counts: errored 1, succeeded 1",
        counts,
        reason="counts",
    )


@prop(
    "BATCH-006",
    Level.MUST,
    "custom_id values must be unique and well-formed",
    url=f"{API}/messages/batches/create",
    requirement="A create whose requests repeat a custom_id, whose custom_id does not match "
    "^[a-zA-Z0-9_-]{1,64}$, or that holds no request, is refused with 400 invalid_request_error.",
    source="docs and schema: OpenAPI MessageBatchIndividualRequestParams/properties/custom_id; OpenAPI "
    "CreateMessageBatchParams/properties/requests; SDK types/messages/batch_create_params.py — "
    "custom_id pattern ^[a-zA-Z0-9_-]{1,64}$ (minLength 1, maxLength 64); requests minItems 1, "
    'maxItems 100000; custom_id docstring: "Must be unique for each request within the Message '
    'Batch."',
    invariant=75,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, "error:invalid_request_error"),
)
def test_batch_006_custom_id_rules(target: Target) -> None:
    cases = Cases()
    refused = {
        "a repeated custom_id": [
            batch_request(target, "plumbline-twice"),
            batch_request(target, "plumbline-twice"),
        ],
        "a custom_id with a space and '!'": [batch_request(target, "plumbline twice!")],
        "a custom_id of 65 characters": [batch_request(target, "p" * 65)],
        "no request": [],
    }
    for name, requests in refused.items():
        with cases.case(name):
            response = target.request("POST", BATCHES, json_body={"requests": requests})
            if response.status_code == 200:
                cancel_created(target, response)
            expect_error(response, 400, "invalid_request_error")
    cases.check()


@prop(
    "BATCH-007",
    Level.MUST,
    "Cancel moves a batch to canceling, then ended",
    url=f"{API}/messages/batches/cancel",
    requirement="Canceling a batch in progress answers it with processing_status 'canceling' (or "
    "already 'ended') and cancel_initiated_at set; it then ends, each request succeeded, errored "
    "or canceled, and request_counts.canceled counts the canceled results.",
    source="docs: api/messages/batches/cancel (SDK resources/messages/batches.py cancel docstring); "
    'message_batch.py cancel_initiated_at — "Once cancellation is initiated, the batch enters a '
    "`canceling` state ... The number of canceled requests is specified in `request_counts`. To "
    'determine which requests were canceled, check the individual results"; cancel_initiated_at: '
    "…",
    invariant=78,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, ENDPOINT_CANCEL, ENDPOINT_RETRIEVE, ENDPOINT_RESULTS, BATCH_ID),
)
def test_batch_007_cancel(target: Target) -> None:
    """Creates a batch of sixteen requests of 64 tokens and cancels it at once: long enough to be
    still running when the cancel comes, even on a fast target, and a correct target stops it."""
    requests = [
        batch_request(target, f"plumbline-cancel-{n}", f"Count to {n}.", max_tokens=64) for n in range(1, 17)
    ]
    batch_id, done = id_of(create(target, requests)), False
    try:
        response = target.request("POST", batch_path(batch_id, "/cancel"))
        if response.status_code != 200:
            skip_if_ended_first(target, batch_id)
        expect_status(response, 200)
        answer = json_object(response, BATCH)
        status = status_of(answer)
        initiated = read(answer, "cancel_initiated_at", str, where="the cancel answer", nullable=True)
        if status == "ended" and initiated is None:
            pytest.skip("the batch ended before the cancel reached it: nothing was left to cancel")
        expect(
            status in ("canceling", "ended"),
            "the cancel answer: processing_status 'canceling'",
            status,
            reason="cancel-ignored",
        )
        expect(
            initiated is not None,
            "the cancel answer: cancel_initiated_at set",
            initiated,
            reason="cancel-ignored",
        )
        ended = wait_ended(target, batch_id, what="the canceled batch")
        done = True
    finally:
        if not done:
            cancel_quietly(target, batch_id)
    read(ended, "cancel_initiated_at", str, where="the canceled batch, ended")
    lines = results(target, batch_id).lines
    kinds = {
        cid: read(result_of(lines, cid), "type", str, where=cid) for cid in (r["custom_id"] for r in requests)
    }
    expect(
        set(kinds.values()) <= {"succeeded", "errored", "canceled"},
        "each request of a canceled batch succeeded, errored or canceled",
        kinds,
        reason="cancel-results",
    )
    canceled = sum(kind == "canceled" for kind in kinds.values())
    expect_equal(
        counts_of(ended)["canceled"],
        canceled,
        "request_counts.canceled (the canceled results)",
        reason="counts",
    )


@prop(
    "BATCH-008",
    Level.MUST,
    "Delete is refused before the end and works after it",
    url=f"{API}/messages/batches/delete",
    requirement="Deleting a batch still processing is refused (400 invalid_request_error, or 409 "
    "conflict_error: cancel it first); once it has ended, delete answers {id, type: "
    "'message_batch_deleted'} and the batch is then a 404 not_found_error.",
    source="docs and schema: api/messages/batches/delete (SDK delete docstring); OpenAPI "
    'DeleteMessageBatchResponse; api/errors#http-errors — "Message Batches can only be deleted '
    "once they've finished processing. If you'd like to delete an in-progress batch, you must "
    'first cancel it."; DeleteMessageBatchResponse required [id, type], type const '
    "message_batch_deleted; errors page …",
    invariant=79,
    requires=("batches",),
    covers=(
        ENDPOINT_CREATE,
        ENDPOINT_DELETE,
        ENDPOINT_CANCEL,
        ENDPOINT_RETRIEVE,
        BATCH_ID,
        "error:invalid_request_error",
        "error:not_found_error",
    ),
)
def test_batch_008_delete(target: Target) -> None:
    """Creates a batch of three requests, deletes it at once (refused), cancels it, waits for
    its end, deletes it, and retrieves it. A batch may end in the instant between its create
    and the delete (deleting it is then right), so an early delete that succeeds is tried once
    more on a new batch: only a second success fails."""
    batch_id, early = _delete_at_once(target)
    if early.status_code == 200:
        cancel_quietly(target, batch_id)  # in case it was not deleted after all
        batch_id, early = _delete_at_once(target)
    done = False
    try:
        expect(
            early.status_code != 200,
            "HTTP 400: a batch still processing is not deleted (cancel it first), twice running",
            f"HTTP 200: {early.text[:300]}",
            reason="deleted-in-progress",
        )
        # The docs say it cannot be deleted, not with which status: 400, or 409 conflict_error
        # ("conflicts with the current state of a resource"), both as the errors page has them.
        if early.status_code == 409:
            expect_error(early, 409, "conflict_error")
        else:
            expect_error(early, 400, "invalid_request_error")
        target.request("POST", batch_path(batch_id, "/cancel"))  # cancel itself is BATCH-007's rule
        wait_ended(target, batch_id)
        done = True
    finally:
        if not done:
            cancel_quietly(target, batch_id)
    response = target.request("DELETE", batch_path(batch_id))
    expect_status(response, 200)
    deleted = expect_json(response)
    expect_no_schema_errors(
        validate_response("DELETE /v1/messages/batches/{message_batch_id}", 200, deleted), "the delete answer"
    )
    expect_equal(read(deleted, "id", str, where="the delete answer"), batch_id, "the deleted id")
    expect_error(target.request("GET", batch_path(batch_id)), 404, "not_found_error")


def _delete_at_once(target: Target) -> tuple[str, httpx.Response]:
    """(id, answer) of a delete sent right after creating a batch of three requests."""
    requests = [batch_request(target, f"plumbline-delete-{n}", f"Count to {n}.") for n in range(1, 4)]
    batch_id = id_of(create(target, requests))
    return batch_id, target.request("DELETE", batch_path(batch_id))


@prop(
    "BATCH-009",
    Level.MUST,
    "The batch list is newest first and paginates",
    url=f"{API}/messages/batches/list",
    requirement="GET /v1/messages/batches lists the most recently created batch first; limit "
    "bounds a page, after_id and before_id give the page after or before an id, first_id and "
    "last_id name the page's ends, has_more is false on the last page, and the SDK's "
    "auto-pagination walks it.",
    source="docs and schema: api/messages/batches/list (SDK list docstring); OpenAPI "
    'ListResponse_MessageBatch_ — "Most recently created batches are returned first."; after_id: '
    '"returns the page of results immediately after this object"; before_id: "... immediately '
    'before this object"; first_id: "First ID in the `data` list"; has_more: "Indicates if …',
    invariant=81,
    requires=("batches",),
    covers=(ENDPOINT_CREATE, ENDPOINT_LIST, "param:limit", "param:after_id", "param:before_id"),
)
def test_batch_009_list_pagination(target: Target) -> None:
    """Creates two batches of one request (canceled at once), then reads the list."""
    made = []
    for n in (1, 2):
        made.append(id_of(create(target, [batch_request(target, f"plumbline-list-{n}")])))
        cancel_quietly(target, made[-1])
    older, newer = made
    first = list_page(target, limit="1")
    expect_equal(page_ids(first), [newer], "the first page (limit=1): the batch created last", reason="order")
    expect_equal(read(first, "has_more", bool, where="the first page"), True, "has_more of the first page")
    expect_equal(
        page_ids(list_page(target, limit="1", after_id=newer)),
        [older],
        "the page after the newest",
        reason="pagination",
    )
    expect_equal(
        page_ids(list_page(target, limit="1", before_id=older)),
        [newer],
        "the page before the older",
        reason="pagination",
    )
    walk_list(target, {older, newer})
    listed = sdk_batch_call(
        "messages.batches.list auto-pagination",
        lambda: [batch.id for batch in itertools.islice(target.sdk().messages.batches.list(limit=1), 2)],
    )
    expect_equal(listed, [newer, older], "the SDK's first two batches (limit=1 pages)", reason="pagination")


@prop(
    "BATCH-010",
    Level.MUST,
    "The SDK reads the results through results_url",
    url=f"{API}/messages/batches/retrieve",
    requirement="client.messages.batches.results() fetches the ended batch's results_url, which "
    "the target must serve: the SDK yields one result per request, of a documented type.",
    source="docs: api/messages/batches/retrieve (SDK retrieve docstring; message_batch.py results_url) —"
    ' "To access the results of a Message Batch, make a request to the `results_url` field in the'
    ' response."; results_url: "URL to a `.jsonl` file containing the results of the Message '
    'Batch requests."',
    invariant=77,
    requires=("batches",),
    covers=(ENDPOINT_RETRIEVE, ENDPOINT_RESULTS, BATCH_ID),
)
def test_batch_010_sdk_results(target: Target) -> None:
    shared = shared_batch(target)
    batches = target.sdk().messages.batches
    batch = sdk_batch_call("messages.batches.retrieve", lambda: batches.retrieve(shared.batch_id))
    expect_equal(batch.processing_status, "ended", "processing_status through the SDK", reason="batch-state")
    got = sdk_results(
        target, "messages.batches.results", lambda: batches.results(shared.batch_id), batch.results_url
    )
    expect_equal(sorted(got), sorted(shared.custom_ids), "the custom_ids the SDK read", reason="sdk-results")


@prop(
    "BATCH-011",
    Level.MUST,
    "Batch endpoints answer with ?beta=true",
    url=f"{API}/messages/batches/retrieve",
    requirement="The official SDKs' beta batch resources call the same paths with ?beta=true and "
    "an anthropic-beta header naming message-batches-2024-09-24; retrieve, list and results "
    "answer them as they answer the GA calls.",
    source="schema: OpenAPI paths keys '/v1/messages/batches?beta=true', "
    "'/v1/messages/batches/{message_batch_id}?beta=true', "
    "'/v1/messages/batches/{message_batch_id}/results?beta=true' — The official spec defines each"
    " batch operation a second time under a path ending in ?beta=true",
    invariant=30,
    requires=("batches",),
    covers=(
        ENDPOINT_RETRIEVE,
        ENDPOINT_RESULTS,
        ENDPOINT_LIST,
        BATCH_ID,
        "param:limit",
        "param:anthropic-beta",
    ),
)
def test_batch_011_beta_twins(target: Target) -> None:
    """Raw requests, as SDK 0.121 and the TypeScript SDK send them (SDK 2.14's beta resources
    send the header but no longer the query)."""
    shared = shared_batch(target)
    headers = {**target.headers(), "anthropic-beta": BETA}
    beta = {"beta": "true"}
    cases = Cases()
    with cases.case("retrieve"):
        response = target.request("GET", batch_path(shared.batch_id), headers=headers, params=beta)
        expect_status(response, 200)
        batch = json_object(response, BATCH)
        expect_equal(id_of(batch), shared.batch_id, "the id retrieved with ?beta=true")
        expect_equal(status_of(batch), "ended", "processing_status with ?beta=true", reason="batch-state")
    with cases.case("list"):
        response = target.request("GET", BATCHES, headers=headers, params={**beta, "limit": "1"})
        expect_status(response, 200)
        found = page_ids(json_object(response, "the batch list"))
        expect(len(found) == 1, "one batch on a limit=1 page with ?beta=true", found, reason="limit")
    with cases.case("results"):
        path = batch_path(shared.batch_id, "/results")
        response = target.request("GET", path, headers=headers, params=beta)
        expect_status(response, 200)
        lines = parse_jsonl(response.content, "the results file with ?beta=true")
        expect(
            sorted(map(str, (line.get("custom_id") for line in lines))) == sorted(shared.custom_ids),
            f"one line for each of {sorted(shared.custom_ids)} with ?beta=true",
            [line.get("custom_id") for line in lines],
            reason="results-lines",
        )
    cases.check()


@prop(
    "BATCH-012",
    Level.MUST,
    "Unknown batch ids are 404 not_found_error",
    url=f"{API}/errors",
    requirement="Retrieve, cancel, results and delete of an id the target never issued answer "
    "404 not_found_error.",
    source='docs: api/errors#http-errors — "404 - not_found_error: The requested resource was not found.'
    ' Check the endpoint path and any resource IDs in the request URL."',
    invariant=80,
    requires=("batches",),
    covers=(
        ENDPOINT_RETRIEVE,
        ENDPOINT_CANCEL,
        ENDPOINT_RESULTS,
        ENDPOINT_DELETE,
        BATCH_ID,
        "error:not_found_error",
    ),
)
def test_batch_012_unknown_id(target: Target) -> None:
    cases = Cases()
    for name, method, suffix in (
        ("retrieve", "GET", ""),
        ("cancel", "POST", "/cancel"),
        ("results", "GET", "/results"),
        ("delete", "DELETE", ""),
    ):
        with cases.case(name):
            expect_error(target.request(method, batch_path(UNKNOWN_ID, suffix)), 404, "not_found_error")
    cases.check()


@prop(
    "BATCH-013",
    Level.SHOULD,
    "A batch result equals the non-batch answer",
    url=f"{GUIDE}#how-the-message-batches-api-works",
    requirement="On a deterministic target (the same request gets the same answer) "
    "each succeeded result carries the "
    "Message that POST /v1/messages gives for the same params: the same content, stop_reason, "
    "stop_sequence and usage.",
    requires=("batches",),
    compares=True,
    covers=(
        "endpoint:POST /v1/messages",
        ENDPOINT_RESULTS,
        BATCH_ID,
        "response:content",
        "response:stop_reason",
        "response:usage.input_tokens",
        "response:usage.output_tokens",
    ),
)
def test_batch_013_results_equal_messages(target: Target) -> None:
    if not target.deterministic:
        pytest.skip("the target is not deterministic (by its profile, or by the run's probe)")
    shared = shared_batch(target)
    lines = results(target, shared.batch_id).lines
    for custom_id in shared.custom_ids:
        _same_answer(target, shared, custom_id, result_of(lines, custom_id))


def _same_answer(target: Target, shared: SharedBatch, custom_id: str, result: dict[str, Any]) -> None:
    where = f"the result of {custom_id}"
    expect_equal(
        read(result, "type", str, where=where), "succeeded", f"{where}: type", reason="not-succeeded"
    )
    batched = read(result, "message", dict, where=where)
    plain = create_json(target, shared.params(custom_id))
    for path in ("content", "stop_reason", "stop_sequence", "usage.input_tokens", "usage.output_tokens"):
        expect_equal(
            read(batched, path, object, where=where, nullable=True),
            read(plain, path, object, where="the non-batch answer", nullable=True),
            f"{where}: {path} (as POST /v1/messages answers the same params)",
            reason="batch-diff",
        )


@prop(
    "BATCH-014",
    Level.SHOULD,
    "Batch ids start with msgbatch_",
    url=f"{API}/messages/batches/create",
    requirement="The API reference shows batch ids as msgbatch_… (msgbatch_013Zva2CMHLNnXjNJJKqJ2EF), "
    "an example rather than a rule: a compatible server should keep the prefix (clients and logs "
    "tell a batch from a message by it).",
    invariant=73,
    requires=("batches",),
    covers=(ENDPOINT_RETRIEVE, BATCH_ID),
)
def test_batch_014_batch_id_prefix(target: Target) -> None:
    """Reads the run's shared batch: its id, as created and as retrieved, starts with msgbatch_."""
    shared = shared_batch(target)
    expect_id_prefix(shared.batch_id, "msgbatch_", "the created batch id")
    expect_id_prefix(id_of(retrieve(target, shared.batch_id)), "msgbatch_", "the retrieved batch id")
