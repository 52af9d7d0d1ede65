"""The GitHub Action's judging step, without a target: its command line and its annotations."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from conformance.integrations.github import annotation, main, plumbline_args

REPO = Path(__file__).resolve().parents[2]


def test_the_inputs_become_plumbline_options():
    env = {
        "INPUT_TARGET": "http://127.0.0.1:8000",
        "INPUT_REPORT_DIR": "out",
        "INPUT_MODEL": "m",
        "INPUT_PROFILE": "",
        "INPUT_STRICT": "True",
        "INPUT_JOBS": "2",
        "INPUT_API_VERSION": "2023-06-01",
        "INPUT_ARGS": "-k 'stream and not 003' --timeout 30",
    }
    assert plumbline_args(env) == [
        "--target", "http://127.0.0.1:8000", "--report-dir", "out", "--model", "m", "--jobs", "2",
        "--api-version", "2023-06-01", "--strict", "-k", "stream and not 003", "--timeout", "30",
    ]  # fmt: skip
    assert "--strict" not in plumbline_args({**env, "INPUT_STRICT": "false"})


def test_an_annotation_is_one_escaped_line():
    prop = {
        "id": "MSG-001",
        "title": "A Message: its shape, id",
        "verdict": "FAIL",
        "message": "100% wrong\nsecond line",
        "actual": None,
    }
    assert annotation(prop) == "::error title=MSG-001 A Message%3A its shape%2C id::100%25 wrong second line"
    long = annotation({**prop, "message": None, "actual": "x" * 1000})
    assert long.endswith("…")
    assert len(long.split("::", 2)[2]) == 300


def test_no_target_is_a_harness_error(capsys):
    assert main({"INPUT_REPORT_DIR": "out"}) == 2
    assert capsys.readouterr().out.startswith("::error title=Plumbline::the `target` input is required")


def test_the_action_and_the_ci_recipes_validate():
    """What `nox -s lint` checks (noxfile.py CI_FILES), here too so that CI checks it."""
    noxfile = ast.parse((REPO / "noxfile.py").read_text())
    (files,) = [
        ast.literal_eval(node.value)
        for node in noxfile.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "CI_FILES"
    ]
    assert sum(map(len, files.values())) == 4  # the action, the recipes, our Metal workflow
    for schema, paths in files.items():
        checked = subprocess.run(
            [sys.executable, "-m", "check_jsonschema", "--builtin-schema", schema, *paths],
            cwd=REPO, capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert checked.returncode == 0, checked.stdout + checked.stderr
