from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conformance.generating.budget import budgeted


def test_examples_stop_at_the_budget_without_failing(monkeypatch):
    monkeypatch.setenv("PLUMBLINE_HYPOTHESIS_PROFILE", "ci")
    ran = []

    @settings(
        max_examples=1000, database=None, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
    )
    @given(st.integers())
    @budgeted(0.2)
    def check(number: int) -> None:
        ran.append(number)
        time.sleep(0.05)

    started = time.monotonic()
    check()
    assert 2 <= len(ran) <= 10
    assert time.monotonic() - started < 10


def test_a_failing_example_is_replayed_for_the_report(monkeypatch):
    monkeypatch.setenv("PLUMBLINE_HYPOTHESIS_PROFILE", "ci")

    @settings(
        max_examples=50,
        database=None,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.filter_too_much],
    )
    @given(st.integers(0, 100))
    @budgeted(0.0)  # the budget is spent at once: only the failing example may run again
    def check(number: int) -> None:
        raise ValueError(f"broken by {number}")

    with pytest.raises(ValueError, match="broken by"):
        check()


def test_the_deep_profile_has_no_budget(monkeypatch):
    monkeypatch.setenv("PLUMBLINE_HYPOTHESIS_PROFILE", "deep")
    ran = []

    @settings(
        max_examples=30, database=None, deadline=None, suppress_health_check=[HealthCheck.filter_too_much]
    )
    @given(st.integers())
    @budgeted(0.0)
    def check(number: int) -> None:
        ran.append(number)

    check()
    assert len(ran) == 30
