"""Measure the MLX engine: load time, time to first token and decode speed, per BLAS; and the
cost of a grammar constraint.

    python scripts/measure_engine.py                      # SmolLM2, openblas then bundled
    python scripts/measure_engine.py --blas openblas --runs 5 --prompt-tokens 1000
    python scripts/measure_engine.py --precision f32          # the weights served (default auto)

Each BLAS runs in a fresh subprocess, since MLX binds its BLAS when it is first loaded. The
prompt is a user turn padded to exactly `--prompt-tokens` tokens as the engine renders it
(chat template included); generation is greedy with `--max-tokens`. Decode speed counts the
tokens after the first over the time after the first. CPU contention from other processes
distorts every figure: check `uptime` first.

The first BLAS also runs the same request constrained by a permissive JSON Schema grammar
(`CONSTRAINT`), alternating with the plain runs so that both see the same machine, and
reports the ratio of decode speeds (the issue's budget: at least 0.9) and the time llguidance
spends per token (mask and advance), measured by replaying the constrained output.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
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

# Permissive: any title, any number of steps of any length, flexible whitespace. The model writes
# as long an answer as without it, so both runs reach --max-tokens.
CONSTRAINT_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "steps": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["title", "steps"],
}


async def _run_once(engine: Any, request: Any) -> tuple[dict[str, float], str]:
    begin = time.perf_counter()
    first = last = begin
    tokens = 0
    text = ""
    async for delta in engine.generate(request):
        now = time.perf_counter()
        if tokens == 0:
            first = now
        last, tokens = now, delta.output_tokens
        text += delta.text
    run = {
        "ttft_s": round(first - begin, 3),
        "decode_tok_s": round((tokens - 1) / (last - first), 2) if tokens > 1 else 0.0,
        "output_tokens": tokens,
    }
    return run, text


def _constraint_ms_per_token(engine: Any, grammar: Any, text: str) -> float:
    """llguidance's own time per token (mask, then advance) over `text` re-tokenized."""
    from reference_server.engine.constraint import GrammarCompiler

    compiler = GrammarCompiler(engine.tokenizer)
    width = engine.tokenizer.vocab_size
    tokens = engine.tokenizer.encode(text)
    constraint = compiler.compile(grammar)
    started = time.perf_counter()
    for token in tokens:
        constraint.allowed(width)
        constraint.consume(token)
    return round((time.perf_counter() - started) * 1000 / max(1, len(tokens)), 4)


async def _measure(args: argparse.Namespace) -> dict[str, Any]:
    from reference_server.engine import EngineRequest, Grammar, Sampling, Turn, load_engine

    started = time.perf_counter()
    engine = await asyncio.to_thread(load_engine, args.model, blas=args.blas, precision=args.precision)
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
    grammar = Grammar(f"start: %json {json.dumps(CONSTRAINT_SCHEMA)}")
    constrained = dataclasses.replace(request, constraint=grammar)
    runs: list[dict[str, float]] = []
    constrained_runs: list[dict[str, float]] = []
    constrained_text = ""
    for _ in range(args.runs):
        runs.append((await _run_once(engine, request))[0])
        if args.constrained:
            run, constrained_text = await _run_once(engine, constrained)
            constrained_runs.append(run)
    await engine.aclose()
    from reference_server.engine.blas import enable_fast_blas

    extra: dict[str, Any] = {}
    if args.constrained:
        plain_tok_s = statistics.median(r["decode_tok_s"] for r in runs)
        constrained_tok_s = statistics.median(r["decode_tok_s"] for r in constrained_runs)
        extra = {
            "constrained": {
                "grammar": grammar.lark,
                "runs": constrained_runs,
                "median_decode_tok_s": constrained_tok_s,
                "constraint_ms_per_token": _constraint_ms_per_token(engine, grammar, constrained_text),
            },
            # Each constrained run against the plain run just before it, then the median.
            "constrained_decode_ratio": round(
                statistics.median(
                    c["decode_tok_s"] / p["decode_tok_s"] for c, p in zip(constrained_runs, runs, strict=True)
                ),
                3,
            ),
            "constrained_median_ratio": round(constrained_tok_s / plain_tok_s, 3),
        }
    return {
        "blas": enable_fast_blas(args.blas),
        "precision": engine.models()[0].precision,
        "blas_threads": os.environ.get("PLUMBLINE_BLAS_THREADS", "default"),
        "load_s": round(load_s, 2),
        "prompt_tokens": prompt_tokens,
        "runs": runs,
        "median_ttft_s": statistics.median(r["ttft_s"] for r in runs),
        "median_decode_tok_s": statistics.median(r["decode_tok_s"] for r in runs),
        **extra,
    }


def main() -> None:
    """Run each BLAS in a child process and print one JSON line per BLAS."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--blas", nargs="+", default=["openblas", "bundled"])
    parser.add_argument("--precision", default="auto", choices=["auto", "f32", "q8", "q4"])
    parser.add_argument("--prompt-tokens", type=int, default=195)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--constrained", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        args.blas = args.blas[0]
        print(json.dumps(asyncio.run(_measure(args))))
        return
    results: dict[str, dict[str, Any]] = {}
    for index, blas in enumerate(args.blas):
        child = [sys.executable, __file__, "--child", "--blas", blas, "--model", args.model]
        child += ["--precision", args.precision]
        child += ["--prompt-tokens", str(args.prompt_tokens), "--max-tokens", str(args.max_tokens)]
        child += ["--runs", str(args.runs)]
        if index == 0:  # the constraint's cost, on the default configuration only
            child += ["--constrained"]
        done = subprocess.run(child, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(json.dumps({"blas": blas, "error": done.stderr.strip().splitlines()[-1:]}))
        else:
            line = done.stdout.strip().splitlines()[-1]
            results[blas] = json.loads(line)
            print(line, flush=True)
    _print_ratios(results)


def _print_ratios(results: dict[str, dict[str, Any]]) -> None:
    """The default configuration against the named comparators measured in the same run: the
    reference BLAS bundled with the mlx-cpu wheel, on the quantized weights; and itself without
    a grammar constraint."""
    for blas, result in results.items():
        if "constrained" in result:
            figures = {
                "comparator": f"the same request without a constraint ({blas}, same run, alternating)",
                "unconstrained_decode_tok_s": result["median_decode_tok_s"],
                "constrained_decode_tok_s": result["constrained"]["median_decode_tok_s"],
                "constrained_decode_ratio": result["constrained_decode_ratio"],
                "constraint_ms_per_token": result["constrained"]["constraint_ms_per_token"],
                "within_budget": result["constrained_decode_ratio"] >= 0.9,
            }
            print(json.dumps(figures), flush=True)
    ours, comparator = results.get("openblas"), results.get("bundled")
    if not ours or not comparator:
        return
    ratios = {
        "comparator": "mlx-cpu bundled reference BLAS, same precision (same run)",
        "time_to_first_token_speedup": round(comparator["median_ttft_s"] / ours["median_ttft_s"], 2),
        "decode_speedup": round(ours["median_decode_tok_s"] / comparator["median_decode_tok_s"], 2),
    }
    print(json.dumps(ratios), flush=True)


if __name__ == "__main__":
    main()
