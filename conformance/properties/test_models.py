"""MODELS-*: /v1/models in Anthropic's shape, paginated, with retrieval by id."""

from __future__ import annotations

from typing import Any

from conformance.catalogue import Level, prop
from conformance.checks import (
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_no_schema_errors,
    expect_status,
)
from conformance.drivers import sdk_call
from conformance.schemas import validate_response
from conformance.target import Target

MODELS = "api/models/list"


def page(target: Target, **params: str) -> dict[str, Any]:
    response = target.request("GET", "/v1/models", params=params or None)
    expect_status(response, 200)
    body = expect_json(response)
    expect_no_schema_errors(validate_response("GET /v1/models", 200, body), "the model list")
    return body  # type: ignore[no-any-return]


@prop(
    "MODELS-001",
    Level.MUST,
    "The model list has Anthropic's shape",
    url=f"{MODELS}#response",
    requirement="GET /v1/models returns {data, has_more, first_id, last_id} where each item is a "
    "ModelInfo (type 'model', id, display_name, RFC 3339 created_at, max_input_tokens, "
    "max_tokens, capabilities) — not an OpenAI list.",
    invariant=83,
)
def test_models_001_list_shape(target: Target) -> None:
    body = page(target)
    expect(len(body["data"]) > 0, "at least one model", body["data"], reason="empty-list")
    for info in body["data"]:
        expect_equal(info.get("type"), "model", "data[].type")
    if body["data"]:
        expect_equal(body["first_id"], body["data"][0]["id"], "first_id")
        expect_equal(body["last_id"], body["data"][-1]["id"], "last_id")
    listed = sdk_call("models.list", target.sdk().models.list)
    expect(len(listed.data) > 0, "the SDK lists models", listed.data, reason="empty-list")


@prop(
    "MODELS-002",
    Level.MUST,
    "The model list paginates",
    url=f"{MODELS}#parameter-after-id",
    requirement="limit bounds the page; after_id=<last_id> gives the next page; has_more is false "
    "on the last page; walking with limit=1 visits every model once.",
    invariant=81,
)
def test_models_002_pagination(target: Target) -> None:
    everything = [info["id"] for info in page(target, limit="1000")["data"]]
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(len(everything) + 1):
        params = {"limit": "1"} if cursor is None else {"limit": "1", "after_id": cursor}
        body = page(target, **params)
        expect(len(body["data"]) <= 1, "at most `limit` items", len(body["data"]), reason="limit")
        seen += [info["id"] for info in body["data"]]
        if not body["has_more"]:
            break
        expect(body["last_id"] is not None, "a last_id on a page with has_more", body, reason="pagination")
        cursor = body["last_id"]
    else:
        raise ConformanceFailure(
            "has_more false on the last page",
            f"has_more still true after {len(everything) + 1} pages of one model",
            reason="pagination",
        )
    expect_equal(seen, everything, "models visited one page at a time", reason="pagination")
    if len(everything) > 1:
        back = page(target, limit="1", before_id=everything[-1])
        expect_equal(
            [i["id"] for i in back["data"]],
            [everything[-2]],
            "page before the last",
            reason="pagination",
        )
    sdk_ids = [
        m.id for m in sdk_call("models.list auto-pagination", lambda: list(target.sdk().models.list(limit=1)))
    ]
    expect_equal(sdk_ids, everything, "SDK auto-pagination", reason="pagination")


@prop(
    "MODELS-003",
    Level.MUST,
    "A model can be retrieved by id; unknown ids are 404",
    url="api/models/get",
    requirement="GET /v1/models/{id} returns that ModelInfo; an unknown id is a 404 not_found_error.",
    invariant=84,
)
def test_models_003_retrieve(target: Target) -> None:
    first = page(target)["data"][0]["id"]
    response = target.request("GET", f"/v1/models/{first}")
    expect_status(response, 200)
    info = expect_json(response)
    expect_no_schema_errors(validate_response("GET /v1/models/{model_id}", 200, info), "the ModelInfo")
    expect_equal(info["id"], first, "retrieved id")
    expect_error(target.request("GET", "/v1/models/plumbline-no-such-model-0000"), 404, "not_found_error")


@prop(
    "MODELS-004",
    Level.MUST,
    "The model used for messages is retrievable",
    url="api/models/get",
    requirement="Every model id /v1/messages accepts (aliases included) resolves through "
    "GET /v1/models/{id}, and the ModelInfo states max_tokens.",
    invariant=85,
)
def test_models_004_messages_model_retrievable(target: Target) -> None:
    info = sdk_call("models.retrieve", target.sdk().models.retrieve, target.model)
    expect(
        info.max_tokens is None or info.max_tokens > 0,
        "max_tokens positive or null",
        info.max_tokens,
        reason="model-info",
    )
