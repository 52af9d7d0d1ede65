"""Schemas llguidance cannot enforce: a grammar that does not build is a 400 naming the schema at
fault (a tool's `input_schema`, or `output_config.format.schema`), never an unconstrained call.
Shared by every dialect (the OpenAI route words its own errors from `grammar_fault`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reference_server.engine.base import Grammar
from reference_server.engine.constraint import check_grammar
from reference_server.engine.errors import GrammarError
from reference_server.errors import InternalServerError, InvalidRequestError
from reference_server.tools.definitions import ToolDefinition, ToolPolicy
from reference_server.tools.grammar import json_schema_grammar

__all__ = ["SchemaFault", "check_enforceable", "grammar_fault"]


@dataclass(frozen=True, slots=True)
class SchemaFault:
    """A schema llguidance cannot enforce: a tool's input schema, or (tool None) the output schema."""

    tool: ToolDefinition | None
    problem: str


def grammar_fault(
    grammar: Grammar, policy: ToolPolicy, output_schema: Mapping[str, Any] | None
) -> SchemaFault | None:
    """None when llguidance builds `grammar`, else the schema at fault. A fault in a grammar
    built from schemas that each compile is the server's: a 500."""
    try:
        check_grammar(grammar)
        return None
    except GrammarError as exc:
        problem = str(exc)
    for tool in policy.tools if policy.may_call else ():
        try:
            check_grammar(json_schema_grammar(tool.input_schema))
        except GrammarError as exc:
            return SchemaFault(tool, str(exc))
    if output_schema is not None:
        return SchemaFault(None, problem)
    raise InternalServerError(f"the server built an invalid grammar: {problem}")


def check_enforceable(
    grammar: Grammar,
    tools: tuple[ToolDefinition, ...],
    policy: ToolPolicy,
    output_schema: Mapping[str, Any] | None,
) -> None:
    """A grammar llguidance cannot build is a 400 naming the schema at fault, never an
    unconstrained call."""
    fault = grammar_fault(grammar, policy, output_schema)
    if fault is None:
        return
    if fault.tool is not None:
        raise InvalidRequestError(
            f"tools.{tools.index(fault.tool)}.custom.input_schema: this server cannot enforce this schema "
            f"with constrained decoding ({fault.problem})"
        )
    raise InvalidRequestError(
        f"output_config.format.schema: this server cannot enforce this schema with constrained "
        f"decoding ({fault.problem})"
    )
