"""The grammar that bounds what the model may write, in llguidance's Lark syntax.

Tool calls are written in the engine's built-in format (engine/toolformat.py); each tool's
arguments are its `input_schema`, embedded with `%json`, so every call names a defined tool
and its input validates, whether or not the tool is `strict`. By `tool_choice`:

- `auto`: free text that never spells a call tag, or text then one or more calls;
- `any` / `tool`: calls only (of the named tool for `tool`), no text first, as the API does
  by prefilling;
- `none`: free text that never spells a call tag;
- with `disable_parallel_tool_use`, exactly one call where calls are allowed.

Under `auto`, an answer that opens as the JSON of a call of one of its tools, bare or in a
```json fence (`{"name": "N", "arguments": {...}}`), is that call, held to the tool's schema
like any other (JSON that names no tool stays text):
Qwen2.5-Coder was never trained on the tags and writes its calls so (its first token for "Read
note.txt" with a Read tool: ``` 0.32, `{"` 0.27, the `<tool_call>` token below 0.001), as
Ollama's and vLLM's users of it report. Text that opens so is no longer free text.

Where the model's vocabulary holds a tag as one special token (`special`: Qwen's `<tool_call>`
is id 151657), the grammar names it as that token (llguidance's `<tool_call>` syntax): the model
writes the token, and llguidance refuses a special token where the grammar spells text. Free
text still never spells the tag as text, since the parser reads the decoded text.

`output_config.format` (a JSON Schema) makes the text answer that JSON. JSON is written
compactly (`, ` and `: ` separators, no free whitespace), and objects get no properties
beyond those declared (`additionalProperties` unset is read as false when generating): small
models otherwise pad the JSON, or invent keys until max_tokens. What is generated is still
valid against the schema as given.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from reference_server.engine.base import Grammar
from reference_server.engine.toolformat import CALL_OPEN, CALL_SEPARATOR, CALL_SUFFIX, CALL_TAG, call_prefix
from reference_server.protocol import PromptParams

from .definitions import ToolDefinition, ToolPolicy

__all__ = ["call_rules", "json_schema_grammar", "output_schema", "response_grammar", "spelled"]

# Text that never contains the call tag: answers that are not calls cannot fake one.
_TEXT = "TEXT: /(?s:.*)/ & ~/(?s:.*<tool_call>.*)/"
# A bare call's opening, up to its name (NAMES: a regex of the names); auto's free text never
# starts so. Then (the opening lazy: free text cannot run past the name, so the lexer ends there)
# the "arguments" key, the arguments, the closing brace (and fence): the answer's last call.
_BARE_OPENING = r'\s*(```(json)?\s*)?\{\s*"name"\s*:\s*"(NAMES)"'
_BARE_RULES = [r'BARE_ARGS: /\s*,\s*"arguments"\s*:\s*/', r"BARE_CLOSE: /\s*\}(\s*```)?/"]
# Text up to and including the first call tag (lazy: it ends there).
_HEAD = "head[lazy]: /(?s:.*)<tool_call>\\n/"
# The same where the tag is one token: text cannot run into it, so no lazy lexeme is needed.
_HEAD_TOKEN = 'head: TEXT <tool_call> "\\n" | <tool_call> "\\n"'
_COMPACT = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def _literal(text: str) -> str:
    return json.dumps(text)  # a Lark string literal: the same escapes as JSON


def spelled(text: str, special: frozenset[str] = frozenset()) -> str:
    """`text` as a Lark expression: the tags in `special` (held by the vocabulary as one special
    token each) named as that token, the rest as string literals. Without `special`, one literal."""
    if not special:
        return _literal(text)
    tags = re.compile("(" + "|".join(re.escape(tag) for tag in sorted(special, key=len, reverse=True)) + ")")
    return " ".join(part if part in special else _literal(part) for part in tags.split(text) if part)


def _json(schema: Mapping[str, Any]) -> str:
    return "%json " + json.dumps({**_closed(schema), "x-guidance": _COMPACT})


_SUBSCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SUBSCHEMA_MAPS = ("properties", "$defs", "definitions", "patternProperties")


def _closed(schema: Any) -> Any:
    """`schema` with `additionalProperties: false` wherever it declares properties and says
    nothing of others."""
    if not isinstance(schema, Mapping):
        return schema
    out = dict(schema)
    if "properties" in out and "additionalProperties" not in out and "patternProperties" not in out:
        out["additionalProperties"] = False
    for key in _SUBSCHEMA_MAPS:
        if isinstance(out.get(key), Mapping):
            out[key] = {name: _closed(sub) for name, sub in out[key].items()}
    for key in _SUBSCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_closed(sub) for sub in out[key]]
    for key in ("items", "additionalProperties", "not", "if", "then", "else"):
        if isinstance(out.get(key), Mapping):
            out[key] = _closed(out[key])
    return out


def output_schema(params: PromptParams) -> Mapping[str, Any] | None:
    """The JSON schema of `output_config.format` (structured outputs), if any."""
    config = params.output_config
    return config.format.schema_ if config is not None and config.format is not None else None


def json_schema_grammar(schema: Mapping[str, Any]) -> Grammar:
    """The whole answer is one JSON value valid against `schema`."""
    return Grammar(f"start: answer\nanswer: {_json(schema)}\n")


def response_grammar(
    policy: ToolPolicy, output_schema: Mapping[str, Any] | None, special: frozenset[str] = frozenset()
) -> Grammar | None:
    """What the answer may be under `policy` (and `output_config.format`); None: anything.
    `special`: the call format's tags the model's vocabulary holds as one special token."""
    rules: list[str] = []
    answer = "answer" if output_schema is not None else "TEXT"
    if output_schema is not None:
        rules.append(f"answer: {_json(output_schema)}")
    else:
        rules.append(_TEXT)
    if not policy.may_call:
        start = answer
        if output_schema is None and not policy.tools:
            return None  # no tools, no format: nothing to bound
    elif policy.mode == "auto":
        # After free text the tag comes through `head`; a JSON answer is not followed by calls.
        start = (
            f"{answer} | head calls | bare"
            if output_schema is None
            else f"{answer} | {spelled(CALL_OPEN, special)} calls"
        )
        if output_schema is None:
            names = "|".join(_regex_name(tool.name) for tool in policy.tools)
            rules[0] = f"{_TEXT} & ~/(?s:{_BARE_OPENING.replace('NAMES', names)}.*)/"
            rules.append(_HEAD_TOKEN if CALL_TAG in special else _HEAD)
            rules += bare_rules(policy.tools)
    else:
        start = f"{spelled(CALL_OPEN, special)} calls"
    if policy.may_call:
        rules += call_rules(policy.tools, parallel=policy.parallel, special=special)
    return Grammar("\n".join([f"start: {start}", *rules]) + "\n")


def bare_rules(tools: Sequence[ToolDefinition]) -> list[str]:
    """`bare`: one call written as its JSON alone (see the module docstring); `args_i` are
    `call_rules`'s."""
    rules = ["bare: " + " | ".join(f"bare_{i}" for i in range(len(tools))), *_BARE_RULES]
    for i, tool in enumerate(tools):
        rules.append(f"bare_open_{i}[lazy]: /{_BARE_OPENING.replace('NAMES', _regex_name(tool.name))}/")
        rules.append(f"bare_{i}: bare_open_{i} BARE_ARGS args_{i} BARE_CLOSE")
    return rules


def _regex_name(name: str) -> str:
    # A name as JSON writes it, inside a /.../ regex.
    return re.escape(json.dumps(name)[1:-1]).replace("/", "\\/")


def call_rules(
    tools: Sequence[ToolDefinition], *, parallel: bool, special: frozenset[str] = frozenset()
) -> list[str]:
    """`calls`: one call, or calls joined by the separator; each call's text after the tag."""
    more = f" ({spelled(CALL_SEPARATOR + CALL_OPEN, special)} call)*" if parallel else ""
    rules = [f"calls: call{more}", "call: " + " | ".join(f"call_{i}" for i in range(len(tools)))]
    for i, tool in enumerate(tools):
        after_tag = call_prefix(tool.name)[len(CALL_OPEN) :]
        rules.append(f"call_{i}: {_literal(after_tag)} args_{i} {spelled(CALL_SUFFIX, special)}")
        rules.append(f"args_{i}: {_json(tool.input_schema)}")
    return rules
