"""One cell of Python, run inside the sandbox (`python -I -c` this file's text; the code on
stdin), for the code execution versions whose interpreter state persists (20260120, 20260521).

The cell runs in a fresh `__main__` that first gets back the names the container's earlier
cells left (dill, from `STATE` in the container's directory), and leaves its own there when it
ends, an exception included (as a REPL keeps what ran before the error). Every call is still a
process of its own, gone when it ends: what persists is data in the container, never a process.
What cannot be saved (an open file, a socket, a generator) is named on stderr and not kept.
"""

import builtins
import os
import sys
import traceback
import types

import dill

STATE = ".plumbline-python-state"
_SAVED = "[not kept for the next call (it cannot be saved): {}]"


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


def save(namespace: dict[str, object]) -> None:
    kept: dict[str, object] = {}
    skipped: list[str] = []
    for name, value in namespace.items():
        if name.startswith("__") and name.endswith("__"):
            continue
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
    sys.path.insert(0, os.getcwd())  # the container's own modules import, as with `python -c`
    code = sys.stdin.read()
    status = 0
    try:
        exec(compile(code, "<code>", "exec"), namespace)
    except SystemExit as exc:
        status = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stdout.flush()
    save(namespace)
    return status


sys.exit(main())
