"""Give MLX's CPU backend an optimized BLAS before `mlx.core` is first imported.

The Linux `mlx[cpu]` wheel links the netlib reference BLAS it bundles (`mlx_cpu.libs/libblas-*`).
`libmlx.so` takes only `cblas_sgemm`, `cblas_dgemm` and `cblas_cgemm` from it (plus LAPACK
routines), and the dynamic linker binds those names to the first global definition it finds.
So loading an optimized BLAS with `RTLD_GLOBAL` before `libmlx.so` is loaded makes every MLX
matmul use it: on two cores that turns a 16-25 s wait for SmolLM2's first token into under 1 s.

PyPI's `scipy-openblas32` is self-contained but exports prefixed names (`scipy_cblas_sgemm`), so
a three-function shim exporting the plain names is compiled once with the system C compiler and
cached. Nothing here imports MLX; `load_engine` calls `enable_fast_blas` first thing.
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import logging
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Literal

__all__ = [
    "BlasInUse",
    "BlasMode",
    "BlasUnavailableError",
    "cache_dir",
    "enable_fast_blas",
    "matmul_threads",
]

BlasMode = Literal["auto", "openblas", "bundled"]
# "native": not Linux (macOS uses Metal and Accelerate, nothing to do).
BlasInUse = Literal["openblas", "bundled", "native"]

_log = logging.getLogger(__name__)
# log2 of the cycles an idle OpenBLAS helper spins before it sleeps (its minimum, 4).
OPENBLAS_THREAD_TIMEOUT = 4
_lock = threading.Lock()
_in_use: BlasInUse | None = None
# The handles must outlive the call: unloading would leave MLX calling into freed code.
_handles: list[ctypes.CDLL] = []

_SHIM_SOURCE = r"""
/* Forward the plain CBLAS names libmlx.so imports to scipy-openblas32's prefixed ones. */
typedef int blasint; /* scipy-openblas32: 32-bit integer interface */

void scipy_cblas_sgemm(int, int, int, blasint, blasint, blasint, float, const float *,
                       blasint, const float *, blasint, float, float *, blasint);
void scipy_cblas_dgemm(int, int, int, blasint, blasint, blasint, double, const double *,
                       blasint, const double *, blasint, double, double *, blasint);
void scipy_cblas_cgemm(int, int, int, blasint, blasint, blasint, const void *, const void *,
                       blasint, const void *, blasint, const void *, void *, blasint);

void cblas_sgemm(int o, int ta, int tb, blasint m, blasint n, blasint k, float alpha,
                 const float *a, blasint lda, const float *b, blasint ldb, float beta,
                 float *c, blasint ldc) {
  scipy_cblas_sgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void cblas_dgemm(int o, int ta, int tb, blasint m, blasint n, blasint k, double alpha,
                 const double *a, blasint lda, const double *b, blasint ldb, double beta,
                 double *c, blasint ldc) {
  scipy_cblas_dgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void cblas_cgemm(int o, int ta, int tb, blasint m, blasint n, blasint k, const void *alpha,
                 const void *a, blasint lda, const void *b, blasint ldb, const void *beta,
                 void *c, blasint ldc) {
  scipy_cblas_cgemm(o, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
"""


class BlasUnavailableError(RuntimeError):
    """The optimized BLAS could not be set up (explicit `openblas` mode only)."""


def cache_dir() -> Path:
    """Plumbline's cache directory: `$PLUMBLINE_CACHE_DIR`, else `~/.cache/plumbline`."""
    env = os.environ.get("PLUMBLINE_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "plumbline"


def enable_fast_blas(mode: BlasMode = "auto") -> BlasInUse:
    """Make MLX's CPU matmuls use an optimized BLAS; return which BLAS MLX will use.

    Must run before the first `import mlx.core` in the process. `auto` uses OpenBLAS from
    `scipy-openblas32` on Linux when it and a C compiler are available, else warns and keeps
    the bundled reference BLAS; `openblas` raises `BlasUnavailableError` instead of falling
    back; `bundled` changes nothing. The first call decides for the whole process.
    """
    global _in_use
    with _lock:
        if _in_use is not None:
            if mode != "auto" and mode != _in_use and _in_use != "native":
                _log.warning("BLAS already set to %s for this process; ignoring %r", _in_use, mode)
            return _in_use
        _in_use = _choose(mode)
        return _in_use


def _choose(mode: BlasMode) -> BlasInUse:
    if not sys.platform.startswith("linux"):
        return "native"
    if mode == "bundled":
        return "bundled"
    if "mlx.core" in sys.modules:
        # Extension modules load with RTLD_NOW: libmlx.so's cblas_* are bound already.
        return _unavailable(mode, "mlx.core was imported before enable_fast_blas() ran")
    try:
        _load_openblas()
    except (OSError, ImportError, AttributeError, BlasUnavailableError) as exc:
        return _unavailable(mode, str(exc))
    return "openblas"


def _unavailable(mode: BlasMode, why: str) -> BlasInUse:
    if mode == "openblas":
        raise BlasUnavailableError(f"cannot use OpenBLAS for MLX: {why}")
    _log.warning(
        "Using MLX's bundled reference BLAS (prefill and decode are many times slower): %s. "
        "Install scipy-openblas32 and a C compiler (cc/gcc) for the fast path.",
        why,
    )
    return "bundled"


def _load_openblas() -> None:
    # OpenBLAS reads this once, when it loads (importing scipy_openblas32 loads it). Its
    # helper threads otherwise spin for 2**28 cycles after each call, and a decode step calls
    # it every few milliseconds, so a helper never sleeps: on tiny-random (float32, its output
    # projection on OpenBLAS) one burnt 11.1 s CPU beside an 11.6 s decode; 2**4 cycles: 4.1 s.
    # SmolLM2 (q4) decodes and prefills as fast as before (measured alternating, 2026-12-06).
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", str(OPENBLAS_THREAD_TIMEOUT))
    try:
        import scipy_openblas32
    except ImportError as exc:
        raise ImportError("package scipy-openblas32 is not installed") from exc
    lib = Path(scipy_openblas32.get_lib_dir()) / scipy_openblas32.get_library(fullname=True)
    version = str(getattr(scipy_openblas32, "__version__", "unknown"))
    # Load OpenBLAS globally first so the shim's undefined scipy_cblas_* resolve against it.
    openblas = ctypes.CDLL(str(lib), mode=ctypes.RTLD_GLOBAL)
    _set_threads(openblas)
    shim = ctypes.CDLL(str(_shim_path(version)), mode=ctypes.RTLD_GLOBAL)
    _handles.extend([openblas, shim])
    _log.info("MLX will use OpenBLAS %s from %s", version, lib)


def matmul_threads() -> int:
    """Threads for CPU matmuls (OpenBLAS's, and the quantized kernel's in kernels.py).

    Threads that wait for each other spin. On a 2-core machine two threads decode SmolLM2 ~55%
    faster than one (15.1 vs 9.6 tok/s, first token 0.56 vs 0.72 s) and the default conformance
    run takes 80 s instead of 113 s: the harness beside the server mostly waits. But when other
    processes keep the cores busy, spinning threads collapse (5.9 tok/s with one busy
    neighbour). So: every core (up to 8) by default, PLUMBLINE_BLAS_THREADS=1 on a shared
    machine; OPENBLAS_NUM_THREADS, which OpenBLAS honours itself, is the fallback setting.
    """
    wanted = os.environ.get("PLUMBLINE_BLAS_THREADS") or os.environ.get("OPENBLAS_NUM_THREADS")
    if wanted:
        return max(1, int(wanted))
    return max(1, min(8, len(os.sched_getaffinity(0))))


def _set_threads(openblas: ctypes.CDLL) -> None:
    if os.environ.get("OPENBLAS_NUM_THREADS") and not os.environ.get("PLUMBLINE_BLAS_THREADS"):
        return  # OpenBLAS read it itself
    threads = matmul_threads()
    openblas.scipy_openblas_set_num_threads(threads)
    _log.info("OpenBLAS threads: %d", threads)


def _shim_path(openblas_version: str) -> Path:
    key = f"{openblas_version}-{sys.implementation.cache_tag}-{platform.machine()}"
    digest = hashlib.sha256(_SHIM_SOURCE.encode()).hexdigest()[:12]
    target = cache_dir() / "blas" / f"cblas-shim-{key}-{digest}.so"
    if target.exists():
        return target
    compiler = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise BlasUnavailableError("no C compiler (cc or gcc) to build the CBLAS shim")

    def command(tmp: Path) -> list[list[str]]:
        source = tmp / "shim.c"
        source.write_text(_SHIM_SOURCE)
        return [[compiler, "-O2", "-shared", "-fPIC", str(source)]]

    failed = build_cached(target, command)
    if failed is not None:
        raise BlasUnavailableError(f"{compiler} failed building the CBLAS shim: {failed}")
    _log.info("Built the CBLAS shim for MLX at %s", target)
    return target


def build_cached(target: Path, command: Callable[[Path], list[list[str]]]) -> str | None:
    """Build `target` (a file in the cache) with the compiler lines `command(tmp)`, given a
    scratch folder beside it: every line but the last runs at once, one process per core (the
    parts), then the last with `-o` added (the link); None once it is in place, else the
    compiler's error output. One process builds at a time (a lock file beside it: the servers
    and test workers that start together wait for the first, then find the file built), and it
    is moved in atomically, so nothing ever loads a half-written file."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.with_name(target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists():  # built while this process waited
            return None
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            *parts, link = command(Path(tmp))
            with ThreadPoolExecutor(max_workers=max(1, len(os.sched_getaffinity(0)))) as pool:
                ran = list(pool.map(lambda line: subprocess.run(line, capture_output=True, text=True), parts))
            failed = [done.stderr for done in ran if done.returncode != 0]
            if failed:
                return failed[0]
            built = Path(tmp) / target.name
            done = subprocess.run([*link, "-o", str(built)], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                return done.stderr
            os.replace(built, target)
    return None
