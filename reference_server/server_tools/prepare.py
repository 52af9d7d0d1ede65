"""The server tools' part of preparing a request (serving.py's `MessagesService.prepare` and
`count_tokens`): the tools the model is offered (the request's own, its MCP servers', deferred
ones a tool search found), web search refused where no index serves it, the plan the turn's
loop (loop.py) runs on, and a turn paused before the server ran a call, resumed by running it,
and a Python call paused on client tools (programmatic tool calling), resumed with the
client's results.
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from reference_server.code_execution import ContainerExpired, Paused, StaleResults, UnknownContainer
from reference_server.code_execution.uploads import Upload, place
from reference_server.engine.base import ToolCall, Turn
from reference_server.errors import InvalidRequestError, NotFoundError
from reference_server.files.store import FileStore
from reference_server.prepared import PreparedMessage
from reference_server.protocol import MessageParam, PromptParams, ServerToolResultBlock
from reference_server.skills.loading import LoadedSkill
from reference_server.tools.definitions import (
    ToolDefinition,
    ToolPolicy,
    check_unique,
    parse_tools,
    tool_policy,
)

from .definitions import NO_SEARCH_PROVIDER, CodeExecutionConfig, WebSearchConfig
from .history import code_results, loaded_tools, pending_call
from .loop import ServerToolRuntime, TurnHost, TurnState, next_generation, paused_calls
from .plan import ServerToolPlan

__all__ = [
    "check_served",
    "mcp_tools",
    "named_container",
    "request_tools",
    "resume_call",
    "resume_programmatic",
    "server_tool_plan",
    "with_uploads",
]


async def mcp_tools(
    runtime: ServerToolRuntime, params: PromptParams, betas: Collection[str]
) -> tuple[ToolDefinition, ...]:
    """The tools of the MCP servers the request lists (mcp.py), listed now."""
    if not params.mcp_servers and not any(t.get("type") == "mcp_toolset" for t in params.tools or ()):
        return ()
    offered = await runtime.mcp.offered(params.mcp_servers, params.tools, betas)
    return tuple(
        ToolDefinition(
            tool.name, tool.description, tool.input_schema, False, tool.config.deferred, tool.config
        )
        for tool in offered
    )


def request_tools(
    params: PromptParams, offered: tuple[ToolDefinition, ...] = ()
) -> tuple[tuple[ToolDefinition, ...], ToolPolicy, frozenset[str]]:
    """The tools (the request's, then its MCP servers'), the policy, and the deferred tools tool
    searches found earlier (callable now)."""
    tools = parse_tools(params.tools) + offered
    if offered:
        check_unique(tools)
    loaded = loaded_tools(params.messages)
    return tools, tool_policy(params, tools, loaded), loaded


def check_served(runtime: ServerToolRuntime, tools: Sequence[ToolDefinition]) -> None:
    """Web search needs the operator's search index, code execution the server's sandbox:
    without it, a request asking for the tool is a 400 that says why."""
    for tool in tools:
        config = tool.server
        if isinstance(config, CodeExecutionConfig) and runtime.code is None:
            raise InvalidRequestError(
                f"{config.path}: tool type {config.version!r} is not served: {runtime.code_refusal}"
            )
    if runtime.search_index is not None:
        return
    for index, tool in enumerate(tools):
        if isinstance(tool.server, WebSearchConfig):
            raise InvalidRequestError(
                f"tools.{index}: tool type web_search is not served: {NO_SEARCH_PROVIDER}"
            )


def server_tool_plan(
    tools: tuple[ToolDefinition, ...],
    loaded: frozenset[str],
    policy: ToolPolicy,
    output_schema: Mapping[str, Any] | None,
    context_window: int,
    documents: int,
    special: frozenset[str] = frozenset(),
) -> ServerToolPlan | None:
    """The plan of a turn whose model may call server tools (None: it runs no server-tool loop)."""
    if not policy.may_call or all(tool.server is None for tool in tools):
        return None
    return ServerToolPlan(
        tools, loaded, policy.parallel, output_schema, context_window, documents=documents, special=special
    )


async def named_container(
    runtime: ServerToolRuntime, plan: ServerToolPlan, container: str | None
) -> ServerToolPlan:
    """The plan with the container the request names, when it offers code execution: a 404 for
    an id no container has, a 400 for one that expired (its files are gone)."""
    if container is None or runtime.code is None:
        return plan
    if not any(isinstance(tool.server, CodeExecutionConfig) for tool in plan.tools):
        return plan
    try:
        found = await runtime.code.container(container, plan.workspace)
    except UnknownContainer:
        raise NotFoundError(f"container: no container with id {container!r}") from None
    except ContainerExpired:
        raise InvalidRequestError(
            f"container: container {container!r} has expired; send the request without `container`"
            " to get a new one"
        ) from None
    return replace(plan, container=found)


async def with_uploads(
    runtime: ServerToolRuntime,
    plan: ServerToolPlan | None,
    uploads: tuple[Upload, ...],
    files: FileStore | None,
) -> ServerToolPlan | None:
    """The plan with the request's container_upload files written into its container (the one
    it names, else a new one); a 400 when no code execution tool may run."""
    if not uploads:
        return plan
    code = runtime.code
    if (
        plan is None
        or code is None
        or files is None
        or not any(isinstance(tool.server, CodeExecutionConfig) for tool in plan.tools)
    ):
        raise InvalidRequestError(
            "container_upload blocks need a code execution tool in `tools` that the model may call"
        )
    container = plan.container or await code.container(None, plan.workspace)
    owner = code.sandbox.owner(container.directory)
    await asyncio.to_thread(place, uploads, container, files, owner)
    return replace(plan, container=container)


async def with_skills(
    runtime: ServerToolRuntime, plan: ServerToolPlan | None, skills: tuple[LoadedSkill, ...]
) -> ServerToolPlan | None:
    """The plan with the request's skills mounted in its container (the one it names, else a new
    one); a 400 when no code execution tool may run, or the sandbox cannot mount them."""
    if not skills:
        return plan
    code = runtime.code
    if plan is None or code is None or not any(isinstance(t.server, CodeExecutionConfig) for t in plan.tools):
        raise InvalidRequestError(
            "container.skills: skills need a code execution tool in `tools` that the model may call"
        )
    if not code.sandbox.mounts:
        raise InvalidRequestError(
            f"container.skills: this host's sandbox ({code.sandbox.kind}) cannot mount skills"
        )
    container = plan.container or await code.container(None, plan.workspace)
    container = replace(
        container,
        mounts=tuple((skill.directory, skill.path) for skill in skills),
        skills=tuple(skill.response() for skill in skills),
    )
    return replace(plan, container=container)


async def resume_call(
    host: TurnHost, runtime: ServerToolRuntime, prepared: PreparedMessage, messages: Sequence[MessageParam]
) -> PreparedMessage:
    """A turn sent back with an unanswered server_tool_use at its end: run the call now, and
    generate after its result (which the answer shows first); Python that calls client tools
    pauses instead (the answer is those calls)."""
    plan = prepared.server_tools
    call = pending_call(messages)
    if plan is None or call is None:
        return prepared
    tool = plan.tool(call.name)
    if tool is None or tool.server is None:
        raise InvalidRequestError(
            f"messages.{len(messages) - 1}: server_tool_use {call.name!r} names no server tool of"
            " this request's tools"
        )
    state = TurnState.of(prepared.request.turns, plan.loaded, plan.container)
    ran = await runtime.execute(call, tool, plan, state)
    plan = replace(plan, container=state.container)
    if isinstance(ran, Paused):
        assert isinstance(tool.server, CodeExecutionConfig)
        return replace(prepared, server_tools=replace(plan, paused=paused_calls(ran, tool.server)))
    return await _after(host, runtime, replace(prepared, server_tools=plan), state, call, ran)


async def resume_programmatic(
    host: TurnHost,
    runtime: ServerToolRuntime,
    prepared: PreparedMessage,
    messages: Sequence[MessageParam],
) -> PreparedMessage:
    """A conversation whose last message answers tool calls made by code (programmatic tool
    calling): the results go to the paused Python call, which ends (its result shown first,
    then the model goes on) or pauses again on new calls."""
    answered = code_results(messages)
    if answered is None:
        return prepared
    plan = prepared.server_tools
    where = f"messages.{len(messages) - 1}"
    tool = plan.tool("code_execution") if plan is not None else None
    if (
        plan is None
        or tool is None
        or not isinstance(tool.server, CodeExecutionConfig)
        or runtime.code is None
    ):
        raise InvalidRequestError(
            f"{where}: these tool results answer calls made by code execution: the request needs its"
            " code execution tool in `tools`"
        )
    if plan.container is None:
        raise InvalidRequestError(  # the API's words
            "container_id is required when there are pending tool uses generated by code execution"
            " with tools."
        )
    call = ToolCall(answered.tool_id, "code_execution", {})
    state = TurnState.of(prepared.request.turns, plan.loaded, plan.container)
    try:
        ran = await runtime.code.resume(answered.tool_id, plan.container, answered.results)
    except StaleResults as stale:  # not the calls it waits on (checked under the run's lock)
        raise InvalidRequestError(
            f"{where}: the tool_result blocks must answer the calls the code is waiting on:"
            f" {', '.join(stale.args[0]) or 'none (another request answered them)'}"
        ) from None
    if isinstance(ran, Paused):
        return replace(prepared, server_tools=replace(plan, paused=paused_calls(ran, tool.server)))
    return await _after(host, runtime, prepared, state, call, ran)


async def _after(
    host: TurnHost,
    runtime: ServerToolRuntime,
    prepared: PreparedMessage,
    state: TurnState,
    call: ToolCall,
    block: ServerToolResultBlock,
) -> PreparedMessage:
    """The generation after a call prepare ran: the model reads its result, which the answer
    shows first."""
    plan = prepared.server_tools
    assert plan is not None
    result, is_error = runtime.read(block, plan, state, "server_tool_result")
    turns = (
        *prepared.request.turns,
        Turn("tool", result, tool_call_id=call.id, name=call.name, is_error=is_error),
    )
    plan = replace(plan, resumed=((call.name, block),))
    resumed = replace(prepared, server_tools=plan)
    return next_generation(await host.continued(resumed, turns, prepared.request.max_tokens), plan, state)
