"""HDR-*: headers the API and its clients rely on."""

from __future__ import annotations

from conformance.catalogue import Level, prop
from conformance.checks import expect, expect_status
from conformance.drivers import create_json, message_body
from conformance.target import Target

ERRORS = "api/errors"


@prop(
    "HDR-001",
    Level.MUST,
    "Every response carries a request-id header",
    url=f"{ERRORS}#request-id",
    requirement="Every API response, success or error, includes a unique request-id header (req_…).",
    invariant=54,
)
def test_hdr_001_request_id_everywhere(target: Target) -> None:
    responses = [
        target.request("POST", "/v1/messages", json_body=message_body(target, max_tokens=4)),
        target.request("POST", "/v1/messages", json_body=message_body(target, messages=[])),
        target.request("GET", "/v1/models"),
        target.request("GET", "/v1/plumbline-no-such-route"),
    ]
    seen = set()
    for response in responses:
        rid = response.headers.get("request-id")
        expect(
            bool(rid) and rid.startswith("req_"),
            f"a request-id header starting req_ on {response.request.method} {response.request.url.path}",
            rid,
            reason="request-id",
        )
        seen.add(rid)
    expect(
        len(seen) == len(responses),
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
    invariant=30,
)
def test_hdr_002_beta_query(target: Target) -> None:
    create_json(target, message_body(target, max_tokens=4), params={"beta": "true"})
    count = {"model": target.model, "messages": [{"role": "user", "content": "Hi"}]}
    expect_status(
        target.request("POST", "/v1/messages/count_tokens", json_body=count, params={"beta": "true"}),
        200,
    )
    expect_status(target.request("GET", "/v1/models", params={"beta": "true"}), 200)
    expect_status(target.request("GET", f"/v1/models/{target.model}", params={"beta": "true"}), 200)


@prop(
    "HDR-003",
    Level.MUST,
    "Client telemetry and unknown headers are tolerated",
    url="api/versioning",
    requirement="The SDK sends x-stainless-* telemetry, user-agent, retry counters and custom "
    "headers; a server must accept requests carrying headers it does not know.",
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
