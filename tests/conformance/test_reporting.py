from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from conformance.catalogue import Citation, Level, Property
from conformance.judging.verdicts import Result, Verdict, compute_gate
from conformance.reporting.reports import write_reports

CITE = Citation("https://example.invalid/docs#x", "a <requirement>")
RUN = {
    "run_id": "r1",
    "suite": {"name": "plumbline", "version": "0.1.0", "sdk": "2.14.0"},
    "target": {
        "url": "http://t",
        "model": "m",
        "slug": "t",
        "profile": None,
        "deterministic": False,
        "features": [],
    },
    "seed": 7,
    "strict": False,
    "baseline": None,
    "started_at": "2026-11-30T00:00:00+00:00",
    "duration_s": 1.5,
    "python": "3.11",
}


def results() -> list[Result]:
    evidence = [
        {
            "request": {"method": "POST", "url": "http://t/v1/messages"},
            "response": {"status": 422},
            "curl": "curl -X POST http://t",
        }
    ]
    return [
        Result(Property("MSG-001", Level.MUST, "shape", CITE), Verdict.PASS, 0.2),
        Result(
            Property("ERR-003", Level.MUST, "unknown <field>", CITE),
            Verdict.FAIL,
            0.3,
            reason="wrong-status",
            expected="HTTP status 400",
            actual="HTTP 422",
            evidence=evidence,
        ),
        Result(
            Property("MSG-008", Level.SHOULD, "prefill", CITE), Verdict.WARN, 0.1, expected="x", actual="y"
        ),
        Result(Property("TOOL-001", Level.MUST, "tools", CITE), Verdict.UNSUPPORTED, 0.0, message="no tools"),
    ]


def test_the_four_reports_agree(tmp_path):
    items = results()
    gate = compute_gate(items, {}, strict=False, harness_failed=False)
    out = write_reports(tmp_path / "run", RUN, items, gate)
    index = json.loads((out / "index.json").read_text())
    assert index["counts"] == {"PASS": 1, "FAIL": 1, "WARN": 1, "UNSUPPORTED": 1, "SKIP": 0, "ERROR": 0}
    assert index["gate"]["new_failures"] == ["ERR-003"]
    assert index["seed"] == 7
    failed = next(p for p in index["properties"] if p["id"] == "ERR-003")
    assert failed["evidence_file"] == "cases/ERR-003.json"
    case = json.loads((out / failed["evidence_file"]).read_text())
    assert case["exchanges"][0]["curl"].startswith("curl ")

    suite = ET.parse(out / "junit.xml").getroot()
    assert suite.get("tests") == "4"
    assert suite.get("failures") == "1"
    names = [case.get("name") for case in suite.iter("testcase")]
    assert len(names) == 4
    assert any(case.find("failure") is not None for case in suite.iter("testcase"))

    summary = (out / "summary.md").read_text()
    assert "ERR-003" in summary
    assert "| PASS" not in summary  # passes are counted, not listed
    assert "Slowest: ERR-003 0.3 s, MSG-001 0.2 s, MSG-008 0.1 s" in summary  # where the time went
    assert "Gate: exit 1 — failures: ERR-003" in summary  # no baseline: no "new" failures
    assert "Not served (UNSUPPORTED):\n\n- TOOL-001: no tools\n" in summary  # each with why

    page = (out / "report.html").read_text()
    assert page.index("ERR-003") < page.index("MSG-001")  # failures first
    assert "unknown &lt;field&gt;" in page  # escaped
    assert "<script" not in page
    assert "http" not in page.split("<style>")[1].split("</style>")[0]  # no external assets


def test_requirement_and_failure_text_are_printed_literally(tmp_path):
    markup = "name ^[a-zA-Z0-9_-]{1,128}$ | `code` *not bold*"
    items = [
        Result(
            Property("ERR-011", Level.MUST, "bad [tools]", Citation("https://example.invalid/d", markup)),
            Verdict.FAIL,
            0.1,
            reason="wrong-status",
            expected="HTTP status 200\nsecond line",
            actual=f"HTTP 500: {markup}",
        ),
        Result(
            Property("ERR-012", Level.MUST, "pairs", CITE),
            Verdict.FAIL,
            0.1,
            reason="wrong-status",
            expected="HTTP status 200",
            actual="HTTP 500: ok",
        ),
    ]
    gate = compute_gate(items, {}, strict=False, harness_failed=False)
    out = write_reports(tmp_path / "run", RUN, items, gate)
    summary = (out / "summary.md").read_text()
    row = next(line for line in summary.splitlines() if line.startswith("| FAIL | ERR-011"))
    assert row.count(" | ") == 5  # six cells: the pipe inside the text does not split one
    assert "^\\[a-zA-Z0-9\\_-\\]{1,128}$" in row
    assert "- answered HTTP 500: ERR-011, ERR-012" in summary
    suite = ET.parse(out / "junit.xml").getroot()
    failure = next(suite.iter("failure"))
    assert failure.get("message") == f"Expected: HTTP status 200 | Actual: HTTP 500: {markup}"
    page = (out / "report.html").read_text()
    assert "Causes shared by several properties" in page
    assert "^[a-zA-Z0-9_-]{1,128}$" in page
    index = json.loads((out / "index.json").read_text())
    assert index["causes"][0]["properties"] == ["ERR-011", "ERR-012"]


def test_each_unsupported_verdict_line_says_why():
    from conformance.reporting.console import verdict_details

    unsupported = results()[3]
    assert verdict_details(unsupported) == ["no tools"]


def test_requests_that_should_have_been_refused_are_grouped_by_the_rule_they_broke():
    """A server that validates nothing answers every invalid request with the same 200: one
    cause per missing check, named by the rule (property and sub-case), not one for them all."""
    from conformance.judging.checks import Breakage
    from conformance.judging.verdicts import causes

    def failed(pid: str, title: str, actual: str, *cases: str) -> Result:
        subject = f"POST /v1/messages answered {actual.split(':')[0]}"
        subcases = [
            Breakage("HTTP status 400", actual, "wrong-status", subject, case).as_dict() for case in cases
        ]
        return Result(
            Property(pid, Level.MUST, title, CITE),
            Verdict.FAIL,
            0.1,
            reason="wrong-status",
            expected="HTTP status 400",
            actual=actual,
            subject=subject,
            subcases=subcases,
        )

    found = dict(
        causes(
            [
                failed(
                    "ERR-001", "Missing fields are a 400", "HTTP 200: {}", "missing model", "missing messages"
                ),
                failed("ERR-002", "Unknown fields are rejected", "HTTP 200: {}"),
                failed("ERR-028", "Never a 5xx", "HTTP 500: {}"),
                failed("ERR-029", "An unknown role is a 400", "HTTP 500: {}"),
            ]
        )
    )
    assert found == {
        "answered HTTP 200, not refused: Missing fields are a 400 [missing model]": ["ERR-001"],
        "answered HTTP 200, not refused: Missing fields are a 400 [missing messages]": ["ERR-001"],
        "answered HTTP 200, not refused: Unknown fields are rejected": ["ERR-002"],
        "answered HTTP 500, not refused: Never a 5xx": ["ERR-028"],
        "answered HTTP 500, not refused: An unknown role is a 400": ["ERR-029"],
    }
    # A valid request that crashes is grouped by the crash.
    crashed = Result(
        Property("MSG-001", Level.MUST, "A Message", CITE),
        Verdict.FAIL,
        0.1,
        reason="wrong-status",
        expected="HTTP status 200",
        actual="HTTP 500: {}",
        subject="POST /v1/messages answered HTTP 500",
    )
    assert dict(causes([crashed, failed("ERR-028", "x", "HTTP 500: {}")])) == {
        "POST /v1/messages answered HTTP 500": ["MSG-001"],
        "answered HTTP 500, not refused: x": ["ERR-028"],
    }
