"""CODE-*: the code execution server tool. A call runs in a container on the target, inside the
turn: its result is the sub-tool's own block (bash, text editor) in its documented shape, the
response names the container, a later request that names it finds its files, usage counts
the runs, and code that calls a client tool pauses the turn on that call (programmatic tool
calling).

Each runs only on a target that serves code execution (the profile, or one probe request: a 400
for the tool's type means absent, conformance/features.py). Every request sends back a turn
paused before its call ran (conformance/generating/code_execution.py): the command is the
harness's own, so its output is known whatever the model.
"""

from __future__ import annotations

import secrets

from conformance.catalogue import Level, prop
from conformance.generating.code_execution import (
    CODE_EXECUTION,
    CODE_EXECUTION_STATEFUL,
    EDITOR_ERROR_CODES,
    PAUSED_MAX_TOKENS,
    paused_call,
)
from conformance.generating.files import BETA as FILES_BETA
from conformance.generating.files import uploaded
from conformance.judging.checks import Cases, expect, expect_equal, not_judged, read, stop_reason
from conformance.judging.code_results import (
    MESSAGE,
    RFC3339,
    documented_error,
    expect_bash_result,
    expect_printed,
    expect_python_result,
    result_for,
)
from conformance.wire.drivers import create_json, expect_message, message_body
from conformance.wire.target import Target

DOCS = "agents-and-tools/tool-use/code-execution-tool"


@prop(
    "CODE-001",
    Level.MUST,
    "A code execution call is answered by its sub-tool's result block, in its documented shape",
    url=f"{DOCS}#response-format",
    requirement="A bash_code_execution call (server_tool_use) is answered in the same response by "
    "a bash_code_execution_tool_result whose content is a bash_code_execution_result {stdout, "
    "stderr, return_code, content} (a command that prints prints it) or an error with a documented "
    "code; a text_editor_code_execution create by a text_editor_code_execution_tool_result holding "
    "a text_editor_code_execution_create_result {is_file_update} or a documented error.",
    source="docs: agents-and-tools/tool-use/code-execution-tool (response format, errors); SDK: "
    "BashCodeExecutionResultBlock, TextEditorCodeExecutionCreateResultBlock, the error code enums",
    requires=("code_execution",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].type",
        "block:server_tool_use",
        "block:bash_code_execution_tool_result",
        "block:text_editor_code_execution_tool_result",
    ),
)
def test_code_001_result_blocks(target: Target) -> None:
    """A bash call that prints a nonce, and a text editor create, each sent back to run."""
    nonce = secrets.token_hex(4)
    cases = Cases()
    with cases.case("bash"):
        tool_id = "srvtoolu_plumbline_bash"
        message = create_json(
            target, paused_call(target, "bash_code_execution", {"command": f"echo {nonce}"}, tool_id)
        )
        ran = expect_bash_result(result_for(message, tool_id, "bash_code_execution_tool_result"))
        if ran is not None:
            expect_equal(ran["stdout"], f"{nonce}\n", "stdout of `echo` (the command ran)", reason="stdout")
            expect_equal(ran["return_code"], 0, "return_code of `echo`", reason="return-code")
    with cases.case("text editor"):
        tool_id = "srvtoolu_plumbline_edit"
        create = {"command": "create", "path": f"plumbline-{nonce}.txt", "file_text": nonce}
        message = create_json(target, paused_call(target, "text_editor_code_execution", create, tool_id))
        result = result_for(message, tool_id, "text_editor_code_execution_tool_result")
        kind = documented_error(result, "text_editor_code_execution", EDITOR_ERROR_CODES)
        if kind != "text_editor_code_execution_tool_result_error":
            expect_equal(
                kind, "text_editor_code_execution_create_result", "the content's type", reason="content-type"
            )
            read(result, "is_file_update", bool, where="a text_editor_code_execution_create_result")
    cases.check()


@prop(
    "CODE-002",
    Level.MUST,
    "The response names its container, and a request that names it finds the container's files",
    url=f"{DOCS}#reuse-containers",
    requirement="A response whose turn ran code has a top-level container {id, expires_at (RFC "
    "3339)}; a later request with `container` set to that id runs in the same container, so a "
    "file the first call wrote is there to read.",
    source='docs: agents-and-tools/tool-use/code-execution-tool — "the response also includes a '
    'top-level container object with the container\'s id and expires_at"; "Each request runs in '
    "a new container unless you pass an earlier response's container ID back\"; schema: "
    "Message.container {id, expires_at}",
    requires=("code_execution",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:container",
        "response:container",
        "response:container.id",
        "response:container.expires_at",
    ),
)
def test_code_002_container_reused(target: Target) -> None:
    """Writes a nonce to a file, then reads it back in a request naming the container."""
    nonce = secrets.token_hex(4)
    write = paused_call(
        target,
        "bash_code_execution",
        {"command": f"echo {nonce} > plumbline-note.txt"},
        "srvtoolu_plumbline_w",
    )
    first = create_json(target, write)
    written = expect_bash_result(result_for(first, "srvtoolu_plumbline_w", "bash_code_execution_tool_result"))
    if written is None or written["return_code"] != 0:
        not_judged("the command that writes the file did not run (judged by CODE-001)", judged_by="CODE-001")
    container = read(first, "container", dict, where=MESSAGE)
    container_id = read(container, "id", str, where="the Message's container")
    expires = read(container, "expires_at", str, where="the Message's container")
    expect(RFC3339.match(expires) is not None, "expires_at in RFC 3339", expires, reason="expires-at")
    read_back = paused_call(
        target,
        "bash_code_execution",
        {"command": "cat plumbline-note.txt"},
        "srvtoolu_plumbline_r",
        container=container_id,
    )
    second = create_json(target, read_back)
    found = expect_bash_result(result_for(second, "srvtoolu_plumbline_r", "bash_code_execution_tool_result"))
    expect_printed(
        found,
        f"{nonce}\n",
        f"the file written in container {container_id} read back ({nonce!r})",
        "container-files",
    )


@prop(
    "CODE-003",
    Level.SHOULD,
    "usage.server_tool_use.code_execution_requests counts the code runs",
    url=f"{DOCS}#usage-and-pricing",
    requirement="A response whose turn ran code counts the runs in usage.server_tool_use."
    "code_execution_requests: as many as the code execution result blocks it holds.",
    source='docs: agents-and-tools/tool-use/code-execution-tool — usage example "server_tool_use": '
    '{"code_execution_requests": 1} (SDK 2.17 types only web_search_requests and web_fetch_requests)',
    requires=("code_execution",),
    covers=("endpoint:POST /v1/messages", "response:usage.server_tool_use"),
)
def test_code_003_usage_counts_runs(target: Target) -> None:
    message = create_json(
        target, paused_call(target, "bash_code_execution", {"command": "true"}, "srvtoolu_plumbline_u")
    )
    content = read(message, "content", list, where=MESSAGE)
    runs = sum(
        1
        for b in content
        if isinstance(b, dict) and str(b.get("type", "")).endswith("code_execution_tool_result")
    )
    usage = read(message, "usage", dict, where=MESSAGE)
    tools = read(usage, "server_tool_use", dict, where="the Message's usage")
    expect_equal(
        tools.get("code_execution_requests"),
        runs,
        "usage.server_tool_use.code_execution_requests (the code execution result blocks)",
        reason="count",
    )


@prop(
    "CODE-004",
    Level.MUST,
    "The 2026 versions' Python keeps its names from one call to the next in a container",
    url=DOCS,
    requirement="With code_execution_20260120, a Python call (code_execution) that assigns a variable, then "
    "a later request naming the same container whose Python call prints it: the second call's stdout is "
    "the value (the interpreter state persisted across calls in the container).",
    source="docs: agents-and-tools/tool-use/code-execution-tool (tool versions: the 2026 versions keep "
    "REPL state between calls); SDK 2.17 CodeExecutionTool20260120Param; issue 45 (the versions whose "
    "interpreter state persists across calls in one container)",
    requires=("code_execution",),
    covers=("endpoint:POST /v1/messages", "request:container", "block:code_execution_tool_result"),
)
def test_code_004_python_state_persists(target: Target) -> None:
    """Assigns a nonce in one request's Python call, prints it in a second naming the container."""
    nonce = secrets.token_hex(4)
    assign = paused_call(
        target, "code_execution", {"code": f"plumbline_note = '{nonce}'"}, "srvtoolu_plumbline_py1",
        CODE_EXECUTION_STATEFUL,
    )  # fmt: skip
    response = target.request("POST", "/v1/messages", json_body=assign)
    if response.status_code == 400:
        not_judged(
            f"the target refuses {CODE_EXECUTION_STATEFUL['type']} (HTTP 400): its Python state is not judged"
        )
    first = expect_message(response)
    ran = expect_python_result(result_for(first, "srvtoolu_plumbline_py1", "code_execution_tool_result"))
    if ran is None or ran["return_code"] != 0:
        not_judged("the Python call that assigns did not run (judged by CODE-001)", judged_by="CODE-001")
    container = read(
        read(first, "container", dict, where=MESSAGE), "id", str, where="the Message's container"
    )
    show = paused_call(
        target, "code_execution", {"code": "print(plumbline_note)"}, "srvtoolu_plumbline_py2",
        CODE_EXECUTION_STATEFUL, container=container,
    )  # fmt: skip
    second = create_json(target, show)
    found = expect_python_result(result_for(second, "srvtoolu_plumbline_py2", "code_execution_tool_result"))
    expect_printed(
        found,
        f"{nonce}\n",
        f"the variable the first call set, printed by the second ({nonce!r})",
        "python-state",
    )


@prop(
    "CODE-005",
    Level.MUST,
    "A container_upload puts the Files API file in the container, for the turn's code to read",
    url=f"{DOCS}#files-api",
    requirement="A user message with a container_upload block {file_id} of an uploaded text file, and a "
    "bash call after it that looks for the file by its name: the call prints the file's content.",
    source='docs: agents-and-tools/tool-use/code-execution-tool ("Upload files to the container": '
    "container_upload content blocks referencing Files API file_ids); SDK 2.17 "
    "BetaContainerUploadBlockParam {file_id, type}",
    requires=("code_execution", "files"),
    covers=("endpoint:POST /v1/messages", "block:container_upload"),
)
def test_code_005_container_upload(target: Target) -> None:
    nonce = secrets.token_hex(4)
    name = f"plumbline-upload-{nonce}.txt"
    with uploaded(target, f"uploaded {nonce}\n".encode(), filename=name) as meta:
        file_id = read(meta, "id", str, where="the upload's answer")
        # Where the API puts an upload is not documented: the first file of its name near the root.
        command = f"cat \"$(find / -maxdepth 4 -name '{name}' -print -quit 2>/dev/null)\""
        tool_id = "srvtoolu_plumbline_upload"
        bash = {"command": command}
        call = {"type": "server_tool_use", "id": tool_id, "name": "bash_code_execution", "input": bash}
        messages = [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "Read the file I uploaded."},
                    {"type": "container_upload", "file_id": file_id},
                ],
            },
            {"role": "assistant", "content": [call]},
        ]
        body = message_body(target, max_tokens=PAUSED_MAX_TOKENS, tools=[CODE_EXECUTION], messages=messages)
        betas = {**target.headers(), "anthropic-beta": f"code-execution-2025-08-25,{FILES_BETA}"}
        message = create_json(target, body, headers=betas)
        ran = expect_bash_result(result_for(message, tool_id, "bash_code_execution_tool_result"))
        if ran is None:
            not_judged("the bash call answered a documented error (judged by CODE-001)", judged_by="CODE-001")
        expect(
            f"uploaded {nonce}" in ran["stdout"],
            f"the uploaded file's content printed ({nonce!r})",
            {k: ran[k] for k in ("stdout", "stderr", "return_code")},
            reason="upload-missing",
        )


PTC_DOCS = "agents-and-tools/tool-use/programmatic-tool-calling"


@prop(
    "CODE-006",
    Level.MUST,
    "Code that calls a client tool pauses the turn on a tool_use whose caller is the code's call,"
    " and goes on with the client's result",
    url=PTC_DOCS,
    requirement="With code_execution_20260120 and a custom tool whose allowed_callers is "
    "[code_execution_20260120], a Python call (sent back to run) whose code awaits the tool with a "
    "nonce: the answer stops with stop_reason tool_use on one tool_use of that tool, its input the "
    "code's, its caller {type: code_execution_20260120, tool_id: the code execution call's id}, and "
    "names a container; the tool's result (a second nonce) sent back in a tool_result with that "
    "container reaches the code: the next answer holds the call's code_execution_tool_result, "
    "whose stdout is what the code printed with it.",
    source="docs: agents-and-tools/tool-use/programmatic-tool-calling (allowed_callers; the tool_use "
    'block\'s "caller" naming the code execution call; "container_id is required when there are '
    'pending tool uses generated by code execution with tools"; tools are async functions in the '
    "code); SDK 2.17 ToolUseBlock.caller (ServerToolCaller20260120)",
    requires=("code_execution",),
    covers=(
        "endpoint:POST /v1/messages",
        "request:tools[].allowed_callers",
        "request:container",
        "block:tool_use",
        "block:tool_result",
        "block:code_execution_tool_result",
    ),
)
def test_code_006_code_calls_a_client_function(target: Target) -> None:
    """The code asks the client's tool for a nonce's answer; the answer sent back is printed."""
    key, answer = secrets.token_hex(4), secrets.token_hex(4)
    version = CODE_EXECUTION_STATEFUL["type"]
    lookup = {
        "name": "plumbline_lookup",
        "description": "Look a key up in the client's table.",
        "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]},
        "allowed_callers": [version],
    }
    code = f'print("answer:", await plumbline_lookup({{"key": "{key}"}}))'
    tool_id = "srvtoolu_plumbline_ptc"
    body = paused_call(target, "code_execution", {"code": code}, tool_id, CODE_EXECUTION_STATEFUL)
    body["tools"] = [CODE_EXECUTION_STATEFUL, lookup]
    response = target.request("POST", "/v1/messages", json_body=body)
    if response.status_code == 400:
        not_judged(
            f"the target refuses {version} or allowed_callers (HTTP 400): programmatic calls not judged"
        )
    paused = expect_message(response)
    content = read(paused, "content", list, where=MESSAGE)
    calls = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    kinds = [b.get("type") for b in content if isinstance(b, dict)]
    expect(
        len(calls) == 1 and calls[0].get("name") == lookup["name"],
        f"one tool_use of {lookup['name']} (the call the code made)",
        f"content types {kinds}",
        reason="no-pause",
    )
    call = calls[0]
    expect_equal(
        stop_reason(paused, where=MESSAGE), "tool_use", "stop_reason of the paused turn", reason="stop"
    )
    expect_equal(
        call.get("input"), {"key": key}, "the tool_use's input (the code's argument)", reason="input"
    )
    expect_equal(
        call.get("caller"),
        {"type": version, "tool_id": tool_id},
        "the tool_use's caller (the code execution call)",
        reason="caller",
    )
    container = read(
        read(paused, "container", dict, where=MESSAGE), "id", str, where="the Message's container"
    )
    call_id = read(call, "id", str, where="the tool_use")
    messages = body["messages"]
    answered = message_body(
        target,
        max_tokens=PAUSED_MAX_TOKENS,
        tools=body["tools"],
        container=container,
        messages=[
            *messages[:-1],
            {"role": "assistant", "content": [*messages[-1]["content"], *content]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call_id, "content": answer}]},
        ],
    )
    done = create_json(target, answered)
    ran = expect_python_result(result_for(done, tool_id, "code_execution_tool_result"))
    expect_printed(
        ran, f"answer: {answer}\n", f"the tool's result printed by the code ({answer!r})", "result"
    )
