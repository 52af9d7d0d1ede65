"""Running the code execution sub-tools in a container (`CodeExecutor.execute`): Python code,
bash commands and the text editor, each a sandboxed run (reference_server/sandbox/) in the
container's directory, answered with the API's result blocks.

- `code_execution` (`{code}`): the code run by the server's own Python (its packages: numpy,
  Pillow, pypdf ...) -> `code_execution_tool_result`;
- `bash_code_execution` (`{command}`): `bash -c` -> `bash_code_execution_tool_result`;
- `text_editor_code_execution` (`{command: view|create|str_replace, path, ...}`): editor_main.py
  run inside the sandbox too (a path is resolved where the code's own symlinks point, never on
  the host) -> `text_editor_code_execution_tool_result`.

A Python call of the 2026 versions may call the client's tools (programmatic.py): it then
pauses, and `resume` hands it the client's results.

Errors are the documented codes: `invalid_tool_input`, `execution_time_exceeded` (the wall-time
limit), `output_file_too_large` (bash output past the limit; Python's is cut and said so),
`file_not_found` (the editor), `unavailable` (the sandbox failed to start).
"""

from __future__ import annotations

import asyncio
import json
import mimetypes
import os
import socket
import stat
import sys
import time
from collections.abc import Awaitable, Collection, Mapping
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

from reference_server.files.store import FileStore
from reference_server.protocol import (
    BashCodeExecutionToolResultBlock,
    CodeExecutionToolResultBlock,
    TextEditorCodeExecutionToolResultBlock,
)
from reference_server.sandbox import Completed, Limits, Policy, Running, Sandbox
from reference_server.sandbox.egress import EgressProxy
from reference_server.sandbox.runner import Guard
from reference_server.workspaces.keys import DEFAULT_WORKSPACE

from .containers import Container, ContainerStore
from .programmatic import PAUSE_S, Paused, Session, StaleResults

__all__ = ["OFF", "CodeExecutor", "CodeResult"]

# Why the tool is refused when the server was not started with it.
OFF = "code execution is off (start the server with --code-execution)"

CodeResult = (
    CodeExecutionToolResultBlock | BashCodeExecutionToolResultBlock | TextEditorCodeExecutionToolResultBlock
)
_EDITOR = (Path(__file__).parent / "editor_main.py").read_text(encoding="utf-8")
_REPL = (Path(__file__).parent / "repl_main.py").read_text(encoding="utf-8")
# The Python state a stateful version's calls keep in the container (repl_main.py): the
# container's own data, never reported as a file the code wrote.
STATE_FILES = frozenset({".plumbline-python-state", ".plumbline-python-state.tmp"})
MAX_OUTPUT_FILES = 20  # files a run wrote, returned as Files API ids
_SCAN_LIMIT = 10_000  # files of a container looked at for what a run wrote
_BLOCK = 4096  # what the disk bound counts a file's size in
# Python calls paused on clients at once (each a process and its sandbox until answered or timed
# out): the server's, and one workspace's; past it the call answers `too_many_requests`.
MAX_PAUSED = 32
MAX_PAUSED_PER_WORKSPACE = 8
_DISK_POLL_S = 0.5  # how often a run's container is measured against its disk bound


class CodeExecutor:
    """The server's code execution: its sandbox, its containers, the limits of one call."""

    def __init__(
        self,
        sandbox: Sandbox,
        containers: ContainerStore,
        limits: Limits | None = None,
        files: FileStore | None = None,
        egress: EgressProxy | None = None,
        pause_s: float = PAUSE_S,
    ) -> None:
        """`pause_s`: how long a Python call's tool calls wait for the client's results."""
        self.sandbox = sandbox
        # The hosts runs may reach, through this proxy (started with the app); None: no network.
        self.egress = egress
        self.containers = containers
        self.limits = limits or Limits()
        # Files a run writes become Files API files (downloadable); None: not returned.
        self.files = files
        # One run at a time in a container: what one run wrote is read while no other run of
        # the container can change it (two requests naming one container wait their turn).
        self._running: dict[str, asyncio.Lock] = {}
        # Python calls paused on tool calls, by container and code execution call (programmatic.py).
        self._sessions: dict[tuple[str, str], Session] = {}  # (container id, call id) -> session
        self.pause_s = pause_s

    async def container(self, requested: str | None, workspace: str = DEFAULT_WORKSPACE) -> Container:
        """The container a request of `workspace` names (`UnknownContainer`, another
        workspace's too; `ContainerExpired`), or a new one of that workspace."""
        containers = self.containers.scoped(workspace)
        if requested is not None:
            return await asyncio.to_thread(containers.use, requested)
        container = await asyncio.to_thread(containers.create)
        self.sandbox.claim(container.directory)
        return container

    async def execute(
        self,
        tool_use_id: str,
        name: str,
        arguments: Mapping[str, Any],
        container: Container,
        *,
        stateful: bool = False,
        tools: Collection[str] = (),
    ) -> CodeResult | Paused:
        """Run one call of sub-tool `name` in `container`; `stateful`: Python keeps the names
        the container's earlier Python calls left (the 2026 versions); `tools`: the client tools
        its Python may call (then it may pause: `Paused`, and `resume` goes on)."""
        lock = self._running.setdefault(container.id, asyncio.Lock())
        if not (tools and stateful and name == "code_execution"):
            async with lock:
                return await self._execute(tool_use_id, name, arguments, container, stateful)
        code = arguments.get("code")
        if not isinstance(code, str) or not code.strip():
            return _error(name, tool_use_id, "invalid_tool_input")
        await lock.acquire()  # held until the run ends, pauses included (the session releases it)
        try:
            session = await self._session(tool_use_id, code, container, frozenset(tools), lock)
        except BaseException:
            lock.release()
            raise
        return await self._drive(session, session.advance())

    def waiting(self, tool_use_id: str, container: Container) -> frozenset[str] | None:
        """The tool_use ids a Python call paused in `container` waits on (empty: it timed out,
        any answer is late), or None when no such call is paused here."""
        session = self._sessions.get((container.id, tool_use_id))
        return None if session is None else session.unanswered()

    async def resume(
        self, tool_use_id: str, container: Container, results: Mapping[str, str]
    ) -> CodeResult | Paused:
        """Hand a Python call paused in `container` the client's results (tool_use id -> text):
        it goes on to its end or pauses again. A call not paused here (the server restarted)
        is the `unavailable` error; results for calls it no longer waits on (another request
        answered them) raise `StaleResults`, the run untouched."""
        session = self._sessions.get((container.id, tool_use_id))
        if session is None:
            return _error("code_execution", tool_use_id, "unavailable")
        return await self._drive(session, session.answer(results))

    async def close(self) -> None:
        """End every paused run (the server stops)."""
        for session in list(self._sessions.values()):
            await session.kill()
        self._sessions.clear()

    async def _session(
        self, tool_use_id: str, code: str, container: Container, tools: frozenset[str], lock: asyncio.Lock
    ) -> Session:
        before = await asyncio.to_thread(_snapshot, container.directory)
        limits = await self._room(container)
        ours, theirs = socket.socketpair()
        setup = json.dumps({"fd": theirs.fileno(), "tools": sorted(tools)})
        policy = self._policy(container, {"PLUMBLINE_TOOLS": setup})
        try:
            running = await self.sandbox.start(
                [sys.executable, "-I", "-c", _REPL],
                policy,
                limits,
                stdin=code.encode(),
                pass_fds=(theirs.fileno(),),
                guard=self._disk_guard(container),
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()  # the run holds its own copy
        finish = partial(self._finish, tool_use_id, container, before, lock)
        return Session(tool_use_id, container, running, ours, tools, self.limits.wall_s, finish, self.pause_s)

    async def _finish(
        self,
        tool_use_id: str,
        container: Container,
        before: dict[str, tuple[int, int]],
        lock: asyncio.Lock,
        done: Completed,
    ) -> CodeResult:
        try:
            return await self._result("code_execution", tool_use_id, done, container, before)
        finally:
            lock.release()

    async def _drive(self, session: Session, step: Awaitable[Any]) -> CodeResult | Paused:
        """Await a session's next stop: paused, it is kept for `resume`; ended, forgotten. A
        request cancelled meanwhile ends the run (nothing is left running for nobody)."""
        key = (session.container.id, session.tool_use_id)
        try:
            outcome = await step
        except StaleResults:
            raise  # another request drives the run: it goes on
        except BaseException:
            self._sessions.pop(key, None)
            await asyncio.shield(session.kill())
            raise
        now = time.time()
        for stale in [k for k, kept in self._sessions.items() if kept.stale(now)]:
            del self._sessions[stale]
        self._sessions.pop(key, None)
        if isinstance(outcome, Paused) and self._full(session.container.workspace):
            await session.kill()  # a bound on what waits on clients: its process, sockets, guard
            return _error("code_execution", session.tool_use_id, "too_many_requests")
        if isinstance(outcome, Paused):
            self._sessions[key] = session
        result: CodeResult | Paused = outcome
        return result

    def _full(self, workspace: str) -> bool:
        """No room for one more paused run: the server's, or the workspace's share of it."""
        paused = [s for s in self._sessions.values() if s.result is None]
        mine = sum(s.container.workspace == workspace for s in paused)
        return len(paused) >= MAX_PAUSED or mine >= MAX_PAUSED_PER_WORKSPACE

    async def _execute(
        self, tool_use_id: str, name: str, arguments: Mapping[str, Any], container: Container, stateful: bool
    ) -> CodeResult:
        policy = self._policy(container)
        if name == "text_editor_code_execution":
            return await self._edit(tool_use_id, arguments, policy, container)
        bash = name == "bash_code_execution"
        source = arguments.get("command" if bash else "code")
        if not isinstance(source, str) or not source.strip():
            return _error(name, tool_use_id, "invalid_tool_input")
        stdin = None
        if bash:
            command = ["bash", "-c", source]
        elif stateful:
            command, stdin = [sys.executable, "-I", "-c", _REPL], source.encode()
        else:
            command = [sys.executable, "-c", source]
        before = await asyncio.to_thread(_snapshot, container.directory)
        limits = await self._room(container)
        done = await self.sandbox.run(command, policy, limits, stdin=stdin, guard=self._disk_guard(container))
        return await self._result(name, tool_use_id, done, container, before)

    async def _room(self, container: Container) -> Limits:
        """The run's limits with no file larger than the room left in the container's disk bound."""
        bound = self.limits.disk_bytes
        used = await asyncio.to_thread(_disk_used, container.directory, bound)
        return replace(self.limits, file_bytes=max(min(self.limits.file_bytes, bound - used), 0))

    def _disk_guard(self, container: Container) -> Guard:
        """Stops a run once the container's files pass the disk bound (many files, each within
        the room left, add up past it)."""
        bound = self.limits.disk_bytes

        async def watch(running: Running) -> None:
            while True:
                await asyncio.sleep(_DISK_POLL_S)
                if await asyncio.to_thread(_disk_used, container.directory, bound) > bound:
                    running.stop(
                        f"the container's files passed its disk bound ({bound} bytes): the run was stopped"
                    )
                    return

        return watch

    def _policy(self, container: Container, env: Mapping[str, str] | None = None) -> Policy:
        egress = self.egress.socket_path if self.egress is not None else None
        return Policy(
            workdir=container.directory,
            env={"PATH": _path(), **(env or {})},
            mounts=container.mounts,
            egress=egress,
        )

    async def _result(
        self,
        name: str,
        tool_use_id: str,
        done: Completed,
        container: Container,
        before: dict[str, tuple[int, int]],
    ) -> CodeResult:
        """A Python or bash run's result block: its output, the files it wrote (Files API ids)."""
        bash = name == "bash_code_execution"
        if done.timed_out:
            return _error(name, tool_use_id, "execution_time_exceeded")
        if done.output_exceeded and bash:
            return _error(name, tool_use_id, "output_file_too_large")
        prefix = "bash_" if bash else ""
        content = _ran(done, self.limits, prefix)
        written = await asyncio.to_thread(self._keep_written, container, before)
        content["content"] = [{"type": f"{prefix}code_execution_output", "file_id": fid} for fid in written]
        return _BLOCKS[name](tool_use_id=tool_use_id, content=content)

    async def _edit(
        self, tool_use_id: str, arguments: Mapping[str, Any], policy: Policy, container: Container
    ) -> CodeResult:
        name = "text_editor_code_execution"
        done = await self.sandbox.run(
            [sys.executable, "-I", "-S", "-c", _EDITOR],
            policy,
            await self._room(container),
            stdin=json.dumps(dict(arguments)).encode(),
        )
        if done.timed_out:
            return _error(name, tool_use_id, "execution_time_exceeded")
        try:
            content = json.loads(done.stdout)
        except ValueError:
            return _error(name, tool_use_id, "unavailable")
        return TextEditorCodeExecutionToolResultBlock(tool_use_id=tool_use_id, content=content)

    def _keep_written(self, container: Container, before: dict[str, tuple[int, int]]) -> list[str]:
        """The ids of the files the run created or changed, stored in the Files API in the
        container's workspace (every process of the run has ended: nothing changes them while
        they are read)."""
        if self.files is None:
            return []
        root = container.directory
        files = self.files.scoped(container.workspace)
        after = _snapshot(root)
        changed = sorted(
            rel for rel, seen in after.items() if before.get(rel) != seen and rel not in STATE_FILES
        )
        ids = []
        for rel in changed[:MAX_OUTPUT_FILES]:
            data = _read_regular(root, rel, self.limits.file_bytes)
            if data is None:
                continue
            kind = mimetypes.guess_type(rel)[0] or "application/octet-stream"
            record = files.add(
                [data], filename=Path(rel).name, mime_type=kind, now=time.time(), downloadable=True
            )
            ids.append(record.id)
        return ids


def _disk_used(root: Path, bound: int) -> int:
    """What the container's entries take, each rounded up to 4 KiB blocks (an empty file or a
    directory takes one: a million empty files are not free); the walk stops past `bound`. A
    directory the server cannot read (the code's `chmod 000`) counts as past it: what cannot be
    measured is not room."""
    used = 0

    def unreadable(error: OSError) -> None:
        nonlocal used
        if isinstance(error, PermissionError):  # (an entry gone meanwhile takes nothing)
            used = bound + 1

    for top, dirs, names in os.walk(root, onerror=unreadable):
        used += _BLOCK * len(dirs)
        for name in names:
            try:
                size = os.lstat(os.path.join(top, name)).st_size
            except OSError:
                continue
            used += max(-(-size // _BLOCK), 1) * _BLOCK
        if used > bound:
            break
    return used


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """The container's regular files (links not followed): path -> (size, mtime)."""
    seen: dict[str, tuple[int, int]] = {}
    for top, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(top, name)
            try:
                info = os.lstat(path)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode):
                seen[os.path.relpath(path, root)] = (info.st_size, info.st_mtime_ns)
            if len(seen) >= _SCAN_LIMIT:
                return seen
    return seen


def _read_regular(root: Path, relative: str, limit: int) -> bytes | None:
    """A regular file's bytes at `relative` below `root`, never through a link at any part of its
    path (each directory opened from the one before with O_NOFOLLOW: code racing to swap one for
    a link to the host gets an error, not the host's file). None: gone, a link, or past `limit`."""
    *directories, name = Path(relative).parts
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return None
    try:
        for part in directories:
            inner = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        handle = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    with os.fdopen(handle, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return file.read(limit + 1)[:limit]


def _path() -> str:
    # `python` in a command is the server's own interpreter (its packages), then the system's tools.
    return f"{Path(sys.executable).parent}:/usr/local/bin:/usr/bin:/bin"


def _ran(done: Completed, limits: Limits, prefix: str) -> dict[str, Any]:
    stderr = done.stderr.decode("utf-8", errors="replace")
    if done.stopped is not None:
        stderr += f"\n[{done.stopped}]"
    if done.output_exceeded:
        stderr += f"\n[output past {limits.output_bytes} bytes: the run was stopped and its output cut]"
    return {
        "type": f"{prefix}code_execution_result",
        "stdout": done.stdout.decode("utf-8", errors="replace"),
        "stderr": stderr,
        "return_code": done.return_code,
        "content": [],
    }


# Each sub-tool's result block; its error content is `<sub-tool>_tool_result_error`.
_BLOCKS: dict[str, type[CodeResult]] = {
    "code_execution": CodeExecutionToolResultBlock,
    "bash_code_execution": BashCodeExecutionToolResultBlock,
    "text_editor_code_execution": TextEditorCodeExecutionToolResultBlock,
}


def _error(name: str, tool_use_id: str, code: str) -> CodeResult:
    content: dict[str, str | None] = {"type": f"{name}_tool_result_error", "error_code": code}
    if name == "text_editor_code_execution":
        content["error_message"] = None  # the editor's error alone carries a message
    return _BLOCKS[name](tool_use_id=tool_use_id, content=content)
