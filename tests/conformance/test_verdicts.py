from __future__ import annotations

import pytest

from conformance.catalogue import Citation, Level, Property
from conformance.judging.verdicts import (
    EXIT_CONFORMANT,
    EXIT_FAILED,
    EXIT_HARNESS,
    Result,
    Verdict,
    cause_key,
    cause_of,
    causes,
    compute_gate,
    first_line,
    load_baseline,
    write_baseline,
)

CITE = Citation("https://example.invalid/docs#x", "a requirement")


def result(pid: str, verdict: Verdict, level: Level = Level.MUST, actual: str | None = None) -> Result:
    return Result(Property(pid, level, pid.lower(), CITE), verdict, 0.1, actual=actual)


def test_all_pass_is_conformant():
    gate = compute_gate([result("MSG-001", Verdict.PASS)], {}, strict=False, harness_failed=False)
    assert gate.exit_code == EXIT_CONFORMANT


def test_new_failure_fails_the_gate():
    gate = compute_gate([result("MSG-001", Verdict.FAIL)], {}, strict=False, harness_failed=False)
    assert (gate.exit_code, gate.new_failures) == (EXIT_FAILED, ("MSG-001",))


def test_expected_failure_passes_the_gate():
    gate = compute_gate(
        [result("MSG-001", Verdict.FAIL)], {"MSG-001": "known"}, strict=False, harness_failed=False
    )
    assert (gate.exit_code, gate.expected_failures) == (EXIT_CONFORMANT, ("MSG-001",))


def test_stale_baseline_entry_fails_the_gate():
    gate = compute_gate(
        [result("MSG-001", Verdict.PASS)], {"MSG-001": "fixed now"}, strict=False, harness_failed=False
    )
    assert (gate.exit_code, gate.stale_entries) == (EXIT_FAILED, ("MSG-001",))


def test_baseline_entries_for_properties_not_run_are_not_stale():
    gate = compute_gate(
        [result("MSG-001", Verdict.PASS)], {"STREAM-003": "x"}, strict=False, harness_failed=False
    )
    assert gate.exit_code == EXIT_CONFORMANT


@pytest.mark.parametrize(("strict", "code"), [(False, EXIT_CONFORMANT), (True, EXIT_FAILED)])
def test_warn_gates_only_under_strict(strict, code):
    results = [result("MSG-008", Verdict.WARN, Level.SHOULD)]
    assert compute_gate(results, {}, strict=strict, harness_failed=False).exit_code == code


def test_harness_errors_win():
    results = [result("MSG-001", Verdict.FAIL), result("MSG-002", Verdict.ERROR)]
    gate = compute_gate(results, {}, strict=False, harness_failed=False)
    assert (gate.exit_code, gate.errors) == (EXIT_HARNESS, ("MSG-002",))
    assert compute_gate([], {}, strict=False, harness_failed=True).exit_code == EXIT_HARNESS


@pytest.mark.parametrize("verdict", [Verdict.UNSUPPORTED, Verdict.SKIP])
def test_unsupported_and_skip_never_gate(verdict):
    assert compute_gate([result("TOOL-001", verdict)], {}, strict=True, harness_failed=False).exit_code == 0


def test_baseline_round_trip(tmp_path):
    path = tmp_path / "b" / "target.toml"
    results = [
        result("MSG-001", Verdict.FAIL, actual='HTTP 422: {"detail": "x"}\nmore'),
        result("MSG-008", Verdict.WARN, Level.SHOULD),
        result("MSG-002", Verdict.PASS),
    ]
    assert write_baseline(path, results, strict=False, target="t") == 1
    assert load_baseline(path) == {"MSG-001": 'HTTP 422: {"detail": "x"}\nmore'}
    write_baseline(path, results, strict=True, target="t")
    assert set(load_baseline(path)) == {"MSG-001", "MSG-008"}
    gate = compute_gate(results, load_baseline(path), strict=True, harness_failed=False)
    assert gate.exit_code == EXIT_CONFORMANT


def test_rewriting_a_baseline_keeps_its_header_and_the_reasons_a_person_wrote(tmp_path):
    path = tmp_path / "target.toml"
    path.write_text(
        "# LiteLLM 1.106.0 in front of the reference server\n\n[expected_failures]\n"
        '"MSG-001" = "the Message omits stop_sequence"\n"MSG-004" = "fixed since"\n',
        encoding="utf-8",
    )
    results = [
        result("MSG-001", Verdict.FAIL, actual="$: 'stop_sequence' is a required property"),
        result("MSG-004", Verdict.PASS),
        result("MSG-011", Verdict.FAIL, actual="HTTP 400: max_tokens"),
    ]
    assert write_baseline(path, results, strict=False, target="t") == 2
    assert load_baseline(path) == {
        "MSG-001": "the Message omits stop_sequence",
        "MSG-011": "HTTP 400: max_tokens",
    }
    assert path.read_text(encoding="utf-8").startswith("# LiteLLM 1.106.0 in front of the reference server\n")


def test_missing_baseline_is_empty(tmp_path):
    assert load_baseline(tmp_path / "none.toml") == {}
    assert load_baseline(None) == {}


def broken(pid: str, reason: str, actual: str, verdict: Verdict = Verdict.FAIL, **more) -> Result:
    prop = Property(pid, Level.MUST, pid.lower(), CITE)
    return Result(prop, verdict, 0.1, reason=reason, actual=actual, **more)


def test_failures_are_grouped_by_what_the_target_did_biggest_first():
    items = [
        broken("MSG-001", "schema", "x", subject="the Message: $: 'stop_sequence' is a required property"),
        broken("FUZZ-003", "schema", "y", subject="the Message: $: 'stop_sequence' is a required property"),
        # Two 500s for different requests are two causes; the same answer twice is one.
        broken("ERR-008", "wrong-status", "HTTP 500", subject="POST /v1/messages answered HTTP 500 (a)"),
        broken("ERR-009", "wrong-status", "HTTP 500", subject="POST /v1/messages answered HTTP 500 (b)"),
        broken("MSG-011", "wrong-status", "HTTP 500", subject="POST /v1/messages answered HTTP 500 (b)"),
        result("MSG-002", Verdict.PASS),
    ]
    assert causes(items) == [
        ("POST /v1/messages answered HTTP 500 (b)", ["ERR-009", "MSG-011"]),
        ("the Message: $: 'stop_sequence' is a required property", ["FUZZ-003", "MSG-001"]),
        ("POST /v1/messages answered HTTP 500 (a)", ["ERR-008"]),
    ]
    assert cause_of(result("MSG-002", Verdict.PASS)) is None


def test_each_broken_sub_case_has_its_own_cause():
    subcases = [
        {"case": "no key", "expected": "401", "actual": "HTTP 500", "reason": "wrong-status", "subject": "a"},
        {"case": "wrong key", "expected": "401", "actual": "x", "reason": "envelope", "subject": "b"},
    ]
    items = [
        broken("SDK-002", "wrong-status", "2 of 4 sub-cases broken", subcases=subcases),
        broken("AUTH-002", "envelope", "x", subject="b"),
    ]
    assert causes(items) == [("b", ["AUTH-002", "SDK-002"]), ("a", ["SDK-002"])]


def test_only_the_grouping_key_is_normalised_never_the_text_shown():
    first = "the Message: `id` 'chatcmpl-9eNaN8f3' does not start with msg_ (got 1234567 bytes)"
    second = "the Message: `id` 'chatcmpl-77aa' does not start with msg_ (got 7654321 bytes)"
    items = [broken("MSG-001", "id", "x", subject=first), broken("MSG-022", "id", "x", subject=second)]
    assert causes(items) == [(first, ["MSG-001", "MSG-022"])]  # the real text of the first
    assert (
        cause_key("usage.output_tokens == 0, got 16; HTTP 500")
        == "usage.output_tokens == 0, got 16; HTTP 500"
    )


def test_a_failure_without_a_subject_keeps_its_real_text():
    item = broken("MSG-007", "usage", "20", expected="usage.output_tokens <= max_tokens (16)")
    assert cause_of(item) == "usage: expected usage.output_tokens <= max_tokens (16), got 20"


def test_an_error_is_caused_by_its_exception_line():
    error = Result(
        Property("HDR-001", Level.MUST, "h", CITE),
        Verdict.ERROR,
        0.0,
        message="ConnectError: refused\nTraceback (most recent call last):\n  File ...",
    )
    assert cause_of(error) == "ConnectError: refused"
    assert first_line("  \n") == ""
    assert first_line("x" * 300, 10) == "x" * 9 + "…"


def test_a_check_s_key_groups_and_the_first_words_name_the_group():
    """A check's own key (an answer's route, status and normalised message) groups failures
    whose words differ (raw, streamed, through the SDK); the first occurrence's text names it.
    A request fingerprint keys only a request that should have been refused."""
    key = "POST /v1/messages answered HTTP 400 (error invalid_request_error: tool_choice: <v>)"
    items = [
        broken(
            "TOOL-001", "wrong-status", "HTTP 400", subject="POST /v1/messages answered HTTP 400 (a)", key=key
        ),
        broken("TOOL-002", "wrong-status", "HTTP 400", subject="… (stream) answered HTTP 400 (b)", key=key),
        broken(
            "ERR-001", "wrong-status", "HTTP 200", expected="HTTP status 400", key="not refused: POST x 1"
        ),
        broken(
            "ERR-023",
            "wrong-status",
            "HTTP 200",
            expected="HTTP status 400 or 500",
            key="not refused: POST x 1",
        ),
        # A fingerprint on a failure that is not an unrefused request is not a key: its words are.
        broken(
            "MSG-011",
            "wrong-status",
            "HTTP 422",
            subject="POST /v1/messages answered HTTP 422",
            key="not refused: POST x 1",
        ),
    ]
    assert causes(items) == [
        ("answered HTTP 200, not refused: err-001", ["ERR-001", "ERR-023"]),
        ("POST /v1/messages answered HTTP 400 (a)", ["TOOL-001", "TOOL-002"]),
        ("POST /v1/messages answered HTTP 422", ["MSG-011"]),
    ]
