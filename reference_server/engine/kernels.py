"""CPU primitives for MLX (`cpu/`): built once with the system C++ compiler, cached.

MLX's CPU `quantized_matmul` is scalar and single-threaded on x86-64 (about 1.9 G multiply-adds
per second here, at any bit width), so until now Linux served float32 weights on OpenBLAS.
`cpu/qmm.cpp` is an MLX primitive (a node of MLX's lazy graph, so `mx.compile` and `async_eval`
see it) computing the same `x @ dequantize(w).T` with AVX-512 or AVX2 on a few threads: on two
cores it multiplies a decode step's SmolLM2 weights 10 to 20 times faster than MLX's kernel,
and 3 times faster than float32 SGEMM, which reads 4 to 8 times the bytes. `cpu/attention.cpp`
is a decode step's attention over the KV cache in one operation instead of nine.

It is compiled like blas.py's shim: from this package's sources, against the installed MLX's
headers and `libmlx.so` and the installed `nanobind` (the binding library MLX itself is built
with; `NB_DOMAIN=mlx` makes our functions accept MLX's own array objects), keyed by the hash of
everything that goes in, and checked against MLX's kernel once loaded. Anything missing (not
Linux x86-64, no compiler, no nanobind, a build error, a wrong answer) returns None with a
warning, and the engine keeps float32 on OpenBLAS.

Loading the kernel loads `libmlx.so`: call `load_kernel` only after `blas.enable_fast_blas`.
"""

from __future__ import annotations

import atexit
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import logging
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import threading
from pathlib import Path
from types import ModuleType
from typing import Any

from .blas import build_cached, cache_dir, matmul_threads

__all__ = ["KernelUnavailableError", "build_kernel", "load_kernel"]

_log = logging.getLogger(__name__)
_SOURCES = Path(__file__).with_name("cpu")
_MODULE = "_plumbline_cpu"
_lock = threading.Lock()
_loaded: list[ModuleType | None] = []  # empty until the first load_kernel()


class KernelUnavailableError(RuntimeError):
    """The kernel cannot be built or loaded here; the message says why."""


def load_kernel() -> ModuleType | None:
    """The loaded kernel module, or None (with a warning, once) when it is unavailable.

    Builds it on first use (about 10 s), then loads it from the cache. Thread-safe.
    """
    with _lock:
        if not _loaded:
            try:
                module = _import(build_kernel())
                _self_test(module)
                module.set_threads(matmul_threads())
                # Join the helper threads before the interpreter finalizes, rather than leave
                # them running while C++ static objects are destroyed at exit.
                atexit.register(module.set_threads, 1)
                _log.info("CPU quantized kernel: %s, %d threads", module.isa(), module.threads())
                _loaded.append(module)
            except (KernelUnavailableError, OSError, ImportError) as exc:
                _log.warning(
                    "The CPU quantized kernel is unavailable (%s); serving float32 weights on the BLAS. "
                    "Install a C++ compiler (g++) and the `nanobind` package for quantized decoding.",
                    exc,
                )
                _loaded.append(None)
        return _loaded[0]


def build_kernel() -> Path:
    """Compile `cpu/` into the cache unless it is there; return the shared library's path."""
    if not sys.platform.startswith("linux") or platform.machine() not in ("x86_64", "AMD64"):
        raise KernelUnavailableError(
            f"it is written for Linux on x86-64, not {sys.platform} {platform.machine()}"
        )
    nanobind = importlib.util.find_spec("nanobind")
    if nanobind is None or nanobind.origin is None:
        raise KernelUnavailableError("nanobind is not installed")
    # Where libmlx.so and MLX's headers are, without loading them (blas.py must come first).
    core = importlib.util.find_spec("mlx.core")
    if core is None or core.origin is None:
        raise KernelUnavailableError("mlx is not installed")
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        raise KernelUnavailableError("no C++ compiler (g++ or c++)")
    mlx_dir = Path(core.origin).parent
    nb_dir = Path(nanobind.origin).parent
    includes = [
        nb_dir / "include",
        nb_dir / "ext" / "robin_map" / "include",
        Path(sysconfig.get_paths()["include"]),
        mlx_dir / "include",
    ]
    sources = sorted(_SOURCES.glob("*.cpp"))
    command = [
        compiler,
        "-O3",
        "-std=c++20",
        "-shared",
        "-fPIC",
        "-fvisibility=hidden",
        "-DNDEBUG",
        # MLX's Python module is built in nanobind domain "mlx"; the same domain shares its types.
        "-DNB_DOMAIN=mlx",
        *(f"-I{path}" for path in includes),
        *(str(path) for path in sources),
        str(nb_dir / "src" / "nb_combined.cpp"),
        f"-L{mlx_dir / 'lib'}",
        "-lmlx",
        f"-Wl,-rpath,{mlx_dir / 'lib'}",
    ]
    key = hashlib.sha256(
        "\n".join(
            [
                *(path.read_text() for path in sorted(_SOURCES.iterdir()) if path.suffix in (".cpp", ".h")),
                importlib.metadata.version("mlx"),
                importlib.metadata.version("nanobind"),
                sys.implementation.cache_tag,
                *command,
                _compiler_version(compiler),
            ]
        ).encode()
    ).hexdigest()[:16]
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    target = cache_dir() / "kernels" / f"{_MODULE}-{key}{suffix}"
    if target.exists():
        return target
    _log.info("Building the CPU kernels (about 30 s of one core)")
    failed = build_cached(target, lambda tmp: _in_parts(command, tmp))
    if failed is not None:
        raise KernelUnavailableError(f"{compiler} failed: {failed.strip()[-2000:]}")
    _log.info("Built the CPU quantized kernel at %s", target)
    return target


def _in_parts(command: list[str], tmp: Path) -> list[list[str]]:
    """`command` (one compile-and-link line) as one compile per source, run side by side, and
    the link of their objects: the same build, in half the time on two cores."""
    sources = [arg for arg in command if arg.endswith(".cpp")]
    flags = [arg for arg in command[1:] if arg not in sources and not arg.startswith(("-L", "-l", "-Wl,"))]
    flags.remove("-shared")
    objects = [tmp / f"{n}-{Path(source).stem}.o" for n, source in enumerate(sources)]
    parts = [
        [command[0], *flags, "-c", source, "-o", str(obj)]
        for source, obj in zip(sources, objects, strict=True)
    ]
    links = [arg for arg in command if arg.startswith(("-L", "-l", "-Wl,"))]
    return [*parts, [command[0], "-shared", *(str(obj) for obj in objects), *links]]


def _compiler_version(compiler: str) -> str:
    done = subprocess.run([compiler, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.splitlines()[0] if done.stdout else compiler


def _import(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(_MODULE, path)
    if spec is None or spec.loader is None:
        raise KernelUnavailableError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _self_test(module: Any) -> None:
    # A wrong answer (an ABI mismatch, a kernel bug on this CPU) must never reach a client.
    import mlx.core as mx

    key = mx.random.key(7)
    for bits, rows, dtype in (
        (4, 1, mx.float32),
        (8, 5, mx.float16),
        (4, 9, mx.float16),
        (8, 12, mx.float32),
    ):
        w = mx.random.normal((200, 96), key=key)
        x = mx.random.normal((rows, 96), key=key)
        q, scales, biases = mx.quantize(w, group_size=32, bits=bits)
        scales, biases = scales.astype(dtype), biases.astype(dtype)
        expected = (
            x
            @ mx.dequantize(
                q, scales.astype(mx.float32), biases.astype(mx.float32), group_size=32, bits=bits
            ).T
        )
        try:
            got = module.quantized_matmul(x, q, scales, biases, 32, bits)
        except TypeError as exc:  # MLX's arrays not recognised: another nanobind ABI
            raise KernelUnavailableError(f"the kernel does not accept MLX arrays ({exc})") from exc
        error: Any = mx.max(mx.abs(got - expected)).item()
        if not error <= 1e-3:
            raise KernelUnavailableError(f"the kernel's answer differs from MLX's by {error} ({bits} bits)")
