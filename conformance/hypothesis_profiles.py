"""Hypothesis profiles, registered on purpose.

Hypothesis loads its built-in `ci` profile by itself whenever `CI` is set (CI sets
`CI=true`), so we re-register `ci` with settings fit for HTTP properties against a model:
few examples, derandomized, no deadline. `default` is for people at a terminal, `deep` for
nightly runs (`nox -s fuzz`). `ci` and `default` stop at the first failure (one failing
example, unshrunk, is the evidence; conformance.generating.budget bounds their time); `deep` looks for every
distinct failure and shrinks each fully. `PLUMBLINE_HYPOTHESIS_PROFILE` or pytest's
`--hypothesis-profile` chooses; otherwise `ci` under CI and `default` elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase

__all__ = ["PROFILES", "register_profiles"]

PROFILES = ("ci", "default", "deep")

# HTTP against a model: a slow example is normal, and the target is shared by every example.
# Examples past a property's time budget are rejected (conformance.generating.budget): not a filter problem.
_SUPPRESSED = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.filter_too_much]


# The first failing example is the evidence: shrinking it through a slow target costs minutes.
_NO_SHRINK = [phase for phase in Phase if phase is not Phase.shrink]


def register_profiles(report_dir: Path) -> None:
    database = DirectoryBasedExampleDatabase(str(report_dir / ".hypothesis"))
    settings.register_profile(
        "ci",
        max_examples=8,
        derandomize=True,
        deadline=None,
        database=None,
        print_blob=True,
        report_multiple_bugs=False,
        phases=_NO_SHRINK,
        suppress_health_check=_SUPPRESSED,
    )
    settings.register_profile(
        "default",
        max_examples=15,
        deadline=None,
        database=database,
        print_blob=True,
        report_multiple_bugs=False,
        phases=_NO_SHRINK,
        suppress_health_check=_SUPPRESSED,
    )
    settings.register_profile(
        "deep",
        max_examples=300,
        deadline=None,
        database=database,
        print_blob=True,
        phases=list(Phase),
        suppress_health_check=_SUPPRESSED,
    )
    chosen = os.environ.get("PLUMBLINE_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default")
    settings.load_profile(chosen)
