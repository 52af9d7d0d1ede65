"""Measure the MLX engine: load time, time to first token and decode speed, per BLAS.

    python scripts/measure_engine.py                      # SmolLM2, openblas then bundled
    python scripts/measure_engine.py --blas openblas --runs 5 --prompt-tokens 1000

Each BLAS runs in a fresh subprocess, since MLX binds its BLAS when it is first loaded. The
prompt is a user turn padded to exactly `--prompt-tokens` tokens as the engine renders it
(chat template included); generation is greedy with `--max-tokens`. Decode speed counts the
tokens after the first over the time after the first. CPU contention from other processes
distorts every figure: check `uptime` first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

FILLER = (
    "Please explain, step by step and with examples, how a small transformer language model "
    "turns a prompt into text: tokenization, embeddings, attention, the key-value cache, "
    "sampling, and why decoding one token at a time is slower than reading the prompt. "
)


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from reference_server.engine import EngineRequest, Sampling, Turn, load_engine

    started = time.perf_counter()
    engine = await asyncio.to_thread(load_engine, args.model, blas=args.blas)
    load_s = time.perf_counter() - started
    model_id = engine.models()[0].id
    filler = FILLER * 100

    def make(n_chars: int) -> EngineRequest:
        return EngineRequest(
            model=model_id,
            turns=(Turn("user", filler[:n_chars]),),
            max_tokens=args.max_tokens,
            sampling=Sampling(temperature=0),
        )

    # The longest prefix of the filler whose rendered prompt has at most --prompt-tokens tokens.
    low, high = 0, len(filler)
    while low < high:
        middle = (low + high + 1) // 2
        if await engine.count_tokens(make(middle)) <= args.prompt_tokens:
            low = middle
        else:
            high = middle - 1
    request = make(low)
    prompt_tokens = await engine.count_tokens(request)
    runs: list[dict[str, float]] = []
    for _ in range(args.runs):
        begin = time.perf_counter()
        first = last = begin
        tokens = 0
        async for delta in engine.generate(request):
            now = time.perf_counter()
            if tokens == 0:
                first = now
            last, tokens = now, delta.output_tokens
        runs.append(
            {
                "ttft_s": round(first - begin, 3),
                "decode_tok_s": round((tokens - 1) / (last - first), 2) if tokens > 1 else 0.0,
                "output_tokens": tokens,
            }
        )
    await engine.aclose()
    from reference_server.engine.blas import enable_fast_blas

    return {
        "blas": enable_fast_blas(args.blas),
        "blas_threads": os.environ.get("PLUMBLINE_BLAS_THREADS", "default"),
        "load_s": round(load_s, 2),
        "prompt_tokens": prompt_tokens,
        "runs": runs,
        "median_ttft_s": statistics.median(r["ttft_s"] for r in runs),
        "median_decode_tok_s": statistics.median(r["decode_tok_s"] for r in runs),
    }


def main() -> None:
    """Run each BLAS in a child process and print one JSON line per BLAS."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--blas", nargs="+", default=["openblas", "bundled"])
    parser.add_argument("--prompt-tokens", type=int, default=195)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.blas = args.blas[0]
        print(json.dumps(asyncio.run(_measure(args))))
        return
    results: dict[str, dict[str, Any]] = {}
    for blas in args.blas:
        child = [sys.executable, __file__, "--child", "--blas", blas, "--model", args.model]
        child += ["--prompt-tokens", str(args.prompt_tokens), "--max-tokens", str(args.max_tokens)]
        child += ["--runs", str(args.runs)]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(json.dumps({"blas": blas, "error": done.stderr.strip().splitlines()[-1:]}))
        else:
            line = done.stdout.strip().splitlines()[-1]
            results[blas] = json.loads(line)
            print(line, flush=True)
    _print_ratios(results)


def _print_ratios(results: dict[str, dict[str, Any]]) -> None:
    """The default configuration against the named comparator measured in the same run: the
    reference BLAS bundled with the mlx-cpu wheel, on the quantized weights."""
    ours, comparator = results.get("openblas"), results.get("bundled")
    if not ours or not comparator:
        return
    ratios = {
        "comparator": "mlx-cpu bundled reference BLAS, quantized weights (same run)",
        "time_to_first_token_speedup": round(comparator["median_ttft_s"] / ours["median_ttft_s"], 2),
        "decode_speedup": round(ours["median_decode_tok_s"] / comparator["median_decode_tok_s"], 2),
    }
    print(json.dumps(ratios), flush=True)


if __name__ == "__main__":
    main()
