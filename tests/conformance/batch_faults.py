"""The faults of the BATCH-* properties (part of faults.fault_catalogue): how servers and gateways
get Message Batches wrong (batch state kept in one worker's memory and lost, as OGX's first KV
store could; counts that move before the end; results as a JSON array or as application/json;
a batch refused whole for one bad request; duplicate custom_ids; cancel and delete that ignore
the batch's state; a list cursor ignored; a results_url nothing serves; beta paths missing;
unknown ids that crash; results that differ from the Messages answer), plus the extra faults
test_batch_proofs.py proves one by one, a batch that never ends among them.

Each works on the scripted batch target and on the reference server alike: it rewrites what
either sends, and needs no model behaviour."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from .fault_proxy import Fault, Request, Response
from .faults import JSONDict, error, set_text, text

__all__ = ["CATALOGUE_REASONS", "EXTRA_BATCH_FAULTS", "NEVER_ENDS", "batch_fault_catalogue"]

BATCHES = "/v1/messages/batches"
_ONE = re.compile(rf"^{BATCHES}/([^/?]+)$")  # a batch (retrieve, delete)


def _route(request: Request) -> str:
    return request.path.split("?", 1)[0]


def _query(request: Request) -> str:
    return request.path.partition("?")[2]


def _batch_json(change: Callable[[JSONDict], None]) -> Callable[[Request, Response], Response]:
    """Edit every MessageBatch the target answers (create, retrieve, cancel)."""

    def apply(request: Request, response: Response) -> Response:
        data = response.json
        if response.status == 200 and isinstance(data, dict) and data.get("type") == "message_batch":
            change(data)
            return response.with_json(data)
        return response

    return apply


def _results_lines(change: Callable[[list[JSONDict]], bytes]) -> Callable[[Request, Response], Response]:
    """Rewrite a 200 results file: `change` gets its lines and gives the new body."""

    def apply(request: Request, response: Response) -> Response:
        if response.status != 200 or not _route(request).endswith("/results"):
            return response
        lines = [json.loads(line) for line in response.body.decode().splitlines() if line.strip()]
        headers = {k: v for k, v in response.headers.items() if k != "content-length"}
        return Response(200, headers, change(lines))

    return apply


def _jsonl(lines: list[JSONDict]) -> bytes:
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _each_result(kind: str, change: Callable[[JSONDict], None]) -> Callable[[list[JSONDict]], bytes]:
    def apply(lines: list[JSONDict]) -> bytes:
        for line in lines:
            if line.get("result", {}).get("type") == kind:
                change(line["result"])
        return _jsonl(lines)

    return apply


# ------------------------------------------------------------------ the catalogue's faults


def _lost(request: Request) -> Request | Response:
    if request.method == "GET" and _ONE.match(_route(request)):
        return error(404, "not_found_error", "message_batch_id: no such batch")
    return request


def _counted_early(batch: JSONDict) -> None:
    """A running request counted as succeeded before the batch ends."""
    counts = batch.get("request_counts") or {}
    if batch.get("processing_status") != "ended" and counts.get("processing", 0) > 0:
        counts["processing"] -= 1
        counts["succeeded"] = counts.get("succeeded", 0) + 1


def _as_array(lines: list[JSONDict]) -> bytes:
    return json.dumps(lines).encode()


def _as_json(request: Request, response: Response) -> Response:
    if response.status == 200 and _route(request).endswith("/results"):
        return Response(200, {**response.headers, "content-type": "application/json"}, response.body)
    return response


def _has_invalid(body: Any) -> bool:
    """Whether a batch holds conformance.generating.batches.invalid_request's request (max_tokens -1)."""
    requests = body.get("requests") if isinstance(body, dict) else None
    return any(
        isinstance(r, dict) and isinstance(r.get("params"), dict) and r["params"].get("max_tokens") == -1
        for r in (requests if isinstance(requests, list) else [])
    )


def _refuse_whole(request: Request) -> Request | Response:
    if request.method == "POST" and _route(request) == BATCHES and _has_invalid(request.json):
        return error(
            400,
            "invalid_request_error",
            "requests.1.params.max_tokens: Input should be greater than or equal to 0",
        )
    return request


def _unique_ids(request: Request) -> Request:
    """A repeated custom_id made unique on the way in: the target accepts the batch."""
    body = request.json
    if request.method != "POST" or _route(request) != BATCHES or not isinstance(body, dict):
        return request
    seen: set[Any] = set()
    for n, item in enumerate(body.get("requests") or []):
        if isinstance(item, dict) and item.get("custom_id") in seen:
            item["custom_id"] = f"{item['custom_id']}-{n}"
        seen.add(item.get("custom_id") if isinstance(item, dict) else None)
    return request.with_json(body)


def _cancel_ignored(request: Request) -> Request:
    route = _route(request)
    if request.method == "POST" and route.startswith(BATCHES) and route.endswith("/cancel"):
        return Request("GET", route.removesuffix("/cancel"), request.headers, b"")
    return request


def _deleted_anyway(request: Request, response: Response) -> Response:
    match = _ONE.match(_route(request))
    if request.method == "DELETE" and match and response.status == 400:
        return response.with_json({"id": match[1], "type": "message_batch_deleted"}, status=200)
    return response


def _drop_query(name: str) -> Callable[[Request], Request]:
    def apply(request: Request) -> Request:
        if _route(request) != BATCHES or name not in _query(request):
            return request
        kept = "&".join(p for p in _query(request).split("&") if not p.startswith(f"{name}="))
        path = f"{BATCHES}?{kept}" if kept else BATCHES
        return Request(request.method, path, request.headers, request.body)

    return apply


def _results_url_elsewhere(batch: JSONDict) -> None:
    if isinstance(batch.get("results_url"), str):
        batch["results_url"] = batch["results_url"].replace("/results", "/results.jsonl")


def _no_beta(request: Request) -> Request | Response:
    if _route(request).startswith(BATCHES) and "beta=true" in _query(request):
        return error(404, "not_found_error", "Not Found")
    return request


def _crash_on_unknown(request: Request, response: Response) -> Response:
    if _route(request).startswith(BATCHES) and response.status == 404:
        return error(500, "api_error", "Internal server error")
    return response


def _other_text(result: JSONDict) -> None:
    message = result.get("message")
    if isinstance(message, dict) and isinstance(message.get("content"), list):
        set_text(message, text(message) + " (batch)")


def batch_fault_catalogue() -> dict[str, Fault]:
    return {
        "BATCH-001": Fault("batch state lost between requests (kept in one worker's memory)", request=_lost),
        "BATCH-002": Fault(
            "a request counted as succeeded before the batch ends", response=_batch_json(_counted_early)
        ),
        "BATCH-003": Fault("results as one JSON array, not JSON Lines", response=_results_lines(_as_array)),
        "BATCH-004": Fault("results sent as application/json", response=_as_json),
        "BATCH-005": Fault("a batch refused whole for one invalid request", request=_refuse_whole),
        "BATCH-006": Fault("a repeated custom_id accepted", request=_unique_ids),
        "BATCH-007": Fault("cancel ignored: the batch answered unchanged", request=_cancel_ignored),
        "BATCH-008": Fault("a batch still processing deleted", response=_deleted_anyway),
        "BATCH-009": Fault("after_id ignored: the first page again", request=_drop_query("after_id")),
        "BATCH-010": Fault(
            "results_url names a path nothing serves", response=_batch_json(_results_url_elsewhere)
        ),
        "BATCH-011": Fault("the ?beta=true batch paths are 404s", request=_no_beta),
        "BATCH-012": Fault("an unknown batch id crashes the server (500)", response=_crash_on_unknown),
        "BATCH-013": Fault(
            "batch results decoded otherwise than /v1/messages",
            response=_results_lines(_each_result("succeeded", _other_text)),
        ),
        "BATCH-014": Fault("batch_ ids (OpenAI's prefix) on retrieve", response=_on_get(_msgbatch_less)),
    }


# ------------------------------------------------------------------ extra faults


def _on_get(change: Callable[[JSONDict], None]) -> Callable[[Request, Response], Response]:
    """Edit the MessageBatch of retrieve answers only: the ids the client holds stay valid."""
    edit = _batch_json(change)
    return lambda request, response: edit(request, response) if request.method == "GET" else response


def _msgbatch_less(batch: JSONDict) -> None:
    batch["id"] = str(batch.get("id", "")).replace("msgbatch_", "batch_")


def _openai_batch(request: Request, response: Response) -> Response:
    data = response.json
    if request.method == "POST" and _route(request) == BATCHES and isinstance(data, dict):
        counts = {"total": 2, "completed": 0, "failed": 0}
        openai = {"id": data.get("id"), "object": "batch", "status": "validating", "request_counts": counts}
        return response.with_json({**openai, "endpoint": "/v1/messages", "created_at": 1730000000})
    return response


def _counts_not_added(batch: JSONDict) -> None:
    """Once ended, `processing` keeps the number of requests (terminal counts added on top)."""
    counts = batch.get("request_counts") or {}
    if batch.get("processing_status") == "ended":
        counts["processing"] = sum(v for k, v in counts.items() if k != "processing")


def _never_ends(batch: JSONDict) -> None:
    batch.update(processing_status="in_progress", ended_at=None, results_url=None)
    counts = batch.get("request_counts") or {}
    total = sum(counts.values())
    batch["request_counts"] = {"processing": total, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}


def _unwrapped(result: JSONDict) -> None:
    result["error"] = result.get("error", {}).get("error")


def _null_results_url(batch: JSONDict) -> None:
    batch["results_url"] = None


def _unreachable_results_url(batch: JSONDict) -> None:
    """A results_url copied from an upstream the client cannot reach (port 1 refuses)."""
    if isinstance(batch.get("results_url"), str):
        batch["results_url"] = f"http://127.0.0.1:1{BATCHES}/{batch.get('id')}/results"


def _always_more(request: Request, response: Response) -> Response:
    data = response.json
    if request.method == "GET" and _route(request) == BATCHES and isinstance(data, dict):
        return response.with_json({**data, "has_more": True})
    return response


def _no_last_id(request: Request, response: Response) -> Response:
    data = response.json
    if request.method == "GET" and _route(request) == BATCHES and isinstance(data, dict):
        return response.with_json({**data, "last_id": None})
    return response


def _deleted_as_batch(request: Request, response: Response) -> Response:
    match = _ONE.match(_route(request))
    if request.method == "DELETE" and match and response.status == 200:
        return response.with_json({"id": match[1], "type": "message_batch"})
    return response


def _drop_last(lines: list[JSONDict]) -> bytes:
    return _jsonl(lines[:-1])


def _blank_between(lines: list[JSONDict]) -> bytes:
    return "\n".join(json.dumps(line) + "\n" for line in lines).encode()


# name -> (property id, the failure's reason, fault): proved besides the catalogue's.
EXTRA_BATCH_FAULTS: dict[str, tuple[str, str, Fault]] = {
    "OpenAI batch object": ("BATCH-001", "schema", Fault("an OpenAI Batch object", response=_openai_batch)),
    "counts that do not add up": (
        "BATCH-002",
        "counts",
        Fault("processing kept after the end", response=_batch_json(_counts_not_added)),
    ),
    "never ends": (
        "BATCH-002",
        "batch-never-ended",
        Fault("a batch that never ends", response=_batch_json(_never_ends)),
    ),
    "a line missing": (
        "BATCH-003",
        "results-lines",
        Fault("a result line dropped", response=_results_lines(_drop_last)),
    ),
    "a blank line": (
        "BATCH-003",
        "not-jsonl",
        Fault("blank lines between results", response=_results_lines(_blank_between)),
    ),
    "errored without envelope": (
        "BATCH-005",
        "mismatch",
        Fault(
            "an errored result's error not an envelope",
            response=_results_lines(_each_result("errored", _unwrapped)),
        ),
    ),
    "canceled as expired": (
        "BATCH-007",
        "cancel-results",
        Fault(
            "canceled requests reported as expired",
            response=_results_lines(_each_result("canceled", lambda r: r.update(type="expired"))),
        ),
    ),
    "delete answers the batch": (
        "BATCH-008",
        "schema",
        Fault("delete answers a MessageBatch", response=_deleted_as_batch),
    ),
    "has_more always true": ("BATCH-009", "wrong-type", Fault("has_more always true", response=_always_more)),
    "last_id null": ("BATCH-009", "mismatch", Fault("last_id always null", response=_no_last_id)),
    "results_url unreachable": (
        "BATCH-010",
        "results-url",
        Fault("a results_url nobody answers at", response=_batch_json(_unreachable_results_url)),
    ),
    "results_url null": (
        "BATCH-010",
        "sdk-rejected-response",
        Fault("no results_url once ended", response=_batch_json(_null_results_url)),
    ),
}

# Why each property fails on its catalogue fault (its own rule, not a neighbour's).
CATALOGUE_REASONS = {
    "BATCH-001": "batch-lost",
    "BATCH-002": "counts-early",
    "BATCH-003": "not-jsonl",
    "BATCH-004": "content-type",
    "BATCH-005": "batch-refused",
    "BATCH-006": "wrong-status",
    "BATCH-007": "cancel-ignored",
    "BATCH-008": "deleted-in-progress",
    "BATCH-009": "pagination",
    "BATCH-010": "results-url",
    "BATCH-011": "wrong-status",
    "BATCH-012": "wrong-status",
    "BATCH-013": "batch-diff",
    "BATCH-014": "id-prefix",
}

# Every batch answered as still in progress, on every exchange (test_batch_proofs.py).
NEVER_ENDS = Fault("no batch ever ends", response=_batch_json(_never_ends))
