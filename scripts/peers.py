"""Real peers, one command (`nox -s peers`): other people's Anthropic-compatible servers judged
by the suite in front of our reference server, and one matrix of them all.

The reference server runs on loopback (`--model`, default tiny-random for a bounded run). In front of
it, LiteLLM's proxy serves `POST /v1/messages` two ways: `litellm-anthropic` forwards the
Anthropic request to our `/v1/messages` (its `anthropic/` provider), `litellm-openai`
translates it to our OpenAI-compatible `/v1/chat/completions` and the answer back (its
`openai/` provider, with `use_chat_completions_url_for_anthropic_messages`, since it would
otherwise call the Responses API, which we do not serve). Each column is one `plumbline` run
with its committed baseline (`reports/baselines/<slug>.toml`); `--update-baselines` writes
today's failures there instead of gating on them. OGX (Llama Stack renamed) needs Python 3.12
and its `ogx` package; where either is missing it is skipped, with the reason printed.

    python scripts/peers.py --litellm .nox/peers/litellm/bin/litellm [--model tiny-random]
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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from conformance.launcher import free_port, reference_server, stop  # noqa: E402
from conformance.matrix import Run, load_run, write_matrix  # noqa: E402

SERVER_KEY = "peers-upstream-key"  # what the peers send to our server
PEER_KEY = "sk-peers"  # what the suite sends to the peers (LiteLLM's master key)
BASELINES = ROOT / "reports" / "baselines"


@dataclass(frozen=True, slots=True)
class Column:
    slug: str
    url: str
    model: str
    api_key: str


def litellm_config(upstream: str, model: str) -> str:
    """One model name per route; JSON is YAML, so no YAML writer is needed."""
    config = {
        "model_list": [
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
        ],
        "litellm_settings": {"use_chat_completions_url_for_anthropic_messages": True},
        "general_settings": {"master_key": PEER_KEY},
    }
    return json.dumps(config, indent=2)


@contextlib.contextmanager
def litellm_proxy(executable: Path, upstream: str, model: str, logs: Path) -> Iterator[str]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as workdir:
        config = Path(workdir) / "config.yaml"
        config.write_text(litellm_config(upstream, model))
        env = {**os.environ, "LITELLM_TELEMETRY": "False", "NO_DOCS": "True", "PYTHONUNBUFFERED": "1"}
        log = logs / "litellm.log"
        with log.open("wb") as sink:
            command = [str(executable), "--config", str(config), "--host", "127.0.0.1", "--port", str(port)]
            process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, cwd=workdir)
            try:
                _wait(f"{url}/health/liveliness", process, log, timeout=180)
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


def ogx_skip_reason() -> str:
    """Why OGX cannot be judged on this machine (empty: it can)."""
    interpreter = python312()
    if interpreter is None:
        return "no Python 3.12 here (OGX needs it)"
    probe = subprocess.run(
        [interpreter, "-m", "pip", "download", "--no-deps", "--quiet", "-d", tempfile.mkdtemp(), "ogx"],
        capture_output=True,
        text=True,
        check=False,
    )
    if probe.returncode != 0:
        errors = [line for line in probe.stderr.splitlines() if line.startswith("ERROR:")]
        return f"{interpreter} is here, but pip cannot get `ogx` ({(errors or ['no output'])[-1]})"
    return ""


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
        "--api-key",
        column.api_key,
        "--profile",
        str(profile),
        "--report-dir",
        str(reports),
        "--baseline",
        str(baseline),
    ]
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
    parser.add_argument("--litellm", type=Path, required=True, help="the `litellm` executable (proxy extra)")
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
    with (
        reference_server(args.model, log=logs / "reference-server.log", api_key=SERVER_KEY) as upstream,
        litellm_proxy(args.litellm, upstream, args.model, logs) as proxy,
    ):
        columns = [
            Column("reference", upstream, args.model, SERVER_KEY),
            Column("litellm-anthropic", proxy, f"{args.model}-anthropic", PEER_KEY),
            Column("litellm-openai", proxy, f"{args.model}-openai", PEER_KEY),
        ]
        for column in columns:
            run, code = judge(
                column, args.reports, logs=logs, update_baseline=args.update_baselines, select=args.select
            )
            runs.append(run)
            codes[column.slug] = code
    reason = ogx_skip_reason()
    if reason:
        print(f"\nOGX: skipped: {reason}")
    page, table = write_matrix(runs, args.reports / "peers")
    print(f"\nmatrix: {page} and {table} ({time.monotonic() - started:.0f} s in all)")
    for slug, code in codes.items():
        print(f"  {slug}: exit {code}")
    # Exit 2 (harness error) wins, then 1 (a failure the baselines do not expect).
    return max(codes.values(), default=0)


if __name__ == "__main__":
    sys.exit(main())
