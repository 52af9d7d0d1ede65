"""HDR-*: headers the API and its clients rely on."""

from __future__ import annotations

from collections.abc import Callable

from conformance.catalogue import Level, prop
from conformance.judging.checks import (
    Cases,
    ConformanceFailure,
    expect,
    expect_id_prefix,
    expect_status,
    not_judged,
    precondition,
)
from conformance.wire.drivers import create_json, message_body
from conformance.wire.target import Target

ERRORS = "api/errors"


@prop(
    "HDR-001",
    Level.MUST,
    "Every response carries a request-id header",
    url=f"{ERRORS}#request-id",
    requirement="Every API response, success or error, includes a unique request-id header "
    "(its documented req_ prefix is HDR-005's rule).",
    source='docs: api/errors#request-id — "Every API response includes a unique `request-id` header. '
    'This header contains a value such as `req_018EeWyXxfu5pfWkrYcMdjWG`."',
    invariant=54,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:GET /v1/models",
    ),
)
def test_hdr_001_request_id_everywhere(target: Target) -> None:
    requests = [
        ("POST", "/v1/messages", message_body(target, max_tokens=4)),
        ("POST", "/v1/messages", message_body(target, messages=[])),
        ("GET", "/v1/models", None),
        ("GET", "/v1/plumbline-no-such-route", None),
    ]
    cases = Cases()
    seen = set()
    for method, path, body in requests:
        with cases.case(f"{method} {path}{' (invalid)' if body and not body['messages'] else ''}"):
            rid = target.request(method, path, json_body=body).headers.get("request-id")
            expect(
                bool(rid),
                f"a request-id header on {method} {path}",
                rid,
                reason="request-id",
                subject="responses carry no request-id header",
            )
            seen.add(rid)
    cases.check()
    expect(
        len(seen) == len(requests),
        "a different request-id per response",
        sorted(seen),
        reason="request-id",
    )


@prop(
    "HDR-002",
    Level.MUST,
    "?beta=true is accepted on every Messages path",
    url="api/beta-headers",
    requirement="The official SDK's beta resources append ?beta=true to every path; servers must "
    "route such requests as usual.",
    source="schema: OpenAPI paths keys '/v1/messages?beta=true', '/v1/messages/count_tokens?beta=true', "
    "'/v1/models?beta=true', '/v1/models/{model_id}?beta=true' — the official spec defines these "
    "operations a second time under paths ending in ?beta=true",
    invariant=30,
    covers=(
        "endpoint:POST /v1/messages",
        "endpoint:POST /v1/messages/count_tokens",
        "endpoint:GET /v1/models",
        "endpoint:GET /v1/models/{model_id}",
    ),
)
def test_hdr_002_beta_query(target: Target) -> None:
    """Each path with ?beta=true must answer as it does without: where the plain request fails
    too, the path's own property judges that (SKIP for that path here)."""
    count = {"model": target.model, "messages": [{"role": "user", "content": "Hi"}]}
    cases = Cases()
    with cases.case("POST /v1/messages"):
        beta_or_plain(
            lambda params: create_json(target, message_body(target, max_tokens=4), params=params), "MSG-001"
        )
    with cases.case("POST /v1/messages/count_tokens"):
        beta_or_plain(
            lambda params: expect_status(
                target.request("POST", "/v1/messages/count_tokens", json_body=count, params=params), 200
            ),
            "TOKENS-004",
        )
    with cases.case("GET /v1/models"):
        beta_or_plain(
            lambda params: expect_status(target.request("GET", "/v1/models", params=params), 200),
            "MODELS-001",
        )
    with cases.case("GET /v1/models/{id}"):
        beta_or_plain(
            lambda params: expect_status(
                target.request("GET", f"/v1/models/{target.model}", params=params), 200
            ),
            "MODELS-003",
        )
    cases.check()


def beta_or_plain(check: Callable[[dict[str, str] | None], object], judged_by: str) -> None:
    """`check` with ?beta=true. Its failure is HDR-002's only where the same check passes
    without the query (run again, plain); else the path fails whatever the query, which is
    `judged_by`'s rule."""
    try:
        check({"beta": "true"})
    except ConformanceFailure:
        with precondition("the same request without ?beta=true", judged_by=judged_by):
            check(None)
        raise


@prop(
    "HDR-003",
    Level.SHOULD,
    "Client telemetry and unknown headers are tolerated",
    url="api/versioning",
    requirement="The SDK sends x-stainless-* telemetry, user-agent, retry counters and custom "
    "headers; a server should accept requests carrying headers it does not know."
    " The docs are silent; HTTP (RFC 9110) makes ignoring unknown header fields a SHOULD, and so is this.",
    covers=("endpoint:POST /v1/messages",),
)
def test_hdr_003_unknown_headers(target: Target) -> None:
    headers = {
        **target.headers(),
        "user-agent": "Anthropic/Python 2.14.0",
        "x-stainless-lang": "python",
        "x-stainless-retry-count": "0",
        "x-stainless-timeout": "600",
        "anthropic-dangerous-direct-browser-access": "true",
        "x-plumbline-unknown": "1",
    }
    create_json(target, message_body(target, max_tokens=4), headers=headers)


@prop(
    "HDR-004",
    Level.MUST,
    "A stream request with Accept: application/json still streams",
    url="build-with-claude/streaming",
    requirement="The SDK sends Accept: application/json even for stream: true; the server "
    "decides by the stream flag and answers text/event-stream.",
    source='docs: build-with-claude/streaming — "When creating a Message, you can set \\"stream\\": true '
    'to incrementally stream the response using server-sent events (SSE)."',
    covers=(
        "endpoint:POST /v1/messages",
        "request:stream",
    ),
)
def test_hdr_004_stream_ignores_accept(target: Target) -> None:
    headers = {**target.headers(), "accept": "application/json"}
    with target.stream(
        "/v1/messages", message_body(target, max_tokens=4, stream=True), headers=headers
    ) as response:
        response.read()
    expect_status(response, 200)
    media = response.headers.get("content-type", "").split(";")[0].strip()
    expect(
        media == "text/event-stream",
        "Content-Type: text/event-stream",
        media,
        reason="content-type",
    )


@prop(
    "HDR-005",
    Level.SHOULD,
    "request-id values start with req_",
    url=f"{ERRORS}#request-id",
    requirement="The errors page shows the request-id header as req_… (req_018EeWyXxfu5pfWkrYcMdjWG), "
    "an example, not a rule: a compatible server should keep the prefix, which support "
    "requests and logs are searched by.",
    invariant=54,
    covers=("endpoint:POST /v1/messages",),
)
def test_hdr_005_request_id_prefix(target: Target) -> None:
    """Sends a valid and an invalid request: both request-id headers start with req_."""
    cases = Cases()
    bodies = {"valid": message_body(target, max_tokens=2), "invalid": message_body(target, messages=[])}
    for name, body in bodies.items():
        with cases.case(f"{name} request"):
            rid = target.request("POST", "/v1/messages", json_body=body).headers.get("request-id")
            if not rid:
                not_judged("no request-id header came", judged_by="HDR-001")
            expect_id_prefix(rid, "req_", "request-id header")
    cases.check()
