"""Issue 42 point 4: no PASS for what was not judged. Each property here once passed where the
exchanges it needs held nothing for its rule: a stream with no event, or an error event alone;
no error event at all; a route that answers 404 (count_tokens, /v1/models, the create itself);
streams and answers without a tool call; no cache_creation breakdown; an answer without text
or content; an empty model list; a history refused whatever it holds; a count that ignores every
tool; a web fetch that never fails. Each now SKIPs, naming the property whose rule is broken
(`judged_by`) where one is; a property with sub-cases judges the rest and says which one it
could not.

One run through one proxy holding every property's empty-evidence fault; each property's own
fault (faults.py) still makes it fail (test_fault_proofs.py).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from conformance.wire.drivers import StreamRun

from .fault_proxy import Fault, FaultProxy, Frame, Request, Response, running_proxy
from .faults import JSONDict, error, message_json, strip
from .suite import run_suite

ERROR_EVENT = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
NOTHING = [{"type": "text", "text": "Done.", "citations": None}]


def _error_only(_: Request, frames: list[Frame]) -> list[Frame]:
    """A 200 event stream that is one error event (the failure came before message_start)."""
    return [Frame.of(ERROR_EVENT)]


def _empty(_: Request, frames: list[Frame]) -> list[Frame]:
    """A 200 text/event-stream with no byte in it."""
    return []


def _empty_or_error_only(request: Request, frames: list[Frame]) -> list[Frame]:
    """The stop-sequence stream an error event alone, the other one empty."""
    body = request.json if isinstance(request.json, dict) else {}
    return _error_only(request, frames) if body.get("stop_sequences") else []


def _no_blocks(_: Request, frames: list[Frame]) -> list[Frame]:
    """Every content block dropped: message_start, message_delta, message_stop (no text)."""
    return [
        f
        for f in frames
        if not (isinstance(f.payload, dict) and str(f.payload.get("type", "")).startswith("content_block"))
    ]


def _not_found(prefix: str) -> Any:
    def answer(request: Request) -> Request | Response:
        return error(404, "not_found_error", "Not Found") if request.path.startswith(prefix) else request

    return answer


def _create_not_found(request: Request) -> Request | Response:
    """POST /v1/messages missing (a wrong base path); count_tokens and the rest answered."""
    missing = request.path.split("?")[0] == "/v1/messages"
    return error(404, "not_found_error", "Not Found") if missing else request


def _no_tool_choice(only: str | None = None) -> Any:
    """tool_choice turned into none (a server that never calls a tool): every forced request,
    or those of type `only`, answered with text."""

    def apply(request: Request) -> Request:
        body = request.json
        choice = body.get("tool_choice") if isinstance(body, dict) else None
        if (
            isinstance(body, dict)
            and "tools" in body
            and (only is None or (choice or {}).get("type") == only)
        ):
            return request.with_json({**body, "tool_choice": {"type": "none"}})
        return request

    return apply


def _one_call_then_none(request: Request, data: JSONDict) -> None:
    """One tool_use in the first answer, none once the results are sent back."""
    calls = [b for b in data["content"] if isinstance(b, dict) and b.get("type") == "tool_use"]
    if '"tool_result"' in json.dumps(request.json):
        data["content"], data["stop_reason"] = list(NOTHING), "end_turn"
    elif calls:
        data["content"] = calls[:1]


def _no_cache_breakdown(_: Request, data: JSONDict) -> None:
    data["usage"].pop("cache_creation", None)


def _empty_text(_: Request, data: JSONDict) -> None:
    data["content"] = [{"type": "text", "text": "", "citations": None}]


def _no_content(_: Request, data: JSONDict) -> None:
    data["content"] = []


def _no_models(request: Request, response: Response) -> Response:
    data = response.json
    if request.path.split("?")[0] == "/v1/models" and isinstance(data, dict) and "data" in data:
        return response.with_json({"data": [], "has_more": False, "first_id": None, "last_id": None})
    return response


def _history_refused(request: Request) -> Request | Response:
    """Any history that holds a thinking block refused (a turn of thinking alone may be)."""
    body = request.json
    messages = body.get("messages") if isinstance(body, dict) else None
    held = '"thinking"' in json.dumps(
        [m for m in messages or [] if isinstance(m, dict) and m.get("role") == "assistant"]
    )
    return error(400, "invalid_request_error", "thinking blocks cannot be sent back") if held else request


def _fetch_always_works(_: Request, data: JSONDict) -> None:
    page = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "A page."}}
    for block in data["content"]:
        if isinstance(block, dict) and block.get("type") == "web_fetch_tool_result":
            block["content"] = {
                "type": "web_fetch_result",
                "url": "https://example.com/",
                "content": page,
                "retrieved_at": "2026-01-01T00:00:00Z",
            }


# property → (its empty-evidence fault, or None where the clean target already gives none;
# the verdict and judged_by it must get)
CASES: dict[str, tuple[Fault | None, str, str | None]] = {
    # streams with no event, an error event alone, no text, no error event
    "STREAM-002": (Fault("error event alone", frames=_error_only), "SKIP", "STREAM-019"),
    "STREAM-003": (Fault("empty stream", frames=_empty), "SKIP", "STREAM-009"),
    "STREAM-004": (
        Fault("empty, or an error event alone", frames=_empty_or_error_only),
        "SKIP",
        "STREAM-009",
    ),
    "STREAM-009": (Fault("error event alone", frames=_error_only), "SKIP", "STREAM-019"),
    "STREAM-010": (Fault("empty stream", frames=_empty), "SKIP", "STREAM-009"),
    "STREAM-013": (Fault("no content blocks", frames=_no_blocks), "SKIP", None),
    "STREAM-017": (Fault("empty stream", frames=_empty), "SKIP", "STREAM-009"),
    "STREAM-019": (None, "SKIP", None),
    # a route that answers 404
    "FUZZ-001": (Fault("create missing", request=_create_not_found), "SKIP", "MSG-001"),
    "FUZZ-002": (
        Fault("count_tokens missing", request=_not_found("/v1/messages/count_tokens")),
        "SKIP",
        "TOKENS-004",
    ),
    "FUZZ-003": (Fault("create missing", request=_create_not_found), "SKIP", "MSG-001"),
    "FUZZ-004": (Fault("models missing", request=_not_found("/v1/models")), "SKIP", "MODELS-001"),
    "ERR-010": (
        Fault("count_tokens missing", request=_not_found("/v1/messages/count_tokens")),
        "PASS",
        "TOKENS-004",
    ),
    # no tool call
    "TOOL-002": (Fault("the named tool never called", request=_no_tool_choice("tool")), "PASS", "TOOL-001"),
    "TOOL-003": (Fault("no tool call", request=_no_tool_choice()), "SKIP", "TOOL-001"),
    "TOOL-007": (
        Fault("one call, then none", response=message_json(_one_call_then_none)),
        "SKIP",
        "TOOL-001",
    ),
    "TOOL-008": (Fault("no tool call", request=_no_tool_choice()), "PASS", "TOOL-001"),
    "TOOL-012": (Fault("no tool call", request=_no_tool_choice()), "SKIP", "TOOL-001"),
    "TOOL-015": (Fault("no tool call", request=_no_tool_choice()), "SKIP", "TOOL-001"),
    "TOOL-016": (Fault("no tool call", request=_no_tool_choice()), "SKIP", "TOOL-001"),
    # answers without what the rule reads
    "MSG-008": (Fault("an empty text block", response=message_json(_empty_text)), "SKIP", "MSG-016"),
    "MSG-010": (Fault("no cache_creation", response=message_json(_no_cache_breakdown)), "SKIP", None),
    "MSG-013": (Fault("no content", response=message_json(_no_content)), "SKIP", None),
    "MODELS-002": (Fault("no model listed", response=_no_models), "SKIP", "MODELS-001"),
    "THINK-005": (Fault("thinking history refused", request=_history_refused), "SKIP", "THINK-007"),
    "THINK-006": (Fault("thinking history refused", request=_history_refused), "SKIP", "THINK-007"),
    "SRVTOOL-003": (
        Fault("count_tokens ignores tools", request=strip("tools", "/v1/messages/count_tokens")),
        "SKIP",
        "TOOL-014",
    ),
    "SRVTOOL-004": (Fault("every fetch works", response=message_json(_fetch_always_works)), "SKIP", None),
}


# Whole names: `tool_002` alone would select SRVTOOL-002's test too.
SELECTION = " or ".join(f"test_{pid.lower().replace('-', '_')}_" for pid in CASES)


@pytest.mark.mlx
@pytest.mark.slow
def test_nothing_to_judge_is_never_a_pass(tiny_random_url, proof_profile, tmp_path):
    faults = {pid: fault for pid, (fault, _, _) in CASES.items() if fault is not None}
    with running_proxy(FaultProxy(tiny_random_url, faults)) as url:
        code, index, output = run_suite(url, tmp_path, profile=proof_profile, extra=["-k", SELECTION])
    by_id = {p["id"]: p for p in index["properties"]}
    assert set(by_id) == set(CASES), output[-3000:]
    got = {pid: (p["verdict"], p["judged_by"]) for pid, p in by_id.items()}
    wanted = {
        pid: (verdict, judge if verdict == "SKIP" else None) for pid, (_, verdict, judge) in CASES.items()
    }
    wrong = {pid: (got[pid], wanted[pid], by_id[pid]["message"]) for pid in CASES if got[pid] != wanted[pid]}
    assert not wrong, json.dumps(wrong, indent=1) + output[-3000:]
    for pid, (_, verdict, judge) in CASES.items():
        if verdict == "PASS":  # a sub-case not judged, said under the verdict with its judge
            notes = " ".join(by_id[pid]["notes"])
            assert "not judged" in notes, (pid, by_id[pid])
            assert str(judge) in notes, (pid, by_id[pid])
    assert code == 0  # nothing failed: every empty set is a SKIP (or a sub-case left out)


def test_a_silence_after_the_last_event_counts_until_the_stream_closes():
    """STREAM-017 measured only the waits before each event: a stream silent after its last
    event (or with none) waited as long, unseen."""
    run = StreamRun(200, httpx.Headers(), b"", arrivals=[0.5, 1.0], ended=9.0)
    assert run.longest_silence() == 8.0
    assert StreamRun(200, httpx.Headers(), b"", arrivals=[0.5, 1.0], ended=1.0).longest_silence() == 0.5
    assert StreamRun(200, httpx.Headers(), b"", ended=4.0).longest_silence() == 4.0
    assert StreamRun(200, httpx.Headers(), b"", arrivals=[2.0]).longest_silence() == 2.0  # no close known
