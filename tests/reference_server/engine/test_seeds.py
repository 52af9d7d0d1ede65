"""engine/seeds.py: what a generation's sampling seed depends on (no MLX)."""

from __future__ import annotations

from reference_server.engine.base import Sampling
from reference_server.engine.seeds import sampling_seed

PROMPT = [1, 2, 3, 40000]


def test_the_same_request_gets_the_same_seed() -> None:
    assert sampling_seed(0, PROMPT, Sampling()) == sampling_seed(0, list(PROMPT), Sampling())
    assert 0 <= sampling_seed(0, PROMPT, Sampling()) < 2**64


def test_every_input_changes_it() -> None:
    base = sampling_seed(0, PROMPT, Sampling())
    others = [
        sampling_seed(1, PROMPT, Sampling()),  # the server's --seed
        sampling_seed(0, PROMPT[:-1], Sampling()),
        sampling_seed(0, [*PROMPT, 5], Sampling()),
        sampling_seed(0, PROMPT, Sampling(temperature=0.9)),
        sampling_seed(0, PROMPT, Sampling(top_p=0.99)),
        sampling_seed(0, PROMPT, Sampling(top_k=40)),
        sampling_seed(0, PROMPT, Sampling(seed=7)),
        sampling_seed(0, PROMPT, Sampling(), images=["sha256-of-an-image"]),
    ]
    assert base not in others
    assert len(set(others)) == len(others)
