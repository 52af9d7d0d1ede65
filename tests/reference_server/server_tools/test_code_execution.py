"""Code execution over HTTP with the scripted engine (in process) and the real sandbox: each
version's sub-tools, their result blocks and error codes, the container in the response and
reused by a later request, an expired or unknown container, usage, streaming, and the refusal
when the server has no sandbox or code execution is off. test_code_execution_e2e.py runs it on
MLX."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

import pytest

from reference_server.code_execution import ContainerStore
from reference_server.engine.base import ToolCall
from reference_server.engine.toolformat import render_call
from reference_server.sandbox import Limits

from ..test_app import assert_error, sse_events
from .test_app_server_tools import body, calling, client_for, refused, types

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

CODE_2508 = {"type": "code_execution_20250825", "name": "code_execution"}
CODE_2505 = {"type": "code_execution_20250522", "name": "code_execution"}
CODE_2601 = {"type": "code_execution_20260120", "name": "code_execution"}


def bash(command: str) -> ToolCall:
    return ToolCall("x", "bash_code_execution", {"command": command})


def edit(**arguments: str) -> ToolCall:
    return ToolCall("x", "text_editor_code_execution", arguments)


def code_client(reply, tmp_path, **settings):
    return client_for(reply, code_execution=True, data_dir=tmp_path, **settings)


def test_bash_runs_in_a_container_and_the_response_names_it(tmp_path):
    client, engine = code_client(calling(bash("echo hello; echo oops >&2; exit 3")), tmp_path)
    with client:
        message = client.post("/v1/messages", json=body([CODE_2508], "Run it")).json()
    assert types(message) == ["server_tool_use", "bash_code_execution_tool_result", "text"]
    use, result, _ = message["content"]
    assert use["name"] == "bash_code_execution"
    assert use["input"] == {"command": "echo hello; echo oops >&2; exit 3"}
    assert result["tool_use_id"] == use["id"]
    assert result["content"] == {
        "type": "bash_code_execution_result",
        "stdout": "hello\n",
        "stderr": "oops\n",
        "return_code": 3,
        "content": [],
    }
    container = message["container"]
    assert container["id"].startswith("container_")
    assert container["expires_at"].endswith("Z")
    assert message["usage"]["server_tool_use"]["code_execution_requests"] == 1
    # The model read the run's output, exit status included.
    assert "hello" in engine.requests[1].turns[-1].text
    assert "return code: 3" in engine.requests[1].turns[-1].text


def test_a_later_request_that_names_the_container_finds_its_files(tmp_path):
    client, _ = code_client(calling(bash("echo kept > note.txt")), tmp_path)
    with client:
        first = client.post("/v1/messages", json=body([CODE_2508], "Write")).json()
        container = first["container"]["id"]
        client_two, _ = code_client(calling(bash("cat note.txt")), tmp_path)
    with client_two:
        again = client_two.post("/v1/messages", json=body([CODE_2508], "Read", container=container)).json()
        fresh = client_two.post("/v1/messages", json=body([CODE_2508], "Read")).json()
    assert again["container"]["id"] == container
    assert again["content"][1]["content"]["stdout"] == "kept\n"
    assert fresh["container"]["id"] != container  # without `container`, a new one
    assert fresh["content"][1]["content"]["return_code"] != 0


def test_an_unknown_container_is_a_404_and_an_expired_one_a_400(tmp_path):
    client, _ = code_client(calling(bash("true")), tmp_path)
    with client:
        unknown = client.post("/v1/messages", json=body([CODE_2508], container="container_nope"))
        assert_error(unknown, 404, "not_found_error")
        made = client.post("/v1/messages", json=body([CODE_2508])).json()["container"]["id"]
    store = ContainerStore(tmp_path, idle=0.0)  # as a server whose containers expire at once
    time.sleep(0.01)
    assert store.sweep() == 1
    assert not (tmp_path / "containers" / made).exists()  # its files are gone
    client, _ = code_client(calling(bash("true")), tmp_path)
    with client:
        expired = client.post("/v1/messages", json=body([CODE_2508], container=made))
    refused(expired, "has expired")


def test_the_text_editor_creates_views_and_replaces(tmp_path):
    calls = (
        edit(command="create", path="src/app.py", file_text="debug = True\nname = 'x'\n"),
        edit(command="str_replace", path="src/app.py", old_str="debug = True", new_str="debug = False"),
        edit(command="view", path="src/app.py"),
        edit(command="create", path="src/app.py", file_text="again\n"),
        edit(command="view", path="missing.txt"),
        edit(command="str_replace", path="src/app.py", old_str="absent", new_str="y"),
    )
    client, _ = code_client(calling(*calls), tmp_path)
    with client:
        message = client.post("/v1/messages", json=body([CODE_2508], "Edit", max_tokens=4000)).json()
    results = [block["content"] for block in message["content"] if block["type"].endswith("_tool_result")]
    assert len(results) == len(calls), message
    assert results[0] == {"type": "text_editor_code_execution_create_result", "is_file_update": False}
    assert results[1]["type"] == "text_editor_code_execution_str_replace_result"
    assert results[1]["lines"] == ["-debug = True", "+debug = False"]
    assert (results[1]["old_start"], results[1]["new_start"]) == (1, 1)
    assert results[2]["content"] == "debug = False\nname = 'x'\n"
    assert (results[2]["file_type"], results[2]["total_lines"]) == ("text", 2)
    assert results[3]["is_file_update"] is True
    assert (results[4]["type"], results[4]["error_code"]) == (
        "text_editor_code_execution_tool_result_error",
        "file_not_found",
    )
    assert (results[5]["error_code"], "not found" in results[5]["error_message"]) == (
        "invalid_tool_input",
        True,
    )


def test_the_text_editor_does_not_follow_a_link_out_of_the_container(tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("host secret")
    client, _ = code_client(
        calling(
            bash(f"ln -s {secret} leak; ln -s /etc/hostname host"),
            edit(command="view", path="leak"),
            edit(command="view", path="host"),
        ),
        tmp_path,
    )
    with client:
        message = client.post("/v1/messages", json=body([CODE_2508], "Edit")).json()
    results = [block["content"] for block in message["content"] if block["type"].endswith("_tool_result")]
    assert [r.get("error_code") for r in results[1:]] == ["file_not_found", "file_not_found"]
    assert "host secret" not in json.dumps(message)


def test_python_runs_in_the_2025_05_version_with_its_own_result_block(tmp_path):
    code = ToolCall("x", "code_execution", {"code": "import numpy; print(numpy.arange(3).sum())"})
    client, engine = code_client(calling(code), tmp_path)
    with client:
        message = client.post("/v1/messages", json=body([CODE_2505], "Sum")).json()
    assert types(message) == ["server_tool_use", "code_execution_tool_result", "text"]
    assert message["content"][1]["content"] == {
        "type": "code_execution_result",
        "stdout": "3\n",
        "stderr": "",
        "return_code": 0,
        "content": [],
    }
    names = {tool.name for tool in engine.requests[0].tools}
    assert names == {"code_execution"}


def python(code: str) -> ToolCall:
    return ToolCall("x", "code_execution", {"code": code})


STATE_CELLS = (
    "import math\nx = 41\ndef root(n):\n    return math.sqrt(n)\nclass Box:\n    size = 3\npending = (n for n in range(3))",
    "print(x + 1, root(16), Box.size)\ny = undefined_name",
    "print(sorted(n for n in dir() if not n.startswith('_')))",
)


def test_the_2026_versions_keep_python_state_between_calls_and_2025_does_not(tmp_path):
    """Names, functions, classes and imports persist from call to call in one container (each
    call its own process: the state is data the container keeps); what cannot be saved is said
    and left out; a cell that fails keeps what it ran; the 20250522 version keeps nothing."""
    cells = [python(cell) for cell in (*STATE_CELLS, "print(x)")]

    def reply(request: Any) -> str:  # each request's first generation runs the next cell
        return "Done." if any(turn.role == "tool" for turn in request.turns) else render_call(cells.pop(0))

    client, _ = code_client(reply, tmp_path)
    with client:
        first = client.post("/v1/messages", json=body([CODE_2601], "Go")).json()
        container = first["container"]["id"]
        ran = first["content"][1]["content"]
        results = [
            client.post("/v1/messages", json=body([CODE_2601], "Go", container=container)).json()["content"][
                1
            ]["content"]
            for _ in STATE_CELLS[1:]
        ]
        stateless = client.post("/v1/messages", json=body([CODE_2505], "Go")).json()["content"][1]["content"]
    assert ran["return_code"] == 0
    assert "not kept for the next call (it cannot be saved): pending" in ran["stderr"]
    assert ran["content"] == []  # the state file is the container's, not a file the code wrote
    assert results[0]["stdout"] == "42 4.0 3\n"
    assert "NameError" in results[0]["stderr"]
    assert results[0]["return_code"] == 1
    assert results[1]["stdout"] == "['Box', 'math', 'root', 'x']\n"
    assert "NameError" in stateless["stderr"]


def test_each_version_offers_its_sub_tools(tmp_path):
    client, engine = code_client("Nothing to run.", tmp_path)
    with client:
        for tool in (CODE_2505, CODE_2508, CODE_2601):
            assert client.post("/v1/messages", json=body([tool])).status_code == 200
    offered = [sorted(tool.name for tool in request.tools) for request in engine.requests]
    assert offered == [
        ["code_execution"],
        ["bash_code_execution", "text_editor_code_execution"],
        ["bash_code_execution", "code_execution", "text_editor_code_execution"],
    ]


def test_errors_are_the_documented_codes(tmp_path):
    calls = (bash("sleep 30"), bash("yes | head -c 3000000"), ToolCall("x", "bash_code_execution", {}))
    client, _ = code_client(calling(*calls), tmp_path)
    with client:
        client.app.state.service.server_tools.code.limits = Limits(wall_s=1.5, output_bytes=1 << 20)
        message = client.post("/v1/messages", json=body([CODE_2508], "Run")).json()
    codes = [
        block["content"]["error_code"]
        for block in message["content"]
        if block["type"].endswith("_tool_result")
    ]
    assert codes == ["execution_time_exceeded", "output_file_too_large", "invalid_tool_input"]


def test_the_calls_stream_as_the_other_server_tools_stream(tmp_path):
    client, _ = code_client(calling(bash("echo streamed")), tmp_path)
    with client:
        events = sse_events(client.post("/v1/messages", json=body([CODE_2508], "Run", stream=True)).text)
    starts = [e["content_block"] for e in events if e["type"] == "content_block_start"]
    assert [block["type"] for block in starts] == [
        "server_tool_use",
        "bash_code_execution_tool_result",
        "text",
    ]
    assert starts[0]["input"] == {}  # the input follows as input_json_delta
    assert starts[1]["content"]["stdout"] == "streamed\n"  # the result arrives whole
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["delta"]["container"]["id"].startswith("container_")
    assert delta["usage"]["server_tool_use"]["code_execution_requests"] == 1


def test_code_execution_is_refused_with_the_reason_when_off_or_without_a_sandbox(tmp_path, monkeypatch):
    client, _ = client_for("x", data_dir=tmp_path)
    with client:
        refused(
            client.post("/v1/messages", json=body([CODE_2508])),
            "tool type 'code_execution_20250825' is not served: code execution is off",
        )
        models = client.get("/v1/models").json()["data"][0]["capabilities"]
        assert models["code_execution"]["supported"] is False
    from reference_server.sandbox import runner

    monkeypatch.setattr(runner, "_bwrap", lambda: None)
    monkeypatch.setattr(runner, "_FOUND", {})
    client, _ = code_client("x", tmp_path)
    with client:
        refused(
            client.post("/v1/messages", json=body([CODE_2508])),
            "no sandbox for code execution: bubblewrap is not installed",
        )
    monkeypatch.undo()  # bubblewrap back: the same settings serve it
    monkeypatch.setattr(runner, "_FOUND", {})
    client, _ = code_client("x", tmp_path)
    with client:
        assert (
            client.get("/v1/models").json()["data"][0]["capabilities"]["code_execution"]["supported"] is True
        )


def test_files_the_code_writes_come_back_as_downloadable_files(tmp_path):
    write = bash("mkdir -p out && printf 'a,b\\n1,2\\n' > out/table.csv && ln -s /etc/hostname out/link")
    client, _ = code_client(calling(write, bash("cat out/table.csv")), tmp_path)
    with client:
        message = client.post("/v1/messages", json=body([CODE_2508], "Write", max_tokens=2000)).json()
        first, second = [
            b["content"] for b in message["content"] if b["type"] == "bash_code_execution_tool_result"
        ]
        (output,) = first["content"]  # the file, not the link
        assert output["type"] == "bash_code_execution_output"
        assert second["content"] == []  # a run that writes nothing returns no file
        metadata = client.get(f"/v1/files/{output['file_id']}").json()
        assert (metadata["filename"], metadata["mime_type"]) == ("table.csv", "text/csv")
        assert metadata["downloadable"] is True
        download = client.get(f"/v1/files/{output['file_id']}/content")
        assert download.status_code == 200
        assert download.content == b"a,b\n1,2\n"


def test_a_container_upload_puts_the_file_in_the_container(tmp_path):
    client, engine = code_client(calling(bash("cat data.csv; ls")), tmp_path)
    with client:
        uploaded = client.post(
            "/v1/files",
            files={"file": ("data.csv", b"x,y\n1,2\n", "text/csv")},
            headers={"anthropic-beta": "files-api-2025-04-14"},
        ).json()
        content = [
            {"type": "text", "text": "Read the table."},
            {"type": "container_upload", "file_id": uploaded["id"]},
        ]
        message = client.post("/v1/messages", json=body([CODE_2508], content)).json()
        counted = client.post(
            "/v1/messages/count_tokens",
            json={k: v for k, v in body([CODE_2508], content).items() if k != "max_tokens"},
        )
        assert counted.status_code == 200
        unknown = client.post(
            "/v1/messages", json=body([CODE_2508], [{"type": "container_upload", "file_id": "file_nope"}])
        )
        assert_error(unknown, 404, "not_found_error")
        without = client.post("/v1/messages", json=body([], content))
        refused(without, "container_upload blocks need a code execution tool")
    ran = message["content"][1]["content"]
    assert ran["stdout"] == "x,y\n1,2\ndata.csv\n"
    assert ran["content"] == []  # an upload is not a file the run wrote
    assert "/workspace/data.csv" in engine.requests[0].turns[0].text  # the model is told where it is


def test_allowed_hosts_are_reached_through_the_egress_proxy_only(tmp_path):
    """--code-execution-allow-host: the run's HTTP goes through the server's proxy, which refuses
    a host off the list and an allowed name that resolves to a private address (its own tests,
    tests/reference_server/sandbox/test_egress.py, reach a host through it)."""
    fetch = (
        "import urllib.request as u, os\n"
        "print(os.environ['HTTPS_PROXY'])\n"
        "for url in ('http://example.com/', 'http://localhost/'):\n"
        "    try: u.urlopen(url, timeout=10)\n"
        "    except Exception as e: print(getattr(e, 'code', None), e.read().decode().strip())"
    )
    client, _ = code_client(
        calling(bash(f'python -c "{fetch}"')), tmp_path, code_execution_hosts=("localhost",)
    )
    with client:
        message = client.post("/v1/messages", json=body([CODE_2508], "Fetch")).json()
    lines = message["content"][1]["content"]["stdout"].splitlines()
    assert lines[0] == "http://127.0.0.1:3128"
    assert lines[1] == "403 plumbline sandbox egress: example.com is not on the code execution allow-list"
    assert lines[2] == "403 plumbline sandbox egress: localhost resolves to no public address"


def test_a_written_file_is_read_without_following_a_link_at_any_part_of_its_path(tmp_path):
    """What a run wrote is read from the container one directory at a time, each opened without
    following a link: a directory swapped for a link to the host gives nothing back."""
    from reference_server.code_execution.executor import _read_regular

    root = tmp_path / "container"
    (root / "d").mkdir(parents=True)
    (root / "d" / "note.txt").write_text("mine")
    host = tmp_path / "host"
    host.mkdir()
    (host / "note.txt").write_text("the host's secret")
    assert _read_regular(root, "d/note.txt", 1000) == b"mine"
    (root / "d" / "note.txt").unlink()
    (root / "d").rmdir()
    (root / "d").symlink_to(host)  # what racing code would do between the scan and the read
    assert _read_regular(root, "d/note.txt", 1000) is None
