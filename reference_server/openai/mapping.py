"""An OpenAI chat request → the neutral pieces the Anthropic path also builds: engine turns,
tool definitions and a tool policy (tools/definitions.py), the schema the answer must match
(tools/grammar.py), stop strings, the token limit. Each problem is a 400 in OpenAI's words,
with the offending `param`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from pydantic import ValidationError

from reference_server.engine.base import ModelCard, ToolCall, Turn
from reference_server.tools.definitions import ToolDefinition, ToolPolicy
from reference_server.validation import BLOCK_SEPARATOR, BodyProblem, json_object

from .errors import OpenAIError
from .requests import (
    UNION_TAGS,
    AssistantMessage,
    ChatCompletionParams,
    ChatMessage,
    DeveloperMessage,
    JSONObjectFormat,
    JSONSchemaFormat,
    MediaPart,
    RefusalPart,
    SystemMessage,
    TextPart,
    ToolMessage,
)

__all__ = [
    "chat_tools",
    "chat_turns",
    "check_supported",
    "completion_limit",
    "output_schema",
    "parse_request",
    "stop_strings",
]

_KNOWN = frozenset(field.alias or name for name, field in ChatCompletionParams.model_fields.items())
_EMPTY_OBJECT: dict[str, Any] = {"type": "object", "properties": {}}


def parse_request(raw: bytes, content_type: str | None) -> ChatCompletionParams:
    """Bytes → validated params; unknown top-level arguments are refused as OpenAI does."""
    try:
        data = json_object(raw, content_type)
    except BodyProblem as problem:
        if problem.kind == "content-type":
            raise OpenAIError(f"Invalid content-type: {problem.detail}") from None
        raise OpenAIError(f"We could not parse the JSON body of your request: {problem.detail}") from None
    unknown = sorted(set(data) - _KNOWN)
    if unknown:
        plural = "s" if len(unknown) > 1 else ""
        raise OpenAIError(f"Unrecognized request argument{plural} supplied: {', '.join(unknown)}")
    try:
        return ChatCompletionParams.model_validate(data)
    except ValidationError as exc:
        raise _invalid(exc) from None


def _invalid(exc: ValidationError) -> OpenAIError:
    first = exc.errors(include_url=False)[0]
    param = _param(first["loc"])
    kind, msg = first["type"], first["msg"]
    if kind == "missing":
        return OpenAIError(
            f"Missing required parameter: '{param}'.", param=param, code="missing_required_parameter"
        )
    if kind == "extra_forbidden":
        return OpenAIError(f"Unknown parameter: '{param}'.", param=param, code="unknown_parameter")
    if kind.endswith("_type"):
        return OpenAIError(f"Invalid type for '{param}': {msg}.", param=param, code="invalid_type")
    return OpenAIError(f"Invalid value for '{param}': {msg}.", param=param, code="invalid_value")


# After these, pydantic's location names a union branch or tag, not a field.
_UNION_FIELDS = frozenset({"response_format"})  # tagged by type
_UNION_LISTS = frozenset({"messages", "as-parts"})  # items tagged by role or part type


def _param(loc: Sequence[int | str]) -> str:
    """pydantic's location as OpenAI's `param` (`messages[1].content`), union tags dropped."""
    out = ""
    for i, part in enumerate(loc):
        if isinstance(part, int):
            out += f"[{part}]"
            continue
        before = loc[i - 1] if i else None
        tagged_item = isinstance(before, int) and i >= 2 and loc[i - 2] in _UNION_LISTS
        if part in UNION_TAGS or before in _UNION_FIELDS or tagged_item:
            continue
        out += f".{part}" if out else part
    return out


def check_supported(params: ChatCompletionParams) -> None:
    """OpenAI parameters this server cannot honour: a 400 that says so, never ignored."""
    if params.n is not None and params.n != 1:
        raise OpenAIError("n: only n=1 is supported by this server", param="n", code="invalid_value")
    if params.stream_options is not None and not params.stream:
        raise OpenAIError(
            "The 'stream_options' parameter is only allowed when 'stream' is enabled.", param="stream_options"
        )
    if params.functions is not None or params.function_call is not None:
        name = "functions" if params.functions is not None else "function_call"
        raise OpenAIError(f"{name}: deprecated, not supported by this server; use 'tools'", param=name)
    neutral = {
        "logprobs": params.logprobs in (None, False),
        "top_logprobs": not params.top_logprobs,
        "frequency_penalty": not params.frequency_penalty,
        "presence_penalty": not params.presence_penalty,
        "logit_bias": not params.logit_bias,
        "modalities": params.modalities in (None, ["text"]),
        "audio": params.audio is None,
        "prediction": params.prediction is None,
        "reasoning_effort": params.reasoning_effort is None,
        "verbosity": params.verbosity is None,
        "web_search_options": params.web_search_options is None,
    }
    for name, ok in neutral.items():
        if not ok:
            raise OpenAIError(
                f"{name}: not supported by this server", param=name, code="unsupported_parameter"
            )


def completion_limit(params: ChatCompletionParams, card: ModelCard) -> int:
    """`max_completion_tokens`, else `max_tokens`, else the model's limit."""
    name = "max_completion_tokens" if params.max_completion_tokens is not None else "max_tokens"
    limit = params.max_completion_tokens if params.max_completion_tokens is not None else params.max_tokens
    if limit is None:
        return card.max_output_tokens
    if limit < 1:
        raise OpenAIError(
            f"Invalid '{name}': integer below minimum value. Expected a value >= 1, but got {limit} instead.",
            param=name,
            code="integer_below_min_value",
        )
    if limit > card.max_output_tokens:
        raise OpenAIError(
            f"{name} is too large: {limit}. This model supports at most {card.max_output_tokens} completion "
            f"tokens, whereas you provided {limit}.",
            param=name,
            code="invalid_value",
        )
    return limit


def stop_strings(params: ChatCompletionParams) -> tuple[str, ...]:
    stop = params.stop
    stops = (stop,) if isinstance(stop, str) else tuple(stop or ())
    return tuple(s for s in stops if s)


def chat_tools(params: ChatCompletionParams) -> tuple[tuple[ToolDefinition, ...], ToolPolicy]:
    """`tools` as the shared definitions, and the policy `tool_choice` sets (default auto)."""
    tools: list[ToolDefinition] = []
    for index, tool in enumerate(params.tools or ()):
        function = tool.function
        schema = function.parameters if function.parameters is not None else _EMPTY_OBJECT
        param = f"tools[{index}].function.parameters"
        if schema.get("type") != "object":
            raise OpenAIError(
                f"Invalid schema for function '{function.name}': schema must be a JSON Schema of "
                f"'type: \"object\"', got 'type: {json.dumps(schema.get('type'))}'.",
                param=param,
                code="invalid_function_parameters",
            )
        _check_schema(schema, param, f"Invalid schema for function '{function.name}'")
        if any(known.name == function.name for known in tools):
            raise OpenAIError(
                f"Duplicate function name '{function.name}' in 'tools'.", param=f"tools[{index}]"
            )
        tools.append(ToolDefinition(function.name, function.description or "", schema, bool(function.strict)))
    choice = params.tool_choice
    parallel = params.parallel_tool_calls is not False
    if choice is None or choice == "auto":
        return tuple(tools), ToolPolicy("auto", tuple(tools), parallel)
    if choice == "none":
        return tuple(tools), ToolPolicy("none", tuple(tools), parallel)
    if not tools:
        raise OpenAIError(
            "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
            param="tool_choice",
        )
    if choice == "required":
        return tuple(tools), ToolPolicy("any", tuple(tools), parallel)
    named = tuple(tool for tool in tools if tool.name == choice.function.name)
    if not named:
        raise OpenAIError(
            f"Invalid value for 'tool_choice': function '{choice.function.name}' is not one of 'tools'.",
            param="tool_choice",
        )
    return tuple(tools), ToolPolicy("tool", named, parallel)


def output_schema(params: ChatCompletionParams) -> Mapping[str, Any] | None:
    """The JSON Schema the answer must match (`response_format`), or None for free text."""
    fmt = params.response_format
    if isinstance(fmt, JSONObjectFormat):
        return {"type": "object"}
    if isinstance(fmt, JSONSchemaFormat):
        schema = fmt.json_schema.schema_ if fmt.json_schema.schema_ is not None else {}
        _check_schema(schema, "response_format.json_schema.schema", "Invalid schema for response_format")
        return schema
    return None


def _check_schema(schema: Mapping[str, Any], param: str, what: str) -> None:
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in exc.absolute_path)
        raise OpenAIError(
            f"{what}: not a valid JSON Schema at '{where or '(root)'}': {exc.message}",
            param=param,
            code="invalid_value",
        ) from None


def chat_turns(messages: Sequence[ChatMessage]) -> tuple[Turn, ...]:
    """Messages → engine turns. `developer` is a system turn; consecutive same-role turns are
    merged as on the Anthropic path; assistant `tool_calls` must each be answered by the `tool`
    messages right after them, as OpenAI checks. A final assistant message is a prefill."""
    turns: list[Turn] = []
    open_calls: dict[str, str] = {}  # id → name, of the latest assistant's calls
    unanswered: list[str] = []
    caller = -1  # index of the message that made them
    for index, message in enumerate(messages):
        path = f"messages[{index}]"
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                raise OpenAIError(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceding "
                    "message with 'tool_calls'.",
                    param=f"{path}.role",
                )
            if message.tool_call_id in unanswered:
                unanswered.remove(message.tool_call_id)
            name = open_calls[message.tool_call_id]
            text = _text(message.content, path)
            turns.append(Turn("tool", text, tool_call_id=message.tool_call_id, name=name))
            continue
        if unanswered:
            raise _unanswered(caller, unanswered)
        open_calls = {}
        turn = _turn(message, path)
        if turn.tool_calls:
            open_calls = {call.id: call.name for call in turn.tool_calls}
            unanswered, caller = list(open_calls), index
        if turn.role == "assistant" and not turn.text and not turn.tool_calls and index == len(messages) - 1:
            continue  # an empty final assistant message is no prefill
        _append(turns, turn)
    if unanswered:
        raise _unanswered(caller, unanswered)
    return tuple(turns)


def _unanswered(index: int, ids: Sequence[str]) -> OpenAIError:
    return OpenAIError(
        "An assistant message with 'tool_calls' must be followed by tool messages responding to each "
        f"'tool_call_id'. The following tool_call_ids did not have response messages: {', '.join(ids)}",
        param=f"messages[{index}].role",
    )


def _turn(message: ChatMessage, path: str) -> Turn:
    if isinstance(message, SystemMessage | DeveloperMessage):
        return Turn("system", _text(message.content, path))
    if isinstance(message, AssistantMessage):
        if message.audio is not None or message.function_call is not None:
            name = "audio" if message.audio is not None else "function_call"
            raise OpenAIError(f"{path}.{name}: not supported by this server", param=f"{path}.{name}")
        calls = tuple(
            _call(call.id, call.function.name, call.function.arguments, f"{path}.tool_calls[{i}]")
            for i, call in enumerate(message.tool_calls or ())
        )
        if message.content is None and not calls:
            raise OpenAIError(
                f"Invalid value for '{path}.content': expected a string, got null.", param=f"{path}.content"
            )
        return Turn("assistant", _text(message.content or "", path), tool_calls=calls)
    return Turn("user", _text(message.content, path))


def _call(call_id: str, name: str, arguments: str, path: str) -> ToolCall:
    try:
        value = json.loads(arguments) if arguments.strip() else {}
    except ValueError:
        value = None
    if not isinstance(value, dict):
        raise OpenAIError(
            f"Invalid '{path}.function.arguments': expected the JSON text of an object.",
            param=f"{path}.function.arguments",
        )
    return ToolCall(call_id, name, value)


def _text(content: str | Sequence[Any], path: str) -> str:
    """String content, or its text (and refusal) parts joined as the Anthropic path joins blocks."""
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, TextPart):
            texts.append(part.text)
        elif isinstance(part, RefusalPart):
            texts.append(part.refusal)
        elif isinstance(part, MediaPart):
            raise OpenAIError(
                f"{path}.content[{i}]: {part.type} content is not supported by this server (the model is "
                "text-only)",
                param=f"{path}.content[{i}].type",
                code="unsupported_content",
            )
    return BLOCK_SEPARATOR.join(texts)


def _append(turns: list[Turn], turn: Turn) -> None:
    """Merge into the previous turn of the same role, unless that one made calls."""
    previous = turns[-1] if turns else None
    if previous is not None and previous.role == turn.role != "tool" and not previous.tool_calls:
        text = BLOCK_SEPARATOR.join(t for t in (previous.text, turn.text) if t)
        turns[-1] = Turn(turn.role, text, tool_calls=turn.tool_calls)
    else:
        turns.append(turn)
