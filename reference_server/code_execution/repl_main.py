"""One cell of Python, run inside the sandbox (`python -I -c` this file's text; the code on
stdin), for the code execution versions whose interpreter state persists (20260120, 20260521).

The cell runs in a fresh `__main__` that first gets back the names the container's earlier
cells left (dill, from `STATE` in the container's directory), and leaves its own there when it
ends, an exception included (as a REPL keeps what ran before the error). Every call is still a
process of its own, gone when it ends: what persists is data in the container, never a process.
What cannot be saved (an open file, a socket, a generator) is named on stderr and not kept.

The cell may `await` at its top level. With programmatic tool calling, `PLUMBLINE_TOOLS` (JSON:
the channel's descriptor and the client tools the code may call) defines one async function per
tool: it takes one dict (the tool's input) and returns the tool_result's text. The calls made in
one turn of the event loop (`asyncio.gather`) go to the server as one batch on the channel, and
the cell waits, using no CPU, until the server answers them all (the client's results, or a
timeout: `TimeoutError` in the code).
"""

import ast
import asyncio
import builtins
import inspect
import json
import os
import socket
import sys
import traceback
import types
from typing import Any

import dill

STATE = ".plumbline-python-state"
_SAVED = "[not kept for the next call (it cannot be saved): {}]"
_TIMEOUT = "Calling tool [{!r}] timed out (no response after {}s)."


def tool_functions(channel_fd: int, names: list[str]) -> dict[str, object]:
    """The client's tools as async functions (a name's `-` becomes `_`), calling through the
    server on `channel_fd`."""
    channel = socket.socket(fileno=channel_fd)
    os.set_inheritable(channel_fd, False)  # the code's own subprocesses never hold it
    replies = channel.makefile("rb")
    pending: list[tuple[dict[str, object], asyncio.Future[str]]] = []
    counter = iter(range(1, 1 << 62))

    def flush() -> None:
        batch = pending[:]
        pending.clear()
        if not batch:
            return
        calls = [call for call, _ in batch]
        channel.sendall(json.dumps({"calls": calls}, allow_nan=False).encode() + b"\n")
        line = replies.readline()  # blocks until the server answers the whole batch
        answer: dict[str, Any] = json.loads(line) if line else {"timeout": 0}
        results: dict[str, Any] = answer.get("results") or {}
        for call, future in batch:
            if future.done():
                continue
            if call["id"] in results:
                future.set_result(str(results[call["id"]]))
            else:
                future.set_exception(TimeoutError(_TIMEOUT.format(call["name"], answer.get("timeout", 0))))

    def function(name: str) -> object:
        async def call(tool_input: object = None, /, **fields: object) -> str:
            arguments = dict(tool_input or {}, **fields) if isinstance(tool_input, dict | None) else None
            if arguments is None:
                raise TypeError(f"{name}() takes one dict, the tool's input")
            json.dumps(arguments, allow_nan=False)  # the input must be JSON (else an error here, in the code)
            loop = asyncio.get_running_loop()
            future: asyncio.Future[str] = loop.create_future()
            if not pending:  # one flush per turn of the loop: gathered calls go together
                loop.call_soon(flush)
            pending.append(({"id": str(next(counter)), "name": name, "input": arguments}, future))
            return await future

        call.__name__ = call.__qualname__ = name.replace("-", "_")
        call.__doc__ = f"Call the client's tool {name!r}: one dict in, the tool_result's text out."
        return call

    return {name.replace("-", "_"): function(name) for name in names}


def run_cell(code: str, namespace: dict[str, object]) -> None:
    """Run the cell; one with a top-level `await` runs in an event loop of its own."""
    compiled = compile(code, "<code>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    if compiled.co_flags & inspect.CO_COROUTINE:
        asyncio.run(eval(compiled, namespace))
    else:
        exec(compiled, namespace)


def restore(namespace: dict[str, object]) -> None:
    if not os.path.exists(STATE):
        return
    try:
        with open(STATE, "rb") as file:
            namespace.update(dill.load(file))
    except Exception as exc:  # a state the code itself broke: start afresh, and say so
        print(
            f"[the earlier calls' Python state could not be read back: {type(exc).__name__}]", file=sys.stderr
        )


def save(namespace: dict[str, object], tools: dict[str, object]) -> None:
    kept: dict[str, object] = {}
    skipped: list[str] = []
    for name, value in namespace.items():
        if (name.startswith("__") and name.endswith("__")) or tools.get(name) is value:
            continue  # the tool functions are this call's: the next call defines its own
        try:
            dill.dumps(value, recurse=True)
        except Exception:
            skipped.append(name)
            continue
        kept[name] = value
    with open(STATE + ".tmp", "wb") as file:
        dill.dump(kept, file, recurse=True)
    os.replace(STATE + ".tmp", STATE)
    if skipped:
        print(_SAVED.format(", ".join(sorted(skipped))), file=sys.stderr)


def main() -> int:
    module = types.ModuleType("__main__")  # what the cell's functions and classes belong to
    sys.modules["__main__"] = module
    namespace = module.__dict__
    namespace["__builtins__"] = builtins
    restore(namespace)
    setup = json.loads(os.environ.get("PLUMBLINE_TOOLS", "null"))
    tools = tool_functions(setup["fd"], setup["tools"]) if setup else {}
    namespace.update(tools)
    sys.path.insert(0, os.getcwd())  # the container's own modules import, as with `python -c`
    code = sys.stdin.read()
    status = 0
    try:
        run_cell(code, namespace)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    save(namespace, tools)
    return status


sys.exit(main())
