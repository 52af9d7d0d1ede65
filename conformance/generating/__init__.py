"""Generating requests: what the properties send.

Hypothesis strategies for valid and invalid requests (`strategies.py`, bounded in time by
`budget.py`), small files with known content (`content.py`), and the requests that make any
model call a tool or answer in JSON (`tooluse.py`), think (`thinking.py`), or batch
(`batches.py`), with strict readers of what comes back.
"""
