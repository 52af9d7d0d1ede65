"""Judges and readers the BATCH-* properties share beyond conformance/generating/batches.py: the MessageBatch
object's shape (BATCH-001's rule), pages of the batch list, and what the SDK's results calls
yield. Everything reads the target's data through the accessors of checks.py."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import anthropic
import pytest

from conformance.generating.batches import (
    BATCHES,
    RESULT_TYPES,
    cancel_quietly,
    id_of,
    parse_time,
    retrieve,
    sdk_batch_call,
    status_of,
)
from conformance.judging.checks import (
    ConformanceFailure,
    expect,
    expect_equal,
    expect_json,
    expect_no_schema_errors,
    expect_status,
    read,
)
from conformance.judging.schemas import validate_response
from conformance.wire.target import Target

__all__ = [
    "cancel_created",
    "judge_shape",
    "list_page",
    "page_ids",
    "sdk_results",
    "skip_if_ended_first",
    "walk_list",
]

RETRIEVE = "GET /v1/messages/batches/{message_batch_id}"
DAY_S, SLACK_S = 24 * 3600, 60  # expires_at is 24 hours after created_at (a minute of slack)


def judge_shape(batch: dict[str, Any], what: str) -> None:
    """A MessageBatch never canceled: schema-valid, an id, ended_at and results_url
    set exactly when it has ended, expires_at 24 hours after created_at."""
    expect_no_schema_errors(validate_response(RETRIEVE, 200, batch), what)
    id_of(batch)
    ended = status_of(batch) == "ended"
    for key in ("ended_at", "results_url"):
        value = read(batch, key, str, where=what, nullable=True)
        expect(
            (value is not None) == ended,
            f"{what}: `{key}` {'set' if ended else 'null'} while processing_status is {status_of(batch)!r}",
            value,
            reason="batch-state",
        )
    initiated = read(batch, "cancel_initiated_at", str, where=what, nullable=True)
    expect(
        initiated is None,
        f"{what}: cancel_initiated_at null (never canceled)",
        initiated,
        reason="batch-state",
    )
    created = parse_time(read(batch, "created_at", str, where=what), f"{what}: created_at")
    expires = parse_time(read(batch, "expires_at", str, where=what), f"{what}: expires_at")
    lag = (expires - created).total_seconds()
    expect(
        abs(lag - DAY_S) <= SLACK_S,
        f"{what}: expires_at 24 hours after created_at",
        f"{lag / 3600:.3f} hours after",
        reason="expires-at",
    )
    if ended:
        end = parse_time(read(batch, "ended_at", str, where=what), f"{what}: ended_at")
        expect(
            end >= created,
            f"{what}: ended_at not before created_at",
            f"{end} < {created}",
            reason="batch-state",
        )


def cancel_created(target: Target, response: Any) -> None:
    """A batch the target should have refused but made: canceled, so it costs nothing."""
    try:
        batch_id = response.json().get("id")
    except (ValueError, AttributeError):
        return
    if isinstance(batch_id, str):
        cancel_quietly(target, batch_id)


def skip_if_ended_first(target: Target, batch_id: str) -> None:
    """SKIP when the batch had ended (never canceled) before a cancel could reach it."""
    batch = retrieve(target, batch_id)
    if status_of(batch) == "ended" and batch.get("cancel_initiated_at") is None:
        pytest.skip("the batch ended before the cancel reached it: nothing was left to cancel")


def list_page(target: Target, **params: str) -> dict[str, Any]:
    """A page of the batch list: 200, valid against the list schema, at most `limit` items, and
    first_id/last_id naming its ends."""
    response = target.request("GET", BATCHES, params=params)
    expect_status(response, 200)
    page: dict[str, Any] = expect_json(response)
    where = f"the batch list page ({', '.join(f'{k}={v}' for k, v in params.items())})"
    expect_no_schema_errors(validate_response("GET /v1/messages/batches", 200, page), where)
    ids = page_ids(page)
    expect(
        len(ids) <= int(params["limit"]),
        f"{where}: at most limit={params['limit']} items",
        len(ids),
        reason="limit",
    )
    if ids:
        expect_equal(
            [page.get("first_id"), page.get("last_id")], [ids[0], ids[-1]], f"{where}: first_id, last_id"
        )
    return page


def page_ids(page: dict[str, Any]) -> list[str]:
    """The ids of a list page's batches."""
    data = read(page, "data", list, where="the batch list")
    return [read(data, f"{n}.id", str, where="the batch list") for n in range(len(data))]


def walk_list(target: Target, wanted: set[str], pages: int = 10) -> None:
    """Walk the list 100 at a time (at most `pages` pages): no id twice, newest first, the new
    batches in it, and has_more false where it ends."""
    seen: list[str] = []
    times: list[datetime] = []
    cursor: str | None = None
    for _ in range(pages):  # a longer history is judged on its first pages
        page = list_page(target, limit="100", **({"after_id": cursor} if cursor else {}))
        data = read(page, "data", list, where="the batch list")
        seen += page_ids(page)
        for n in range(len(data)):
            stamp = read(data, f"{n}.created_at", str, where="the batch list")
            times.append(parse_time(stamp, "the batch list: created_at"))
        if not read(page, "has_more", bool, where="the batch list"):
            break
        # A page that says there is more names where it ends (an empty one cannot).
        cursor = read(page, "last_id", str, where="a batch list page with has_more true")
    expect(len(set(seen)) == len(seen), "every batch listed once", seen, reason="pagination")
    expect(
        wanted <= set(seen), f"the new batches {sorted(wanted)} in the list", seen[:20], reason="pagination"
    )
    expect(
        times == sorted(times, reverse=True),
        "the list newest first (created_at never increasing)",
        [str(t) for t in times[:20]],
        reason="order",
    )


def sdk_results(target: Target, what: str, call: Any, url: Any) -> dict[str, Any]:
    """custom_id -> result type of what an SDK results call yields. A results_url the SDK cannot
    read (an error status, or a place it cannot reach while the target answers) is the target's
    failure: the SDK fetches whatever URL the batch names."""
    try:
        entries = sdk_batch_call(what, lambda: list(call()))
    except anthropic.APIStatusError as exc:
        raise ConformanceFailure(
            f"{what}: results_url ({url}) serves the results file",
            f"HTTP {exc.status_code}: {exc.message}"[:500],
            reason="results-url",
        ) from exc
    except anthropic.APIConnectionError as exc:
        if not target.alive():
            raise  # the target itself is gone: the plugin's to judge
        raise ConformanceFailure(
            f"{what}: results_url ({url}) reachable, as the target is",
            f"{type(exc.__cause__ or exc).__name__}: {exc.__cause__ or exc}"[:500],
            reason="results-url",
        ) from exc
    got: dict[str, Any] = {}
    for number, entry in enumerate(entries, 1):
        custom_id = getattr(entry, "custom_id", None)
        kind = getattr(getattr(entry, "result", None), "type", None)
        expect(
            isinstance(custom_id, str) and kind in RESULT_TYPES,
            f"{what}: result {number} with a custom_id and a documented result.type",
            repr(entry)[:300],
            reason="sdk-results",
        )
        got[str(custom_id)] = kind
    return got
