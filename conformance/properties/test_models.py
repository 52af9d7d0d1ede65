"""MODELS-*: /v1/models in Anthropic's shape, paginated, with retrieval by id."""

from __future__ import annotations

from typing import Any

from conformance.catalogue import Level, prop
from conformance.judging.checks import (
    ConformanceFailure,
    expect,
    expect_equal,
    expect_error,
    expect_json,
    expect_no_schema_errors,
    expect_status,
    json_object,
    not_judged,
    note,
    precondition,
    read,
    read_optional,
)
from conformance.judging.schemas import validate_response
from conformance.wire.drivers import sdk_call
from conformance.wire.target import Target

MODELS = "api/models/list"
LIST = "the model list"
THE_LIST = "the model list's data, ids and has_more"


# What the ModelInfo schema judges, field by field (MODELS-001 and MODELS-003 validate it).
MODEL_INFO_FIELDS = (
    "model:capabilities",
    "model:capabilities.batch",
    "model:capabilities.batch.supported",
    "model:capabilities.citations",
    "model:capabilities.citations.supported",
    "model:capabilities.code_execution",
    "model:capabilities.code_execution.supported",
    "model:capabilities.context_management",
    "model:capabilities.context_management.clear_thinking_20251015",
    "model:capabilities.context_management.clear_tool_uses_20250919",
    "model:capabilities.context_management.compact_20260112",
    "model:capabilities.context_management.supported",
    "model:capabilities.effort",
    "model:capabilities.effort.high",
    "model:capabilities.effort.low",
    "model:capabilities.effort.max",
    "model:capabilities.effort.medium",
    "model:capabilities.effort.supported",
    "model:capabilities.effort.xhigh",
    "model:capabilities.image_input",
    "model:capabilities.image_input.supported",
    "model:capabilities.pdf_input",
    "model:capabilities.pdf_input.supported",
    "model:capabilities.structured_outputs",
    "model:capabilities.structured_outputs.supported",
    "model:capabilities.thinking",
    "model:capabilities.thinking.supported",
    "model:capabilities.thinking.types",
    "model:created_at",
    "model:display_name",
    "model:id",
    "model:max_input_tokens",
    "model:max_tokens",
    "model:type",
    "model:capabilities.server_tools",
    "model:capabilities.server_tools.code_execution",
    "model:capabilities.server_tools.supported",
    "model:capabilities.server_tools.web_search",
    "model:deprecated_at",
    "model:lifecycle",
    "model:line",
    "model:retires_at",
)


def page(target: Target, **params: str) -> dict[str, Any]:
    """A 200 page of the model list as a JSON object (its schema is MODELS-001's to judge)."""
    response = target.request("GET", "/v1/models", params=params or None)
    expect_status(response, 200)
    return json_object(response, LIST)


def ids(body: dict[str, Any]) -> list[str]:
    """The ids of a page's models."""
    data = read(body, "data", list, where=LIST)
    return [read(data, f"{n}.id", str, where=LIST) for n in range(len(data))]


@prop(
    "MODELS-001",
    Level.MUST,
    "The model list has Anthropic's shape",
    url=f"{MODELS}#response",
    requirement="GET /v1/models returns {data, has_more, first_id, last_id} where each item is a "
    "ModelInfo (type 'model', id, display_name, RFC 3339 created_at, max_input_tokens, "
    "max_tokens, capabilities) — not an OpenAI list.",
    source="schema: OpenAPI ListResponse_ModelInfo_; OpenAPI ModelInfo — ListResponse required [data, "
    "first_id, has_more, last_id]; ModelInfo required [capabilities, created_at, display_name, "
    'id, max_input_tokens, max_tokens, type], type const model; first_id: "First ID in the `data`'
    ' list"',
    invariant=83,
    covers=(
        "endpoint:GET /v1/models",
        "models:data",
        "models:first_id",
        "models:last_id",
        "models:has_more",
        *MODEL_INFO_FIELDS,
    ),
)
def test_models_001_list_shape(target: Target) -> None:
    """The property that judges the list's schema (the others read the fields they need)."""
    response = target.request("GET", "/v1/models")
    expect_status(response, 200)
    body = expect_json(response)
    expect_no_schema_errors(validate_response("GET /v1/models", 200, body), LIST)
    data = read(body, "data", list, where=LIST)
    expect(len(data) > 0, "at least one model", data, reason="empty-list")
    for n in range(len(data)):
        expect_equal(read(data, f"{n}.type", str, where=LIST), "model", "data[].type")
    listed = ids(body)
    expect_equal(read(body, "first_id", str, where=LIST), listed[0], "first_id")
    expect_equal(read(body, "last_id", str, where=LIST), listed[-1], "last_id")
    listed = sdk_call("models.list", target.sdk().models.list)
    expect(len(listed.data) > 0, "the SDK lists models", listed.data, reason="empty-list")


@prop(
    "MODELS-002",
    Level.MUST,
    "The model list paginates",
    url=f"{MODELS}#parameter-after-id",
    requirement="limit bounds the page; after_id=<last_id> gives the next page; has_more is false "
    "on the last page; walking with limit=1 visits every model once.",
    source="docs and schema: api/models/list#parameter-after-id; OpenAPI ListResponse_ModelInfo_ — "
    'after_id: "returns the page of results immediately after this object"; last_id: "Last ID in '
    'the `data` list. Can be used as the `after_id` for the next page."; limit: "Number of items '
    'to return per page"',
    invariant=81,
    covers=(
        "endpoint:GET /v1/models",
        "param:limit",
        "param:after_id",
        "param:before_id",
        "models:data",
        "models:has_more",
        "models:last_id",
        "model:id",
    ),
    unobserved={
        "param:after_id": "sent only when a page has more: the reference serves one model",
        "param:before_id": "sent only when there are two models or more: the reference serves one",
    },
)
def test_models_002_pagination(target: Target) -> None:
    """The list's fields (data, ids, has_more, last_id) and the entries the SDK parses are
    MODELS-001's to judge: a list without them, or without a model, cannot be paginated, and is
    SKIP here. With one model, limit and has_more are judged, after_id and before_id are not
    (said under the verdict)."""
    with precondition(THE_LIST, judged_by="MODELS-001"):
        everything = ids(page(target, limit="1000"))
    if not everything:
        not_judged("the model list is empty: no page to walk", judged_by="MODELS-001")
    if len(everything) < 2:
        note("one model listed: after_id and before_id are not exercised (a page has no next or previous)")
    seen: list[str] = []
    cursor: str | None = None
    for _ in range(len(everything) + 1):
        params = {"limit": "1"} if cursor is None else {"limit": "1", "after_id": cursor}
        body = page(target, **params)
        with precondition(THE_LIST, judged_by="MODELS-001"):
            found = ids(body)
            more = read(body, "has_more", bool, where=LIST)
        expect(len(found) <= 1, "at most `limit` items", len(found), reason="limit")
        seen += found
        if not more:
            break
        cursor = read_optional(body, "last_id", str, where=LIST)
        expect(cursor is not None, "a last_id on a page with has_more", body, reason="pagination")
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
            ids(back),
            [everything[-2]],
            "page before the last",
            reason="pagination",
        )
    with precondition("the SDK parses the model list's entries", judged_by="MODELS-001"):
        pages = sdk_call("models.list auto-pagination", lambda: list(target.sdk().models.list(limit=1)))
    expect_equal([m.id for m in pages], everything, "SDK auto-pagination", reason="pagination")


@prop(
    "MODELS-003",
    Level.MUST,
    "A model can be retrieved by id; unknown ids are 404",
    url="api/models/get",
    requirement="GET /v1/models/{id} returns that ModelInfo; an unknown id is a 404 not_found_error.",
    source='docs and schema: OpenAPI ModelInfo; api/errors#http-errors — ModelInfo schema; "404 - '
    'not_found_error ... Check the endpoint path and any resource IDs in the request URL."',
    invariant=84,
    covers=(
        "endpoint:GET /v1/models",
        "endpoint:GET /v1/models/{model_id}",
        "param:model_id",
        *MODEL_INFO_FIELDS,
        "error:not_found_error",
    ),
)
def test_models_003_retrieve(target: Target) -> None:
    listed = ids(page(target))
    expect(bool(listed), "at least one model in the list", listed, reason="empty-list")
    retrieved(target, listed[0])
    expect_error(target.request("GET", "/v1/models/plumbline-no-such-model-0000"), 404, "not_found_error")


def retrieved(target: Target, model_id: str) -> dict[str, Any]:
    """GET /v1/models/{model_id}: 200 with a schema-valid ModelInfo of that id (MODELS-003's rule)."""
    response = target.request("GET", f"/v1/models/{model_id}")
    expect_status(response, 200)
    info = expect_json(response)
    expect_no_schema_errors(validate_response("GET /v1/models/{model_id}", 200, info), "the ModelInfo")
    expect_equal(read(info, "id", str, where="the ModelInfo"), model_id, "retrieved id")
    return info  # type: ignore[no-any-return]


@prop(
    "MODELS-004",
    Level.MUST,
    "The model used for messages is retrievable",
    url="api/models/get",
    requirement="Every model id /v1/messages accepts (aliases included) resolves through "
    "GET /v1/models/{id}, and the ModelInfo states max_tokens.",
    source='docs: api/models/get; api/models/list — "The Models API response can be used to determine '
    'which models are available for use in the API."; get: "resolve a model alias to a model ID";'
    " ModelInfo.max_tokens required (nullable)",
    invariant=85,
    covers=(
        "endpoint:GET /v1/models/{model_id}",
        "param:model_id",
        "model:max_tokens",
    ),
)
def test_models_004_messages_model_retrievable(target: Target) -> None:
    """Retrieval itself (a listed model by id, as a valid ModelInfo) is MODELS-003's rule: where
    it fails, this one has nothing of its own to judge (SKIP)."""
    with precondition("a listed model retrieved by id as a valid ModelInfo", judged_by="MODELS-003"):
        retrieved(target, ids(page(target))[0])
    info = sdk_call("models.retrieve", target.sdk().models.retrieve, target.model)
    expect(
        info.max_tokens is None or info.max_tokens > 0,
        "max_tokens positive or null",
        info.max_tokens,
        reason="model-info",
    )
