"""`plumbline diff` on recorded runs (tests/conformance/data/runs/README.md): the change
categories, the exit status that gates a release, and the three outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conformance.cli import main
from conformance.reporting.matrix import load_run
from conformance.reporting.rundiff import diff_runs, render_markdown

RUNS = Path(__file__).parent / "data" / "runs"
CLEAN = RUNS / "tiny-random" / "20261201T113700Z-1b77"  # msg_00, stream_00: all PASS
FAULTED = RUNS / "tiny-random" / "20261201T114322Z-f7f8"  # + MSG-021, TOKENS-007; 5 faults
SMOLLM2 = RUNS / "smollm2" / "20261201T113752Z-6109"  # + MSG-021, TOKENS-00*; all PASS


def ids(transitions) -> dict[str, tuple[str | None, str | None]]:
    return {t.id: (t.old, t.new) for t in transitions}


def test_a_regression_is_new_failures_and_exit_1():
    diff = diff_runs(load_run(CLEAN), load_run(FAULTED))
    assert ids(diff.new_failures) == {
        "MSG-003": ("PASS", "FAIL"),
        "MSG-004": ("PASS", "FAIL"),
        "STREAM-002": ("PASS", "FAIL"),
        "STREAM-003": ("PASS", "FAIL"),
        "TOKENS-007": (None, "WARN"),  # absent before, broken now
    }
    assert ids(diff.added) == {"MSG-021": (None, "SKIP"), "TOKENS-007": (None, "WARN")}
    assert not diff.fixed
    assert not diff.changed
    assert not diff.retired
    assert diff.unchanged == 14
    assert diff.warnings == ()  # same target
    assert diff.exit_code == 1
    assert {t.id: t.detail for t in diff.new_failures}["MSG-004"] == "end_turn"


def test_only_fixes_is_exit_0():
    diff = diff_runs(load_run(FAULTED), load_run(CLEAN))
    assert ids(diff.fixed) == {
        "MSG-003": ("FAIL", "PASS"),
        "MSG-004": ("FAIL", "PASS"),
        "STREAM-002": ("FAIL", "PASS"),
        "STREAM-003": ("FAIL", "PASS"),
    }
    assert ids(diff.retired) == {"MSG-021": ("SKIP", None), "TOKENS-007": ("WARN", None)}
    assert not diff.new_failures
    assert not diff.added
    assert diff.exit_code == 0


def test_other_changes_and_a_warning_for_different_targets():
    diff = diff_runs(load_run(FAULTED), load_run(SMOLLM2))
    assert ids(diff.changed) == {"MSG-021": ("SKIP", "PASS")}
    assert ids(diff.fixed)["TOKENS-007"] == ("WARN", "PASS")
    assert set(ids(diff.added)) == {f"TOKENS-00{n}" for n in range(1, 7)}
    assert not diff.new_failures
    assert diff.exit_code == 0
    assert diff.warnings == ("the runs judge different targets: tiny-random and smollm2",)


def test_the_cli_writes_json_and_markdown_and_gates(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    out_json, out_md = tmp_path / "d" / "diff.json", tmp_path / "diff.md"
    # A target directory means its newest run: FAULTED.
    code = main(["diff", str(CLEAN), str(RUNS / "tiny-random"), "--json", str(out_json), "--md", str(out_md)])
    assert code == 1
    data = json.loads(out_json.read_text())
    assert data["exit_code"] == 1
    assert data["old"]["run_id"] == "20261201T113700Z-1b77"
    assert data["new"]["run_id"] == "20261201T114322Z-f7f8"
    assert [t["id"] for t in data["new_failures"]] == [
        "MSG-003",
        "MSG-004",
        "STREAM-002",
        "STREAM-003",
        "TOKENS-007",
    ]
    assert data["new_failures"][3] == {
        "id": "STREAM-003",
        "level": "MUST",
        "title": "No data: [DONE]",
        "old": "PASS",
        "new": "FAIL",
        "detail": "[done-sentinel] event 21: data: [DONE] is not an Anthropic event",
    }
    assert [t["id"] for t in data["added"]] == ["MSG-021", "TOKENS-007"]
    assert data["fixed"] == data["changed"] == data["retired"] == []
    md = out_md.read_text().splitlines()
    assert md[0] == "# Plumbline diff: new failures: exit 1"
    assert "## New failures (5)" in md
    assert "## Fixed (0)" in md
    assert (
        "| STREAM-003 | MUST | No data: \\[DONE\\] | PASS | FAIL "
        "| \\[done-sentinel\\] event 21: data: \\[DONE\\] is not an Anthropic event |"
    ) in md
    assert "| MSG-021 | MUST | A turn that ends by itself reports end\\_turn | absent | SKIP |" in "\n".join(
        md
    )
    # The console prints requirement texts and details literally, brackets included.
    console = capsys.readouterr().out
    assert "No data: [DONE]" in console
    assert "[done-sentinel] event 21: data: [DONE] is not an Anthropic event" in console
    assert "PASS → FAIL" in console
    assert "new failures: MSG-003, MSG-004, STREAM-002, STREAM-003, TOKENS-007 (exit 1)" in console


def test_the_cli_exits_0_on_fixes_and_warns_on_different_targets(capsys):
    assert main(["diff", str(FAULTED), str(CLEAN)]) == 0
    assert "no new failure (exit 0)" in capsys.readouterr().out
    assert main(["diff", str(FAULTED), str(SMOLLM2)]) == 0
    assert "different targets: tiny-random and smollm2" in capsys.readouterr().err


def test_markdown_without_changes():
    diff = diff_runs(load_run(CLEAN), load_run(CLEAN))
    text = render_markdown(diff)
    assert text.startswith("# Plumbline diff: no new failure: exit 0")
    assert "18 properties unchanged." in text
    assert text.count("none") == 5


@pytest.mark.parametrize("which", ["old", "new"])
def test_an_unreadable_run_is_exit_2(tmp_path, which, capsys):
    missing = str(tmp_path / "nowhere")
    argv = [missing, str(CLEAN)] if which == "old" else [str(CLEAN), missing]
    assert main(["diff", *argv]) == 2
    assert "no index.json" in capsys.readouterr().err


def test_runs_of_different_api_versions_are_compared_with_a_warning(tmp_path):
    """A column per version is a natural use of diff and matrix: the verdicts differ by design."""
    import shutil

    newer = tmp_path / "tiny-random" / "20261205T120000Z-ab12"
    shutil.copytree(CLEAN, newer)
    index = json.loads((newer / "index.json").read_text())
    index["target"]["api_version"] = "2026-10-21"
    (newer / "index.json").write_text(json.dumps(index))
    diff = diff_runs(load_run(CLEAN), load_run(newer))
    assert diff.warnings == (
        "the runs judge different API versions: anthropic-version unrecorded and 2026-10-21 "
        "(2026-10-21 refuses sampling parameters and more)",
    )
    assert diff.exit_code == 0
