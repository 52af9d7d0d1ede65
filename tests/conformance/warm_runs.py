"""Harness runs forked from a warm interpreter: `python -m conformance` without its imports.

A run spends about two seconds of CPU importing the Anthropic SDK, pytest, hypothesis and
schemathesis before it sends its first request, and the tests start about eighty runs on CI's
two cores. So each pytest worker keeps one interpreter that has imported those third-party
packages, and nothing of the project, and forks it for every run (`run`): the child takes the
run's environment, working directory and arguments, sends its output to files, and runs
`conformance` as `python -m conformance` does (runpy, `__main__`, the exit code of its
SystemExit, atexit handlers). Every module of `conformance` is imported by the child as a cold
start imports it; only the interpreter and the third-party imports are shared.

A run whose environment differs from the warm interpreter's in a `PYTHON*` variable (read at
start-up: the hash seed, the path) starts cold, and so does every run where
PLUMBLINE_TEST_COLD_RUNS=1. What needs a fresh interpreter still gets one: the `--jobs`
workers (pytest-xdist starts them anew), and the installed `plumbline` of test_distribution.py.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["COLD_ENV", "run"]

COLD_ENV = "PLUMBLINE_TEST_COLD_RUNS"

# What a run imports besides the project (measured with -X importtime): `anthropic` alone is
# most of it. A package missing here is imported by the run itself, as before.
PRELOAD = (
    "anthropic",
    "anthropic.lib.streaming",
    "anthropic.lib.tools",
    "httpx",
    "pydantic",
    "jsonschema",
    "referencing",
    "rich.console",
    "rich.table",
    "rich.markup",
    "pytest",
    "_pytest.main",
    "_pytest.python",
    "_pytest.terminal",
    "hypothesis",
    "hypothesis.strategies",
    "_hypothesis_pytestplugin",
    "schemathesis",
    "xdist.plugin",
)

# The warm interpreter: imports PRELOAD, then forks once per job line read on stdin and answers
# two lines, {"pid": ...} once forked and {"code": ...} once the child has exited.
ZYGOTE = r"""
import atexit, importlib, json, os, runpy, sys, traceback

for name in json.loads(sys.argv[1]):
    try:
        importlib.import_module(name)
    except Exception:
        pass


def exit_code(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def child(job):
    code = 1
    try:
        os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
        for fd, path in ((1, job["stdout"]), (2, job["stderr"])):
            os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644), fd)
        os.chdir(job["cwd"])
        os.environ.clear()
        os.environ.update(job["env"])
        sys.path[0] = os.getcwd()  # as `python -m` puts it
        sys.argv = ["-m", *job["args"]]
        try:
            runpy.run_module("conformance", run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exit_code(exc.code)
        except BaseException:
            traceback.print_exc()
            code = 1
        atexit._run_exitfuncs()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


sys.stdout.write("ready\n")
sys.stdout.flush()
for line in sys.stdin:
    job = json.loads(line)
    pid = os.fork()
    if pid == 0:
        child(job)
    sys.stdout.write(json.dumps({"pid": pid}) + "\n")
    sys.stdout.flush()
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(json.dumps({"code": os.waitstatus_to_exitcode(status)}) + "\n")
    sys.stdout.flush()
"""


def _startup(env: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in env.items() if k.startswith("PYTHON")}


class _Zygote:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        command = [sys.executable, "-c", ZYGOTE, json.dumps(PRELOAD)]
        self.log = log = Path(tempfile.gettempdir()) / f"plumbline-warm-runs-{os.getpid()}.log"
        with log.open("wb") as sink:  # the zygote's own errors (its children write elsewhere)
            self.process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=sink, env=env
            )
        self.pending = b""
        if self._line(time.monotonic() + 120) != "ready":
            self.close()
            raise RuntimeError(
                f"the warm interpreter did not start:\n{log.read_text(errors='replace')[-3000:]}"
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def _line(self, deadline: float) -> str | None:
        """The next line the zygote writes, or None at the deadline (or if it died)."""
        assert self.process.stdout is not None
        out = self.process.stdout.fileno()
        while b"\n" not in self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([out], [], [], left)[0]:
                return None
            chunk = os.read(out, 65536)
            if not chunk:
                return None
            self.pending += chunk
        line, _, self.pending = self.pending.partition(b"\n")
        return line.decode()

    def run(
        self, args: Sequence[str], env: Mapping[str, str], cwd: str, timeout: float
    ) -> tuple[int, str, str]:
        assert self.process.stdin is not None
        deadline = time.monotonic() + timeout
        with tempfile.TemporaryDirectory(prefix="plumbline-run-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            job = {"args": list(args), "env": dict(env), "cwd": cwd, "stdout": str(out), "stderr": str(err)}
            self.process.stdin.write((json.dumps(job) + "\n").encode())
            self.process.stdin.flush()
            forked = self._line(deadline)
            if forked is None:
                raise RuntimeError("the warm interpreter did not fork")
            pid = json.loads(forked)["pid"]
            ended = self._line(deadline)
            if ended is None:
                os.kill(pid, 9)  # as subprocess.run's timeout does; the caller drops this zygote
                raise subprocess.TimeoutExpired([sys.executable, "-m", "conformance", *args], timeout)
            code = int(json.loads(ended)["code"])
            return code, out.read_text(errors="replace"), err.read_text(errors="replace")

    def close(self) -> None:
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.unlink(missing_ok=True)


_lock = threading.Lock()
_zygote: _Zygote | None = None


def _warm(env: Mapping[str, str]) -> _Zygote | None:
    """This worker's warm interpreter, started at its first run; None where `env` differs from
    it in what an interpreter reads at start-up (that run starts cold)."""
    global _zygote
    if _zygote is not None and not _zygote.alive():
        _zygote = None
    if _zygote is None:
        _zygote = _Zygote(dict(os.environ))
        atexit.register(_zygote.close)
    return _zygote if _startup(_zygote.env) == _startup(env) else None


def _drop() -> None:
    global _zygote
    if _zygote is not None:
        _zygote.process.kill()
        _zygote.close()
        _zygote = None


def run(args: Sequence[str], env: Mapping[str, str], *, timeout: float) -> tuple[int, str, str]:
    """(exit code, stdout, stderr) of `python -m conformance ARGS` with `env`, in this directory."""
    if os.environ.get(COLD_ENV) != "1":
        with _lock:
            zygote = _warm(env)
            if zygote is not None:
                try:
                    return zygote.run(args, env, os.getcwd(), timeout)
                except BaseException:
                    _drop()  # whatever it was left doing, the next run gets a new one
                    raise
    command = [sys.executable, "-m", "conformance", *args]
    done = subprocess.run(
        command, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False
    )
    return done.returncode, done.stdout, done.stderr
