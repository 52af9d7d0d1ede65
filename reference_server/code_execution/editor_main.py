"""The text editor sub-tool, run INSIDE the sandbox (`python -I -c <this file's text>`): one
command as JSON on stdin, its result as JSON on stdout. Inside, the container's directory is the
working directory and nothing of the host is there to reach, so a path (a symlink included)
resolves to what the sandbox shows and nothing else. Standard library only."""

import json
import os
import sys
from typing import Any

Result = dict[str, Any]

MAX_VIEW = 200_000  # characters of a file shown


def fail(code: str, message: str) -> Result:
    return {
        "type": "text_editor_code_execution_tool_result_error",
        "error_code": code,
        "error_message": message,
    }


def view(path: str) -> Result:
    if os.path.isdir(path):
        entries = []
        for top, dirs, files in os.walk(path):
            depth = top[len(path) :].count(os.sep)
            if depth >= 2:
                dirs[:] = []
            dirs.sort()
            entries += [os.path.join(top, name) for name in sorted(dirs) + sorted(files)]
        text = "\n".join(entries)
    else:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read(MAX_VIEW + 1)
    lines = text.splitlines()
    return {
        "type": "text_editor_code_execution_view_result",
        "content": text[:MAX_VIEW],
        "file_type": "text",
        "num_lines": len(lines),
        "start_line": 1,
        "total_lines": len(lines),
    }


def create(path: str, text: str) -> Result:
    existed = os.path.exists(path)
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)
    return {"type": "text_editor_code_execution_create_result", "is_file_update": existed}


def str_replace(path: str, old: str, new: str) -> Result:
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    count = text.count(old) if old else 0
    if count != 1:
        where = "was not found" if count == 0 else f"occurs {count} times"
        return fail("invalid_tool_input", f"old_str {where} in {path}; it must occur exactly once")
    start = text[: text.index(old)].count("\n") + 1
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text.replace(old, new, 1))
    old_lines, new_lines = old.splitlines() or [""], new.splitlines() or [""]
    return {
        "type": "text_editor_code_execution_str_replace_result",
        "lines": [f"-{line}" for line in old_lines] + [f"+{line}" for line in new_lines],
        "old_start": start,
        "old_lines": len(old_lines),
        "new_start": start,
        "new_lines": len(new_lines),
    }


def main() -> Result:
    request = json.load(sys.stdin)
    command, path = request.get("command"), request.get("path")
    if not isinstance(path, str) or not path:
        return fail("invalid_tool_input", "`path` must be a non-empty string")
    try:
        if command == "view":
            return view(path)
        if command == "create":
            text = request.get("file_text")
            if not isinstance(text, str):
                return fail("invalid_tool_input", "`create` needs a string `file_text`")
            return create(path, text)
        if command == "str_replace":
            old, new = request.get("old_str"), request.get("new_str", "")
            if not isinstance(old, str) or not isinstance(new, str):
                return fail("invalid_tool_input", "`str_replace` needs string `old_str` and `new_str`")
            return str_replace(path, old, new)
    except FileNotFoundError:
        return fail("file_not_found", f"{path} does not exist")
    except UnicodeDecodeError:
        return fail("invalid_tool_input", f"{path} is not UTF-8 text")
    except OSError as exc:  # a directory where a file is meant, no permission, ...
        return fail("invalid_tool_input", f"{path}: {exc.strerror or exc}")
    return fail("invalid_tool_input", f"unknown command {command!r}: view, create or str_replace")


json.dump(main(), sys.stdout)
