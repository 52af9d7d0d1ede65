"""Token accounting shared by every scheduler: end-of-turn, max_tokens, whole characters."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reference_server.engine.base import EngineDelta, Sampling


def feed_all(tokenizer: Any, tokens: list[int], max_tokens: int) -> tuple[list[bool], list[Any]]:
    pytest.importorskip("mlx.core")
    from reference_server.engine.jobs import Job, TokenOutput

    async def go() -> tuple[list[bool], list[Any]]:
        job = Job(
            prompt=[1],
            max_tokens=max_tokens,
            sampling=Sampling(temperature=0),
            loop=asyncio.get_running_loop(),
            queue=asyncio.Queue(),
        )
        output = TokenOutput(job, tokenizer)
        done = []
        for token in tokens:
            done.append(output.feed(token))
            if done[-1]:
                break
        await asyncio.sleep(0)  # deliveries are scheduled with call_soon_threadsafe
        items = []
        while not job.queue.empty():
            items.append(job.queue.get_nowait())
        return done, items

    return asyncio.run(go())


def test_end_of_turn_token_is_counted_but_not_emitted(smollm2_tokenizer: Any) -> None:
    ids = smollm2_tokenizer.encode("Paris 🎉")
    done, deltas = feed_all(smollm2_tokenizer, [*ids, 2], max_tokens=100)
    assert done == [False] * len(ids) + [True]
    assert all(isinstance(d, EngineDelta) for d in deltas)
    assert "".join(d.text for d in deltas) == "Paris 🎉"
    assert deltas[-1].finish == "stop"
    assert deltas[-1].output_tokens == len(ids) + 1
    assert "<|im_end|>" not in deltas[-1].text
    assert all(d.text for d in deltas[:-1])


def test_max_tokens_flushes_held_back_bytes(smollm2_tokenizer: Any) -> None:
    ids = smollm2_tokenizer.encode("ok 🎉")
    # Stop one token short of the emoji's last byte: the partial character comes out as U+FFFD.
    done, deltas = feed_all(smollm2_tokenizer, ids, max_tokens=len(ids) - 1)
    assert done[-1] is True
    assert deltas[-1].finish == "length"
    assert deltas[-1].output_tokens == len(ids) - 1
    assert "".join(d.text for d in deltas).startswith("ok")


def test_a_complete_grammar_ends_with_stop_and_no_end_of_turn_token(smollm2_tokenizer: Any) -> None:
    pytest.importorskip("mlx.core")
    from reference_server.engine.jobs import Job, TokenOutput

    ids = smollm2_tokenizer.encode("yes 🎉")

    async def go() -> tuple[list[bool], list[Any]]:
        job = Job(
            prompt=[1],
            max_tokens=len(ids),  # the grammar completes on the last allowed token: still "stop"
            sampling=Sampling(temperature=0),
            loop=asyncio.get_running_loop(),
            queue=asyncio.Queue(),
        )
        output = TokenOutput(job, smollm2_tokenizer)
        done = [output.feed(t, complete=i == len(ids) - 1) for i, t in enumerate(ids)]
        await asyncio.sleep(0)
        return done, [job.queue.get_nowait() for _ in range(job.queue.qsize())]

    done, deltas = asyncio.run(go())
    assert done == [False] * (len(ids) - 1) + [True]
    assert "".join(d.text for d in deltas) == "yes 🎉"
    assert (deltas[-1].finish, deltas[-1].output_tokens) == ("stop", len(ids))
