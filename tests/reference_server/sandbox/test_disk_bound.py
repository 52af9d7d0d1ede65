"""A container's disk bound (`Limits.disk_bytes`, code_execution/executor.py): many files each
within the per-file bound add up past it and the run is stopped, said so on stderr; one file is
cut at the room left as the run starts; a full container can still delete; and the same runs with a wide bound
write everything (the bound, not the code, stops them). Also: what the server cannot measure
counts as full, and the run's /tmp (memory) has a bound of its own."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from reference_server.code_execution import CodeExecutor, ContainerStore
from reference_server.code_execution import executor as executor_module
from reference_server.code_execution.containers import Container
from reference_server.sandbox import Limits, find_sandbox

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")

MIB = 1 << 20
# 400 files of 64 KiB, one every 10 ms: 25 MiB in about 4 s, each file well within the room.
MANY = "for i in $(seq 400); do head -c 65536 /dev/zero > f$i.bin; sleep 0.01; done; echo wrote all"


def bash(code: CodeExecutor, container: Container, command: str) -> dict[str, object]:
    result = asyncio.run(code.execute("srvtoolu_d", "bash_code_execution", {"command": command}, container))
    return result.content


def executor(tmp_path: Path, disk_bytes: int) -> tuple[CodeExecutor, Container]:
    code = CodeExecutor(find_sandbox(), ContainerStore(tmp_path), Limits(disk_bytes=disk_bytes))
    return code, asyncio.run(code.container(None))


def used(container: Container) -> int:
    return sum(path.stat().st_size for path in container.directory.rglob("*") if path.is_file())


def test_many_files_past_the_bound_stop_the_run(tmp_path: Path) -> None:
    code, container = executor(tmp_path, 4 * MIB)
    ran = bash(code, container, MANY)
    assert "wrote all" not in ran["stdout"]
    assert f"the container's files passed its disk bound ({4 * MIB} bytes)" in ran["stderr"]
    # Stopped within one look (0.5 s) of passing it: far from the 25 MiB the command writes.
    assert 3 * MIB < used(container) < 10 * MIB


def test_the_same_run_with_a_wide_bound_writes_everything(tmp_path: Path) -> None:
    code, container = executor(tmp_path, 1 << 30)
    ran = bash(code, container, MANY)
    assert ran["stdout"] == "wrote all\n"
    assert used(container) == 400 * 65536


def test_one_file_is_cut_at_the_room_left_and_a_full_container_can_delete(tmp_path: Path) -> None:
    code, container = executor(tmp_path, 2 * MIB)
    bash(code, container, "head -c 1200000 /dev/zero > first.bin")
    ran = bash(code, container, "head -c 5000000 /dev/zero > second.bin; echo status $?")
    assert ran["stdout"] != "status 0\n"  # past the room: the write failed
    assert (container.directory / "second.bin").stat().st_size <= 2 * MIB - 1200000
    freed = bash(code, container, "rm first.bin second.bin; echo $?")
    assert freed["stdout"] == "0\n"  # a full container can still delete
    # The room is measured as a run starts: the next run has it back.
    again = bash(code, container, "head -c 1500000 /dev/zero > third.bin; echo $?")
    assert again["stdout"] == "0\n"
    assert (container.directory / "third.bin").stat().st_size == 1500000


def test_a_directory_the_server_cannot_read_counts_as_past_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As a server not running as root sees the code's `chmod 000 d` (root reads through it).
    walk = os.walk

    def refusing(root: str, onerror: object = None) -> object:
        assert callable(onerror)
        onerror(PermissionError(13, "Permission denied", str(Path(root) / "d")))
        return walk(root)

    monkeypatch.setattr(executor_module.os, "walk", refusing)
    assert executor_module._disk_used(tmp_path, MIB) > MIB
    monkeypatch.setattr(executor_module.os, "walk", walk)
    assert executor_module._disk_used(tmp_path, MIB) < MIB


def test_the_runs_tmp_is_bounded(tmp_path: Path) -> None:
    code = CodeExecutor(find_sandbox(), ContainerStore(tmp_path), Limits(tmp_bytes=2 * MIB))
    container = asyncio.run(code.container(None))
    ran = bash(code, container, "head -c 5000000 /dev/zero > /tmp/big; echo status $?; stat -c %s /tmp/big")
    status, size = ran["stdout"].split("\n")[:2]
    assert status != "status 0"  # past the bound: "No space left on device"
    assert 0 < int(size) <= 2 * MIB  # and writable by the run's user (as root, its own uid) to it
