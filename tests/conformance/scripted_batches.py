"""A scripted target that serves Message Batches correctly, in memory, with no model.

`make_app()` returns an ASGI app that answers `/v1/messages/batches*` (with or without
`?beta=true`) itself, says `capabilities.batch.supported: true` in the `/v1/models` answers of
scripted_target.py, and hands every other request to scripted_target.app unchanged. Each batch
request is answered by scripted_target.answer (so a result is exactly what `POST /v1/messages`
answers for the same params), or is `errored` with the 400 envelope it would get there.

Requests progress only when the batch is polled: each retrieve of a batch in progress runs its
next request, and the retrieve after the last one ends the batch. So a cancel right after the
create catches every request unrun: the batch answers `canceling`, and the next retrieve ends it
with those requests `canceled`. As the API documents, every request counts as `processing` until
the whole batch has ended; deleting a batch still processing is a 400; the list is newest first
with `after_id`, `before_id` and `limit`; results are JSON Lines (`application/x-jsonl`), in
another order than the requests (the API does not promise theirs); `results_url` names this
server as the request reached it (its Host header).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs, unquote

from . import scripted_target

JSONDict = dict[str, Any]
CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
BATCHES = "/v1/messages/batches"
JSONL = "application/x-jsonl"


def _now() -> datetime:
    return datetime.now(UTC)


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else moment.isoformat().replace("+00:00", "Z")


class Refused(Exception):
    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind = status, kind


@dataclass
class Batch:
    id: str
    requests: list[tuple[str, JSONDict]]
    created: datetime = field(default_factory=_now)
    results: dict[str, JSONDict] = field(default_factory=dict)  # custom_id -> result, in run order
    cancel_initiated: datetime | None = None
    ended: datetime | None = None

    @property
    def status(self) -> str:
        if self.ended is not None:
            return "ended"
        return "canceling" if self.cancel_initiated is not None else "in_progress"

    def tick(self) -> None:
        """One poll's progress: the next request runs, or the batch ends (canceled requests
        included) when nothing is left to run or a cancel was asked for."""
        if self.ended is not None:
            return
        waiting = [(cid, params) for cid, params in self.requests if cid not in self.results]
        if self.cancel_initiated is not None or not waiting:
            for cid, _ in waiting:
                self.results[cid] = {"type": "canceled"}
            self.ended = _now()
            return
        cid, params = waiting[0]
        self.results[cid] = _run(params)

    def as_json(self, origin: str) -> JSONDict:
        counts = {"processing": len(self.requests), "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if self.ended is not None:  # every request counts as processing until the batch has ended
            counts["processing"] = 0
            for result in self.results.values():
                counts[result["type"]] += 1
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": self.status,
            "request_counts": counts,
            "created_at": _time(self.created),
            "expires_at": _time(self.created + timedelta(hours=24)),
            "ended_at": _time(self.ended),
            "cancel_initiated_at": _time(self.cancel_initiated),
            "archived_at": None,
            "results_url": f"{origin}{BATCHES}/{self.id}/results" if self.ended else None,
        }

    def jsonl(self) -> bytes:
        lines = [{"custom_id": cid, "result": result} for cid, result in reversed(self.results.items())]
        return "".join(json.dumps(line) + "\n" for line in lines).encode()


def _run(params: JSONDict) -> JSONDict:
    """What POST /v1/messages answers for `params`, as a batch result."""
    if params.get("stream"):
        refusal = "stream: streaming is not supported in a batch request"
    else:
        try:
            return {"type": "succeeded", "message": scripted_target.answer(params)}
        except scripted_target.Refused as refused:
            refusal = str(refused)
    error = {"type": "invalid_request_error", "message": refusal}
    return {"type": "errored", "error": {"type": "error", "error": error, "request_id": "req_scripted"}}


class BatchService:
    """The in-memory batches of one app."""

    def __init__(self) -> None:
        self.batches: dict[str, Batch] = {}  # in creation order

    def route(self, method: str, path: str, query: str, raw: bytes, origin: str) -> tuple[int, str, bytes]:
        """(status, content type, body) of a request under /v1/messages/batches."""
        try:
            return self._route(method, path, parse_qs(query), raw, origin)
        except Refused as refused:
            body = {
                "type": "error",
                "error": {"type": refused.kind, "message": str(refused)},
                "request_id": "req_scripted",
            }
            return refused.status, "application/json", json.dumps(body).encode()

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], raw: bytes, origin: str
    ) -> tuple[int, str, bytes]:
        parts = path[len(BATCHES) :].strip("/").split("/")
        if parts == [""]:
            if method == "POST":
                return _json(self.create(raw).as_json(origin))
            if method == "GET":
                return _json(self.page(query, origin))
            raise Refused(405, "invalid_request_error", f"{method} is not allowed here")
        batch = self.batches.get(unquote(parts[0]))
        action = (method, "/".join(parts[1:]))
        if batch is None or action not in {
            ("GET", ""),
            ("DELETE", ""),
            ("POST", "cancel"),
            ("GET", "results"),
        }:
            raise Refused(
                404, "not_found_error", f"message_batch_id: no batch {parts[0]!r} (or no such route)"
            )
        if action == ("GET", ""):
            batch.tick()
        elif action == ("POST", "cancel") and batch.ended is None and batch.cancel_initiated is None:
            batch.cancel_initiated = _now()
        elif action == ("DELETE", ""):
            if batch.ended is None:
                raise Refused(
                    400,
                    "invalid_request_error",
                    "a batch still processing cannot be deleted: cancel it first",
                )
            del self.batches[batch.id]
            return _json({"id": batch.id, "type": "message_batch_deleted"})
        elif action == ("GET", "results"):
            if batch.ended is None:
                raise Refused(400, "invalid_request_error", "the batch has not ended: no results yet")
            return 200, JSONL, batch.jsonl()
        return _json(batch.as_json(origin))

    def create(self, raw: bytes) -> Batch:
        try:
            body = json.loads(raw)
        except ValueError:
            raise Refused(400, "invalid_request_error", "the body is not JSON") from None
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not 1 <= len(requests) <= 100_000 or set(body) != {"requests"}:
            raise Refused(400, "invalid_request_error", "requests: from 1 to 100,000 requests, nothing else")
        seen: set[str] = set()
        for n, request in enumerate(requests):
            if not isinstance(request, dict) or set(request) != {"custom_id", "params"}:
                raise Refused(
                    400, "invalid_request_error", f"requests.{n}: custom_id and params, nothing else"
                )
            custom_id, params = request["custom_id"], request["params"]
            if not isinstance(custom_id, str) or not CUSTOM_ID.match(custom_id):
                raise Refused(
                    400, "invalid_request_error", f"requests.{n}.custom_id: must match {CUSTOM_ID.pattern}"
                )
            if custom_id in seen:
                raise Refused(
                    400, "invalid_request_error", f"requests.{n}.custom_id: {custom_id!r} is used twice"
                )
            if not isinstance(params, dict):
                raise Refused(400, "invalid_request_error", f"requests.{n}.params: an object")
            seen.add(custom_id)
        digest = hashlib.sha256(f"{len(self.batches)}:{raw!r}:{_now()}".encode()).hexdigest()
        batch = Batch(f"msgbatch_{digest[:24]}", [(r["custom_id"], r["params"]) for r in requests])
        self.batches[batch.id] = batch
        return batch

    def page(self, query: dict[str, list[str]], origin: str) -> JSONDict:
        """A page of the list, newest first."""
        newest = list(reversed(self.batches.values()))
        ids = [batch.id for batch in newest]
        try:
            limit = int(query.get("limit", ["20"])[0])
        except ValueError:
            limit = 0
        if not 1 <= limit <= 1000:
            raise Refused(400, "invalid_request_error", "limit: from 1 to 1000")
        after, before = query.get("after_id", [None])[0], query.get("before_id", [None])[0]
        for cursor in (after, before):
            if cursor is not None and cursor not in ids:
                raise Refused(404, "not_found_error", f"no batch {cursor!r}")
        if before is not None:
            end = ids.index(before)
            chosen, more = newest[max(0, end - limit) : end], end - limit > 0
        else:
            start = 0 if after is None else ids.index(after) + 1
            chosen, more = newest[start : start + limit], start + limit < len(newest)
        return {
            "data": [batch.as_json(origin) for batch in chosen],
            "has_more": more,
            "first_id": chosen[0].id if chosen else None,
            "last_id": chosen[-1].id if chosen else None,
        }


def _json(data: JSONDict) -> tuple[int, str, bytes]:
    return 200, "application/json", json.dumps(data).encode()


def _with_batches(status: int, media: str, data: bytes) -> tuple[int, str, bytes]:
    """A /v1/models answer of scripted_target, its ModelInfo saying batches are served."""
    body = json.loads(data)
    if status == 200:
        for info in body.get("data", [body]):
            info["capabilities"]["batch"] = {"supported": True}
    return status, media, json.dumps(body).encode()


def make_app() -> Any:
    """A fresh ASGI app (its own batches) for fault_proxy.running_proxy."""
    service = BatchService()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = await scripted_target.read_body(receive)
        method, path = scope["method"], scope["path"]
        if path == BATCHES or path.startswith(f"{BATCHES}/"):
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            origin = f"http://{headers.get('host', 'localhost')}"
            query = scope["query_string"].decode()
            status, media, data = service.route(method, path, query, raw, origin)
        elif method == "GET" and (path == "/v1/models" or path.startswith("/v1/models/")):
            status, media, data = _with_batches(*scripted_target.route(method, path, raw))
        else:

            async def replay() -> dict[str, Any]:
                return {"type": "http.request", "body": raw, "more_body": False}

            await scripted_target.app(scope, replay, send)
            return
        await scripted_target.respond(send, status, media, data)

    return app
