"""Decode speed of a running server, as a client sees it (streamed over HTTP).

    python -m reference_server &                     # or: nox -s serve
    python scripts/measure_served.py --url http://127.0.0.1:8000 --runs 3

Streams greedy answers of `--max-tokens` tokens and reports time to the first text delta and
output tokens per second after it (usage.output_tokens from message_delta).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import anthropic

PROMPT = "Explain in detail how lighthouses work, from the lamp to the lens to the keeper's duties."


def measure(client: anthropic.Anthropic, model: str, max_tokens: int) -> dict[str, float]:
    started = time.perf_counter()
    first: float | None = None
    with client.messages.stream(
        model=model,
        max_tokens=max_tokens,
        messages=[{"role": "user", "content": PROMPT}],
        extra_body={"temperature": 0},
    ) as stream:
        for _ in stream.text_stream:
            first = first or time.perf_counter()
        final = stream.get_final_message()
    end = time.perf_counter()
    assert first is not None, "no text was streamed"
    tokens = final.usage.output_tokens
    return {
        "ttft_s": round(first - started, 3),
        "decode_tok_s": round((tokens - 1) / (end - first), 2),
        "output_tokens": tokens,
        "input_tokens": final.usage.input_tokens,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", default="http://127.0.0.1:8000")
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    # Greedy needs temperature, which anthropic-version 2026-10-21 (the SDK's default) removed.
    legacy = {"anthropic-version": "2023-06-01"}
    with anthropic.Anthropic(
        base_url=args.url, api_key="unused", default_headers=legacy, max_retries=0
    ) as client:
        measure(client, args.model, 4)  # warm-up
        runs = [measure(client, args.model, args.max_tokens) for _ in range(args.runs)]
    print(
        json.dumps(
            {
                "runs": runs,
                "median_decode_tok_s": statistics.median(r["decode_tok_s"] for r in runs),
                "median_ttft_s": statistics.median(r["ttft_s"] for r in runs),
            }
        )
    )


if __name__ == "__main__":
    main()
