"""Plumbline as a server's maintainer installs it, in a fresh virtual environment with nothing of
this checkout:

- `python -m build` makes an sdist and a wheel that `twine check` accepts; with only the wheel
  installed (no server extra), `plumbline --version` names the catalogue, and a scratch
  project's own pytest judges a target with `--plumbline-target` (the `pytest11` entry point)
  beside the project's own tests, with the same verdict and reports as the `plumbline` command;
- the GitHub Action's script steps (action.yml), run as the runner runs them: the install step
  installs this checkout (GITHUB_ACTION_PATH), and the judge step, on the reference server
  and then through a fault, writes the job summary, the step outputs and one annotation per
  new failure, and exits with plumbline's code.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance import __version__
from conformance.catalogue import catalogue_hash

from .fault_proxy import FaultProxy, running_proxy
from .faults import fault_catalogue
from .suite import API_KEY

# One worker builds the wheel and its environment once for every test here.
pytestmark = [pytest.mark.slow, pytest.mark.mlx, pytest.mark.xdist_group("distribution")]

REPO = Path(__file__).resolve().parents[2]
OWN_TESTS = """
def test_projects_arithmetic():
    assert 1 + 1 == 2
"""
FAILING_OWN_TEST = """
def test_projects_failure():
    assert 1 + 1 == 3
"""


def run(
    *command: str | Path, cwd: Path | None = None, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    return subprocess.run(
        [str(part) for part in command], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )


def uv() -> str:
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "uv (the test extra) installs the wheel into a fresh environment"
    return found


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    built = run(sys.executable, "-m", "build", "--installer", "uv", "--outdir", out, REPO)
    assert built.returncode == 0, built.stdout + built.stderr
    return out


@pytest.fixture(scope="module")
def venv(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh environment with the wheel and its dependencies, nothing of this checkout."""
    where = tmp_path_factory.mktemp("venv") / "env"
    # --seed: pip too, which the action's install step uses.
    assert run(uv(), "venv", "--quiet", "--seed", "--python", sys.executable, where).returncode == 0
    (wheel,) = dist.glob("plumbline-*.whl")
    installed = run(uv(), "pip", "install", "--quiet", "--python", where / "bin" / "python", wheel)
    assert installed.returncode == 0, installed.stderr
    return where / "bin"


def test_the_sdist_and_the_wheel_pass_twine_check(dist: Path):
    names = sorted(path.name for path in dist.iterdir())
    assert names == [f"plumbline-{__version__}-py3-none-any.whl", f"plumbline-{__version__}.tar.gz"]
    checked = run(sys.executable, "-m", "twine", "check", "--strict", *sorted(dist.iterdir()))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_installed_plumbline_names_its_catalogue(venv: Path):
    shown = run(venv / "plumbline", "--version")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith(f"plumbline {__version__} (catalogue {catalogue_hash()}, ")
    # Only the harness is installed: the server's dependencies are the `server` extra.
    assert run(venv / "python", "-c", "import litestar").returncode != 0


def test_a_projects_pytest_judges_a_target_beside_its_own_tests(
    venv: Path, tiny_random_url: str, tmp_path: Path
):
    project = tmp_path / "project"
    (project / "tests").mkdir(parents=True)
    (project / "tests" / "test_own.py").write_text(OWN_TESTS)
    pytest_in_venv = (venv / "python", "-m", "pytest", "-p", "no:cacheprovider")

    alone = run(*pytest_in_venv, cwd=project)  # without a target the plugin adds nothing
    assert alone.returncode == 0, alone.stdout
    assert "1 passed" in alone.stdout
    assert "Plumbline" not in alone.stdout

    judge = (
        f"--plumbline-target={tiny_random_url}",
        f"--plumbline-api-key={API_KEY}",
        "--plumbline-report-dir=reports",
        "--plumbline-run-id=embedded",
    )
    # The project's own tests, one failing, beside the catalogue: the run fails for the
    # project's test alone (the catalogue's property passed, and is reported).
    (project / "tests" / "test_own_failing.py").write_text(FAILING_OWN_TEST)
    judged = run(*pytest_in_venv, *judge, "-k", "msg_001 or projects_", cwd=project)
    assert judged.returncode == 1, judged.stdout + judged.stderr
    assert "1 failed, 2 passed" in judged.stdout
    (index_file,) = (project / "reports").glob("*/embedded/index.json")
    index = json.loads(index_file.read_text())
    assert [(p["id"], p["verdict"]) for p in index["properties"]] == [("MSG-001", "PASS")]
    assert index["suite"]["catalogue"] == catalogue_hash()

    command = run(
        venv / "plumbline", "--target", tiny_random_url, "--api-key", API_KEY, "-k", "msg_001",
        "--report-dir", "command-reports", cwd=project,
    )  # fmt: skip
    assert command.returncode == 0, command.stdout + command.stderr  # all passed: the gate is 0
    (command_index,) = (project / "command-reports").glob("*/*/index.json")
    assert [(p["id"], p["verdict"]) for p in json.loads(command_index.read_text())["properties"]] == [
        ("MSG-001", "PASS")
    ]


@pytest.mark.deep  # the server's dependencies (MLX, transformers, ...): a large download on a cold cache
def test_the_server_extra_gives_the_reference_server(dist: Path, tmp_path: Path):
    where = tmp_path / "server-env"
    assert run(uv(), "venv", "--quiet", "--python", sys.executable, where).returncode == 0
    (wheel,) = dist.glob("plumbline-*.whl")
    installed = run(
        uv(), "pip", "install", "--quiet", "--python", where / "bin" / "python", f"{wheel}[server]"
    )
    assert installed.returncode == 0, installed.stderr
    helped = run(where / "bin" / "python", "-m", "reference_server", "--help")
    assert helped.returncode == 0, helped.stderr
    assert "--log-format" in helped.stdout


# ---------------------------------------------------------------- the GitHub Action


ACTION = yaml.safe_load((REPO / "action.yml").read_text())
EXPRESSION = re.compile(r"\$\{\{\s*inputs\.([a-z-]+)\s*\}\}")


def step(step_id: str) -> dict[str, object]:
    return next(s for s in ACTION["runs"]["steps"] if s.get("id") == step_id)


def run_step(
    step_id: str, venv: Path, inputs: dict[str, str], workspace: Path
) -> subprocess.CompletedProcess[str]:
    """A `run` step as the runner runs it: `${{ inputs.* }}` replaced by the inputs (or their
    defaults), the step's env set, the GitHub files in the workspace, bash with the venv first."""
    values = {name: spec.get("default", "") for name, spec in ACTION["inputs"].items()} | inputs
    found = step(step_id)
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PLUMBLINE_API_KEY")}
    env |= {
        name: EXPRESSION.sub(lambda m: values[m[1]], str(value))
        for name, value in found.get("env", {}).items()
    }
    env |= {
        "PATH": f"{venv}{os.pathsep}{env['PATH']}",
        "GITHUB_ACTION_PATH": str(REPO),
        "GITHUB_OUTPUT": str(workspace / "output"),
        "GITHUB_STEP_SUMMARY": str(workspace / "summary"),
    }
    assert found["shell"] == "bash"
    return subprocess.run(
        ["bash", "-e", "-c", str(found["run"])],
        cwd=workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def outputs(workspace: Path) -> dict[str, str]:
    lines = (workspace / "output").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines)


def test_the_action_names_only_inputs_and_steps_it_declares():
    text = (REPO / "action.yml").read_text()
    assert set(EXPRESSION.findall(text)) <= set(ACTION["inputs"])
    ids = {s.get("id") for s in ACTION["runs"]["steps"]}
    assert set(re.findall(r"steps\.([a-z-]+)\.outputs", text)) <= ids
    assert ACTION["inputs"]["target"]["required"] is True


def test_the_actions_steps_judge_report_and_annotate(venv: Path, tiny_random_url: str, tmp_path: Path):
    installed = run_step("install", venv, {}, tmp_path)
    assert installed.returncode == 0, installed.stdout + installed.stderr

    good = tmp_path / "good"
    good.mkdir()
    inputs = {"target": tiny_random_url, "api-key": API_KEY, "args": "-k msg_001", "report-dir": "reports"}
    judged = run_step("judge", venv, inputs, good)
    assert judged.returncode == 0, judged.stdout + judged.stderr
    assert "::error" not in judged.stdout
    assert outputs(good)["exit-code"] == "0"
    run_dir = good / outputs(good)["run-dir"]  # relative, as the inputs gave it: to the workspace
    assert (run_dir / "junit.xml").is_file()
    assert (good / "summary").read_text().strip() == (run_dir / "summary.md").read_text().strip()

    proxy = FaultProxy(tiny_random_url, fault_catalogue(API_KEY))
    bad = tmp_path / "bad"
    bad.mkdir()
    with running_proxy(proxy) as faulted_url:
        failed = run_step("judge", venv, {**inputs, "target": faulted_url}, bad)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    annotations = [line for line in failed.stdout.splitlines() if line.startswith("::error")]
    assert len(annotations) == 1, failed.stdout
    assert annotations[0].startswith("::error title=MSG-001 ")
    assert outputs(bad)["exit-code"] == "1"
    assert "MSG-001" in (bad / "summary").read_text()
