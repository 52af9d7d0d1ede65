"""Wire-level overlays: the event stream and error responses of the May 2026 spec copy.

The spec documents only the JSON response of POST /v1/messages, only `4XX` errors, and marks
as required some nullable keys that documented and live responses leave out. Importing this
module registers these patches after the response-side ones in `schema_overlays.py`.
"""

from __future__ import annotations

import copy

from schema_overlays import Paths, Schemas, add_union_member, const, obj, overlay, ref


@overlay(
    "stream_error_event",
    "Component ErrorEvent: the in-stream `error` event, an ErrorResponse whose `request_id` "
    "may be absent (the documented example and the SDK's tests omit it).",
    "_streaming.py",
    "types/shared/error_response.py",
)
def _error_event(schemas: Schemas, paths: Paths) -> None:
    event = copy.deepcopy(schemas["ErrorResponse"])
    event["required"] = [r for r in event["required"] if r != "request_id"]
    schemas["ErrorEvent"] = event


@overlay(
    "sse_response",
    "POST /v1/messages documents its `text/event-stream` 200 response: each SSE event's `data` "
    "is JSON (contentSchema) matching MessageStreamEvent or ErrorEvent.",
    "resources/messages/messages.py",
    "types/raw_message_stream_event.py",
)
def _sse_response(schemas: Schemas, paths: Paths) -> None:
    # OpenAPI 3.1 has no itemSchema; schemathesis then reads `schema` as the schema of one event
    # object {event, data, id?, retry?}, and checks JSON in `data` through contentSchema.
    payload = {"anyOf": [ref("MessageStreamEvent"), ref("ErrorEvent")]}
    event = obj(
        {
            "event": {"type": "string"},
            "data": {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": payload,
            },
        },
        ["data", "event"],
    )
    ok = paths["/v1/messages"]["post"]["responses"]["200"]
    ok["content"]["text/event-stream"] = {"schema": event}


@overlay(
    "error_type_request_too_large",
    "The error union gains `request_too_large` (HTTP 413), documented on the errors page though "
    "absent from the SDK's ErrorType.",
    "https://platform.claude.com/docs/en/api/errors",
    "_exceptions.py",
)
def _request_too_large(schemas: Schemas, paths: Paths) -> None:
    schemas["RequestTooLargeError"] = obj(
        {"type": const("request_too_large"), "message": {"type": "string"}}, ["message", "type"]
    )
    for name in ("ErrorResponse", "ErrorEvent"):
        add_union_member(schemas[name]["properties"]["error"], "RequestTooLargeError", "request_too_large")


@overlay(
    "server_error_responses",
    "Every operation documents `5XX` with the ErrorResponse body (the spec lists only 4XX).",
    "_client.py",
    "_exceptions.py",
    "https://platform.claude.com/docs/en/api/errors",
)
def _server_errors(schemas: Schemas, paths: Paths) -> None:
    for item in paths.values():
        for operation in item.values():
            responses = operation["responses"]
            responses["5XX"] = copy.deepcopy(responses["4XX"])
            responses["5XX"]["description"] = "Error response."


# Keys the spec lists as required (with null allowed) that documented or observed responses
# leave out. The spec's own examples omit them: Message's example has `usage: {input_tokens,
# output_tokens}` and no `container`; MessageDeltaEvent's usage example is `{output_tokens}`.
# The streaming guide's events omit them too (`content_block: {"type": "text", "text": ""}`,
# `delta: {stop_reason, stop_sequence}`), and so do live captures (usage without
# `server_tool_use`, message_start without `container`). Each is `Optional[...] = None` in the
# SDK, so a client sees no difference between absent and null.
OMITTABLE = {
    "Usage": (
        "cache_creation",
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "inference_geo",
        "server_tool_use",
        "service_tier",
    ),
    "Message": ("container", "stop_details"),
    "MessageDelta": ("container", "stop_details"),
    "MessageDeltaUsage": (
        "cache_creation_input_tokens",
        "cache_read_input_tokens",
        "input_tokens",
        "server_tool_use",
    ),
    "ResponseTextBlock": ("citations",),
}


@overlay(
    "documented_omissions",
    "Nullable keys that the spec's own examples, the streaming guide and live responses omit "
    "become optional: most of usage, message/delta container and stop_details, text citations.",
    "types/usage.py",
    "types/message.py",
    "types/raw_message_delta_event.py",
    "types/message_delta_usage.py",
    "types/text_block.py",
    "https://docs.anthropic.com/en/docs/build-with-claude/streaming",
)
def _documented_omissions(schemas: Schemas, paths: Paths) -> None:
    for name, keys in OMITTABLE.items():
        component = schemas[name]
        for key in keys:
            branches = component["properties"][key].get("anyOf", [])
            if {"type": "null"} not in branches:
                raise ValueError(f"{name}.{key} is not nullable; refusing to make it optional")
            component["required"].remove(key)
