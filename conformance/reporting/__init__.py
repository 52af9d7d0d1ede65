"""Reporting: what a run says, all derived from its `index.json`.

`reports.py` writes the run's reports (summary, JUnit, HTML), `console.py` and `progress.py`
what the terminal shows; `coverage.py` and `coverage_report.py` the spec coverage, `levels.py`
the catalogue's levels; `rundiff.py` and `matrix.py` compare runs.
"""
