"""Judging: what a target sent, against what the spec says, into a verdict.

`checks.py` holds the accessors and expectations every property asserts through, `schemas.py`
the offline contract (`schemas/`), `grammar.py` the event-stream grammar, `citing.py` and
`batch_checks.py` the judges their areas share; `answers.py` names and keys the cause of a
failure on an answer (or on a request that should have been refused); `outcome.py` turns what
a property's test raised into a verdict with evidence, `passive.py` judges what a whole run
met, and `verdicts.py` computes the gate from the verdicts and a baseline.
"""
