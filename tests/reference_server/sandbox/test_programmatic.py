"""Programmatic tool calling in the sandbox (code_execution/programmatic.py): a Python call whose
code calls the client's tools pauses with those calls, gathered calls pause together, the
client's results reach the code, a second pause follows, an unanswered pause ends in
TimeoutError inside the code, the time spent waiting is not wall time, the container is held
while paused, and nothing is left running when a driving request is cancelled."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from reference_server.code_execution import CodeExecutor, ContainerStore, Paused, StaleResults
from reference_server.code_execution import executor as executor_module
from reference_server.protocol import CodeExecutionToolResultBlock
from reference_server.sandbox import Limits, find_sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

TOOLS = frozenset({"lookup", "get-weather"})


def executor(tmp_path: Path, **options: float) -> CodeExecutor:
    pause_s = options.pop("pause_s", 30.0)
    limits = Limits(**options) if options else None  # type: ignore[arg-type]
    return CodeExecutor(find_sandbox(), ContainerStore(tmp_path), limits, pause_s=pause_s)


async def start(
    code_execution: CodeExecutor, code: str, tool_id: str = "srvtoolu_a"
) -> tuple[object, object]:
    container = await code_execution.container(None)
    outcome = await code_execution.execute(
        tool_id, "code_execution", {"code": code}, container, stateful=True, tools=TOOLS
    )
    return container, outcome


def ran(outcome: object) -> dict[str, object]:
    assert isinstance(outcome, CodeExecutionToolResultBlock), outcome
    return outcome.content


def test_a_tool_call_pauses_the_run_and_its_result_reaches_the_code(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container, paused = await start(code, 'r = await lookup({"key": "k1"})\nprint("got", r)')
        assert isinstance(paused, Paused)
        assert paused.tool_use_id == "srvtoolu_a"
        [call] = paused.calls
        assert (call.name, call.input) == ("lookup", {"key": "k1"})
        assert call.id.startswith("toolu_")
        assert code.waiting("srvtoolu_a", container) == {call.id}
        done = ran(await code.resume("srvtoolu_a", container, {call.id: "value-1"}))
        assert done["stdout"] == "got value-1\n"
        assert done["return_code"] == 0
        assert code.waiting("srvtoolu_a", container) is None  # forgotten once its result is given

    asyncio.run(scenario())


def test_gathered_calls_pause_together_and_a_second_round_pauses_again(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        source = (
            "import asyncio\n"
            'a, b = await asyncio.gather(lookup({"key": 1}), get_weather({"city": "Oslo"}))\n'
            "c = await lookup(key=a + b)\n"
            "print(c)\n"
        )
        container, first = await start(code, source)
        assert isinstance(first, Paused)
        assert [(c.name, c.input) for c in first.calls] == [
            ("lookup", {"key": 1}),
            ("get-weather", {"city": "Oslo"}),
        ]
        answers = {first.calls[0].id: "x", first.calls[1].id: "y"}
        second = await code.resume("srvtoolu_a", container, answers)
        assert isinstance(second, Paused)
        assert [(c.name, c.input) for c in second.calls] == [("lookup", {"key": "xy"})]
        done = ran(await code.resume("srvtoolu_a", container, {second.calls[0].id: "z"}))
        assert done["stdout"] == "z\n"

    asyncio.run(scenario())


def test_an_unanswered_call_fails_with_timeout_error_in_the_code(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path, pause_s=0.5)
        source = "try:\n    await lookup({})\nexcept TimeoutError as exc:\n    print('timed out:', exc)\n"
        container, paused = await start(code, source)
        assert isinstance(paused, Paused)
        await asyncio.sleep(3)  # the run goes on alone, to its end
        assert code.waiting("srvtoolu_a", container) == frozenset()  # any answer now is late
        done = ran(await code.resume("srvtoolu_a", container, {paused.calls[0].id: "late"}))
        assert done["stdout"] == "timed out: Calling tool ['lookup'] timed out (no response after 0s).\n"

    asyncio.run(scenario())


def test_waiting_on_the_client_is_not_wall_time_but_running_is(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path, wall_s=2.0)
        container, paused = await start(code, "await lookup({})\nprint('resumed')")
        assert isinstance(paused, Paused)
        await asyncio.sleep(2.5)  # longer than the wall time, spent paused
        done = ran(await code.resume("srvtoolu_a", container, {paused.calls[0].id: "ok"}))
        assert done["stdout"] == "resumed\n"
        other, again = await start(code, "await lookup({})\nwhile True: pass", tool_id="srvtoolu_b")
        assert isinstance(again, Paused)
        timed = await code.resume("srvtoolu_b", other, {again.calls[0].id: "ok"})
        assert timed.content["error_code"] == "execution_time_exceeded"  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_the_container_is_held_while_a_run_is_paused(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container, paused = await start(code, "await lookup({})")
        assert isinstance(paused, Paused)
        other = asyncio.ensure_future(
            code.execute("srvtoolu_c", "bash_code_execution", {"command": "true"}, container)
        )
        await asyncio.sleep(1.0)
        assert not other.done()  # one run at a time in a container
        await code.resume("srvtoolu_a", container, {paused.calls[0].id: "ok"})
        assert (await asyncio.wait_for(other, 30)).content["return_code"] == 0  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_a_cancelled_resume_leaves_nothing_running(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container, paused = await start(
            code, "import time\nawait lookup({})\nopen('alive', 'w').close()\ntime.sleep(60)"
        )
        assert isinstance(paused, Paused)
        resumed = asyncio.ensure_future(code.resume("srvtoolu_a", container, {paused.calls[0].id: "ok"}))
        while not (container.directory / "alive").exists():
            await asyncio.sleep(0.1)
        resumed.cancel()
        with pytest.raises(asyncio.CancelledError):
            await resumed
        assert code.waiting("srvtoolu_a", container) is None
        done = await code.execute("srvtoolu_d", "bash_code_execution", {"command": "echo free"}, container)
        assert done.content["stdout"] == "free\n"  # type: ignore[union-attr]  # the lock is free

    asyncio.run(scenario())


def test_a_tool_the_code_may_not_call_is_never_a_pause(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path, wall_s=3.0)
        source = (
            "import json, os, socket\n"
            "fd = json.loads(os.environ['PLUMBLINE_TOOLS'])['fd']\n"
            "s = socket.socket(fileno=fd)\n"
            's.sendall(b\'{"calls": [{"id": "1", "name": "rm_rf", "input": {}}]}\\n\')\n'
            "print(s.recv(10))\n"
        )
        _, outcome = await start(code, source)
        assert outcome.content["error_code"] == "execution_time_exceeded"  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_an_unknown_paused_call_is_unavailable(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container = await code.container(None)
        result = await code.resume("srvtoolu_gone", container, {"toolu_x": "late"})
        assert result.content == {"type": "code_execution_tool_result_error", "error_code": "unavailable"}  # type: ignore[union-attr]

    asyncio.run(scenario())


def test_the_tool_functions_are_not_kept_in_the_python_state(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container, paused = await start(code, "kept = 41\nkept += len(await lookup({}))")
        assert isinstance(paused, Paused)
        ran(await code.resume("srvtoolu_a", container, {paused.calls[0].id: "x"}))
        done = await code.execute(
            "srvtoolu_e",
            "code_execution",
            {"code": "print(kept, 'lookup' in dir())"},
            container,
            stateful=True,
        )
        assert ran(done)["stdout"] == "42 False\n"
        assert ran(done)["stderr"] == ""

    asyncio.run(scenario())


CHANNEL = (
    "import json, os, socket\ns = socket.socket(fileno=json.loads(os.environ['PLUMBLINE_TOOLS'])['fd'])\n"
)


@pytest.mark.parametrize(
    "write",
    [
        "s.sendall(b'x' * (2 << 20) + b'\\n')",  # a line past the channel's limit
        "s.sendall(b'[' * 100000 + b'\\n')",  # JSON nested past the parser's depth
    ],
)
def test_code_that_abuses_its_channel_ends_its_own_run_only(tmp_path: Path, write: str) -> None:
    async def scenario() -> None:
        code = executor(tmp_path, wall_s=5.0)
        container, outcome = await start(code, CHANNEL + write + "\nimport time\ntime.sleep(30)")
        assert isinstance(outcome, CodeExecutionToolResultBlock)
        assert outcome.content.get("error_code") == "execution_time_exceeded" or (
            "the run was stopped" in outcome.content["stderr"]
        )
        done = await code.execute("srvtoolu_n", "bash_code_execution", {"command": "echo next"}, container)
        assert done.content["stdout"] == "next\n"  # type: ignore[union-attr]  # the container is free

    asyncio.run(scenario())


def test_code_that_breaks_its_channel_after_a_timeout_leaves_nothing_behind(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path, pause_s=0.3)
        source = (
            CHANNEL + "try:\n    await lookup({})\nexcept TimeoutError:\n"
            "    s.sendall(b'[' * 100000 + b'\\n')\n    s.sendall(b'x' * (2 << 20) + b'\\n')\n"
            "    import time\n    time.sleep(60)\n"
        )
        container, paused = await start(code, source)
        assert isinstance(paused, Paused)
        done = await asyncio.wait_for(
            code.execute("srvtoolu_n", "bash_code_execution", {"command": "echo next"}, container), 20
        )
        assert done.content["stdout"] == "next\n"  # type: ignore[union-attr]  # the run ended, its lock freed

    asyncio.run(scenario())


def test_a_second_answer_to_the_same_calls_is_refused_and_the_run_goes_on(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        container, paused = await start(code, "await lookup({})\nprint(await lookup({}))")
        assert isinstance(paused, Paused)
        answer = {paused.calls[0].id: "1"}
        first, second = await asyncio.gather(
            code.resume("srvtoolu_a", container, answer),
            code.resume("srvtoolu_a", container, answer),
            return_exceptions=True,
        )
        assert isinstance(first, Paused)
        assert isinstance(second, StaleResults)
        done = ran(await code.resume("srvtoolu_a", container, {first.calls[0].id: "2"}))
        assert done["stdout"] == "2\n"

    asyncio.run(scenario())


def test_the_same_call_id_in_two_containers_is_two_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        code = executor(tmp_path)
        one, first = await start(code, "print('one', await lookup({}))")
        two, second = await start(code, "print('two', await lookup({}))")
        assert isinstance(first, Paused)
        assert isinstance(second, Paused)
        assert code.waiting("srvtoolu_a", one) == {first.calls[0].id}
        assert ran(await code.resume("srvtoolu_a", two, {second.calls[0].id: "b"}))["stdout"] == "two b\n"
        assert ran(await code.resume("srvtoolu_a", one, {first.calls[0].id: "a"}))["stdout"] == "one a\n"

    asyncio.run(scenario())


def test_paused_runs_are_bounded_per_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(executor_module, "MAX_PAUSED_PER_WORKSPACE", 2)

    async def scenario() -> None:
        code = executor(tmp_path)
        started = [await start(code, "await lookup({})", tool_id=f"srvtoolu_{i}") for i in range(3)]
        assert [isinstance(outcome, Paused) for _, outcome in started] == [True, True, False]
        assert started[2][1].content == {  # type: ignore[union-attr]
            "type": "code_execution_tool_result_error",
            "error_code": "too_many_requests",
        }
        await code.close()  # the server stops: every paused run ends, its container freed
        container = started[0][0]
        assert code.waiting("srvtoolu_0", container) is None
        done = await code.execute("srvtoolu_n", "bash_code_execution", {"command": "echo free"}, container)
        assert done.content["stdout"] == "free\n"  # type: ignore[union-attr]

    asyncio.run(scenario())
