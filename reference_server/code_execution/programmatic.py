"""Programmatic tool calling: Python code that calls the client's tools.

A Python call whose request has tools the code may call (`allowed_callers`) runs with a channel
to the server (a socket pair passed into the sandbox; repl_main.py's tool functions). When the
code calls tools, the run waits on the channel and the turn pauses: the response ends with a
`tool_use` per call, each naming the code execution call as its `caller`, and `stop_reason`
`tool_use`. The client answers with `tool_result` blocks in a later request naming the
container; the server hands the results to the waiting run, which goes on to its end (the
`code_execution_tool_result`) or pauses again on new calls.

The run outlives the request that started it: a `Session` here holds it, its container's lock
(one run at a time in a container, as always) and what is left of its wall time (the time spent
waiting on the client does not count). Unanswered for `pause_s` (the API's 270 s), the pending
calls fail with `TimeoutError` inside the code, and the run goes on alone; its result is kept
for the client that comes back late.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reference_server.ids import new_tool_use_id
from reference_server.sandbox import Completed, Running

from .containers import Container

__all__ = ["PAUSE_S", "Paused", "Session", "StaleResults", "ToolRequest"]

PAUSE_S = 270.0  # the API's: a pending call unanswered this long fails with TimeoutError
_KEEP_S = 3600.0  # a result nobody came back for is dropped after this long
_LINE_LIMIT = 1 << 20  # the largest batch of calls one line may carry


@dataclass(frozen=True, slots=True)
class ToolRequest:
    """A call the code made of a client tool: the `tool_use` the client answers."""

    id: str  # toolu_...
    name: str
    input: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Paused:
    """A Python call waiting on the client: the tool calls its code made."""

    tool_use_id: str  # the code execution call's (srvtoolu_...): the calls' `caller.tool_id`
    calls: tuple[ToolRequest, ...]


class StaleResults(Exception):
    """Results that are not for the calls the code waits on (other calls, or calls another
    request answered first); the calls it waits on now are the argument."""


# What the executor makes of a run's end: the code execution result block.
Finish = Callable[[Completed], Awaitable[Any]]


@dataclass(slots=True)
class Session:
    """One Python call that may pause on tool calls, from its start to its result."""

    tool_use_id: str
    container: Container
    running: Running
    channel: socket.socket  # the server's end
    tools: frozenset[str]  # the client tools the code may call
    remaining_s: float  # wall time left to the run (paused time not counted)
    finish: Finish  # its Completed -> its result block (files kept, the lock released)
    pause_s: float = PAUSE_S
    pending: dict[str, str] = field(default_factory=dict)  # toolu id -> the code's call id
    result: Any = None  # the result block, once the run ended
    ended_at: float = 0.0
    _reader: asyncio.StreamReader | None = None
    _writer: asyncio.StreamWriter | None = None
    _timer: asyncio.Task[None] | None = None
    _alone: asyncio.Task[Any] | None = None  # the run going on after a timeout
    _busy: asyncio.Lock = field(default_factory=asyncio.Lock)
    _ending: bool = False

    async def advance(self) -> Any:
        """Run on until the code calls tools (`Paused`) or the run ends (its result block)."""
        if self._reader is None:
            self._reader, self._writer = await asyncio.open_connection(sock=self.channel, limit=_LINE_LIMIT)
        loop = asyncio.get_running_loop()
        while True:
            began = loop.time()
            line = asyncio.ensure_future(self._reader.readline())
            done, _ = await asyncio.wait(
                {line, self.running.ended},
                timeout=max(self.remaining_s, 0.0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            self.remaining_s -= loop.time() - began
            if line in done:
                try:
                    read = line.result()
                except Exception:  # a line past the limit: the code broke its channel
                    self.running.stop("the code wrote past its tool channel's limit: the run was stopped")
                    return await self._end(await self.running.end())
                calls = _calls(read, self.tools)
                if calls is not None:
                    return self._pause(calls)
                if read:
                    continue  # not a batch of calls: the code's own writing, ignored
            line.cancel()
            if not done:
                return await self._end(await self.running.end(timed_out=True))
            if not await self.running.wait(max(self.remaining_s, 0.0)):
                return await self._end(await self.running.end(timed_out=True))
            return await self._end(await self.running.end())

    async def answer(self, results: Mapping[str, str]) -> Any:
        """The client's results for the pending calls (toolu id -> text): the run goes on."""
        async with self._busy:
            if self._alone is not None:  # timed out already: the run's own end
                return await asyncio.shield(self._alone)
            if results.keys() != self.pending.keys():  # not these calls (or answered already)
                raise StaleResults(sorted(self.pending))
            if self._timer is not None:
                self._timer.cancel()
            self._reply({"results": {self.pending[key]: text for key, text in results.items()}})
            self.pending.clear()
            return await self.advance()

    def unanswered(self) -> frozenset[str]:
        """The calls the client must answer (none once they timed out: any answer is late)."""
        return frozenset(self.pending) if self._alone is None else frozenset()

    async def kill(self) -> None:
        """End the run now (the server stops, or the request driving it was cancelled)."""
        for task in (self._timer, self._alone):
            if task is not None:
                task.cancel()
        await self._end(await self.running.end())

    def _pause(self, calls: list[tuple[str, str, dict[str, Any]]]) -> Paused:
        requests = []
        for call_id, name, arguments in calls:
            request = ToolRequest(new_tool_use_id(), name, arguments)
            self.pending[request.id] = call_id
            requests.append(request)
        self._timer = asyncio.ensure_future(self._time_out())
        return Paused(self.tool_use_id, tuple(requests))

    async def _time_out(self) -> None:
        """Unanswered: the calls fail in the code, and the run goes on with no client (each
        later batch failing at once) to its end, kept for a late client."""
        await asyncio.sleep(self.pause_s)
        async with self._busy:
            self._alone = asyncio.ensure_future(self._alone_to_end())

    async def _alone_to_end(self) -> Any:
        try:
            while True:
                self.pending.clear()
                self._reply({"timeout": round(self.pause_s)})
                outcome = await self.advance()
                if not isinstance(outcome, Paused):
                    return outcome
                if self._timer is not None:
                    self._timer.cancel()
        finally:  # whatever happens, nothing of the run outlives this
            await asyncio.shield(self._end(await asyncio.shield(self.running.end())))

    def _reply(self, answer: dict[str, Any]) -> None:
        assert self._writer is not None
        with contextlib.suppress(OSError):
            self._writer.write(json.dumps(answer).encode() + b"\n")

    async def _end(self, done: Completed) -> Any:
        if self._ending:  # once (a kill may race the run's own end): finishing frees the container
            return self.result
        self._ending = True
        if self._writer is not None:
            self._writer.close()
        else:
            self.channel.close()
        self.result = await self.finish(done)
        self.ended_at = time.time()
        return self.result

    def stale(self, now: float) -> bool:
        return self.result is not None and now - self.ended_at > _KEEP_S


def _calls(line: bytes, tools: frozenset[str]) -> list[tuple[str, str, dict[str, Any]]] | None:
    """A batch the code's tool functions sent: (its call id, tool name, input) each; None for
    anything else (a tool the code may not call among them too)."""
    try:
        batch = json.loads(line)
    except (ValueError, RecursionError):  # not JSON, or nested past the parser's depth
        return None
    calls = batch.get("calls") if isinstance(batch, dict) else None
    if not isinstance(calls, list) or not calls:
        return None
    found = []
    for call in calls:
        if not isinstance(call, dict):
            return None
        call_id, name, arguments = call.get("id"), call.get("name"), call.get("input")
        if not isinstance(call_id, str) or name not in tools or not isinstance(arguments, dict):
            return None
        found.append((call_id, name, arguments))
    return found
