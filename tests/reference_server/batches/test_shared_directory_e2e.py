"""Issue 23 end to end: two `python -m reference_server` processes of different models
(tiny-random and SmolLM2) on one data directory, each over a real socket and driven by the
official SDK: a batch created on each, naming its server's model, is processed by that server
and succeeds (before, the other server could take it and answer not_found_error)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import anthropic
import pytest

from conformance.wire.launcher import reference_server

pytestmark = [pytest.mark.mlx, pytest.mark.slow]

MODELS = ("tiny-random", "smollm2-135m-instruct")


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, anthropic.Anthropic]]:
    data = tmp_path_factory.mktemp("shared")
    shared = ["--data-dir", str(data)]
    with (
        reference_server(MODELS[0], log=data / "tiny.log", args=shared) as tiny_url,
        reference_server(MODELS[1], log=data / "smol.log", args=shared) as smol_url,
        anthropic.Anthropic(base_url=tiny_url, api_key="unused", max_retries=0) as tiny,
        anthropic.Anthropic(base_url=smol_url, api_key="unused", max_retries=0) as smol,
    ):
        yield {MODELS[0]: tiny, MODELS[1]: smol}


def test_each_batch_is_processed_by_a_server_of_its_model(clients: dict[str, anthropic.Anthropic]) -> None:
    created = {
        model: sdk.messages.batches.create(
            requests=[
                {
                    "custom_id": f"{model}-{i}",
                    "params": {
                        "model": model,
                        "max_tokens": 3,
                        "messages": [{"role": "user", "content": "Hi"}],
                    },
                }
                for i in range(2)
            ]
        )
        for model, sdk in clients.items()
    }
    deadline = time.monotonic() + 120
    for model, batch in created.items():
        other = clients[MODELS[1] if model == MODELS[0] else MODELS[0]]
        while (seen := other.messages.batches.retrieve(batch.id)).processing_status != "ended":
            assert time.monotonic() < deadline, seen
            time.sleep(0.2)
        results = list(other.messages.batches.results(batch.id))  # one database: read anywhere
        assert len(results) == 2
        for entry in results:
            assert entry.result.type == "succeeded", entry
            assert entry.result.message.model == model
