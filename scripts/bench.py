"""Serving benchmark: our MLX engine and server against named comparators, in one run, on the
same model file and the same cores.

    nox -s bench                              # SmolLM2, every comparator but llama.cpp
    nox -s bench -- --with-llama-cpp          # + llama.cpp (llama-cpp-python, built on first use)
    nox -s bench -- --quick                   # tiny prompts and counts, a smoke run (~1 min)

Figures (greedy, `--max-tokens` per stream; CPU contention distorts all of them: check `uptime`):
- prefill tok/s (a `--prefill-tokens` prompt, max_tokens 1: prompt tokens / time to first token),
  time to first token and single-stream decode tok/s (a `--prompt-tokens` prompt);
- aggregate decode tok/s at each of `--streams` concurrent streams: tokens generated while every
  stream was decoding, over that window (the prefills of the streams are outside it);
- prefix-cache hit: time to first token of a `--cache-prompt-tokens` system prompt with a
  `cache_control` breakpoint, first (written) and again with another question (read);
- server overhead: the same streamed request through HTTP + protocol + SSE on a real socket
  against the engine alone, alternating, medians.
Comparators: our engine at float32 on OpenBLAS (`--precision f32`, the default before the
quantized CPU kernels), our engine with the round-robin scheduler (one sequence per forward
pass, the scheduler before continuous batching), bare mlx-lm (`generate_step`,
`BatchGenerator`) on the very same loaded model, and llama.cpp on the same GGUF file (opt-in:
`--with-llama-cpp` installs llama-cpp-python into `.cache/bench/` on first use, ~5 min per
build): the AVX2 build of the earlier figures and an AVX-512 one (bench_llama_cpp.py says why).

Output: a table on the terminal, `reports/bench/bench.json` and `reports/bench/bench.png`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

FILLER = (
    "Please explain, step by step and with examples, how a small transformer language model "
    "turns a prompt into text: tokenization, embeddings, attention, the key-value cache, "
    "sampling, and why decoding one token at a time is slower than reading the prompt. "
)


# --- prompts -------------------------------------------------------------------------------


def padded_text(tokenizer: Any, tokens: int, lead: str = "") -> str:
    """A user turn's text whose rendered prompt (chat template included) has about `tokens`."""
    from reference_server.engine.base import Turn

    filler = FILLER * (tokens // 20 + 2)

    def count(n: int) -> int:
        return len(tokenizer.encode_turns((Turn("user", lead + filler[:n]),)))

    low, high = 0, len(filler)
    while low < high:
        middle = (low + high + 1) // 2
        if count(middle) <= tokens:
            low = middle
        else:
            high = middle - 1
    return lead + filler[:low]


def window_rate(timelines: Sequence[Sequence[tuple[float, int]]]) -> tuple[float, int]:
    """Aggregate decode: tokens generated while every stream was decoding, per second.

    Each timeline is (time, cumulative tokens): its start (tokens 0), then one entry per delta.
    The window runs from the last stream's first token to the first stream's end."""
    start = max(t[1][0] for t in timelines)
    end = min(t[-1][0] for t in timelines)
    if end <= start:
        return 0.0, 0
    tokens = 0
    for timeline in timelines:
        before = max((n for when, n in timeline if when <= start), default=0)
        within = max((n for when, n in timeline if when <= end), default=0)
        tokens += within - before
    return tokens / (end - start), tokens


# --- our engine ----------------------------------------------------------------------------


async def _timeline(engine: Any, request: Any) -> list[tuple[float, int]]:
    line = [(time.perf_counter(), 0)]
    async for delta in engine.generate(request):
        line.append((time.perf_counter(), delta.output_tokens))
    return line


def _single(line: list[tuple[float, int]]) -> dict[str, float]:
    begin, (first, _), (last, tokens) = line[0][0], line[1], line[-1]
    return {
        "ttft_s": first - begin,
        "decode_tok_s": (tokens - 1) / (last - first) if tokens > 1 and last > first else 0.0,
        "tokens": tokens,
    }


def step(what: str) -> None:
    """A long measurement says what it is doing (minutes can pass between two results)."""
    print(f"  {time.strftime('%H:%M:%S')} {what}", flush=True)


async def bench_engine(
    args: argparse.Namespace, *, batching: bool, precision: str = "auto", full: bool = True
) -> dict[str, Any]:
    """Our engine's figures; `full`: also the prefix-cache hit and the server overhead."""
    from reference_server.engine import load_engine
    from reference_server.engine.base import CacheMark, EngineRequest, Sampling, Turn
    from reference_server.engine.mlx import ServingLimits

    limits = ServingLimits(max_batch=max(args.streams), batching=batching, cache_min_tokens=1024)
    engine = await asyncio.to_thread(load_engine, args.model, limits=limits, precision=precision)
    model_id = engine.models()[0].id
    greedy = Sampling(temperature=0)

    def ask(text: str, max_tokens: int = args.max_tokens, system: Turn | None = None) -> EngineRequest:
        turns = ((system,) if system else ()) + (Turn("user", text),)
        return EngineRequest(model_id, turns, max_tokens, greedy)

    out: dict[str, Any] = {"batching": batching, "precision": engine.models()[0].precision}
    # Every prompt starts differently, so automatic prefix reuse never shortens a measured
    # prefill (the prefix-cache figure below measures reuse on purpose).
    prefill_texts = [
        padded_text(engine.tokenizer, args.prefill_tokens, f"Prefill {n}. ") for n in range(args.runs)
    ]
    prefill_tokens = await engine.count_tokens(ask(prefill_texts[0]))
    step(f"prefill: {args.runs} prompts of {prefill_tokens} tokens")
    ttfts = [_single(await _timeline(engine, ask(text, 1)))["ttft_s"] for text in prefill_texts]
    out["prefill_tokens"] = prefill_tokens
    out["prefill_tok_s"] = prefill_tokens / statistics.median(ttfts)
    prompt = padded_text(engine.tokenizer, args.prompt_tokens)
    step(f"single stream: {args.runs} runs of {args.max_tokens} tokens")
    singles = [_single(await _timeline(engine, ask(f"Single {n}. {prompt}"))) for n in range(args.runs)]
    out["prompt_tokens"] = await engine.count_tokens(ask(prompt))
    out["ttft_s"] = statistics.median(s["ttft_s"] for s in singles)
    out["decode_tok_s"] = statistics.median(s["decode_tok_s"] for s in singles)
    out["aggregate"] = {}
    for streams in args.streams:
        # Distinct from the first token on, so no stream reuses another's prefix.
        requests = [ask(f"Round {streams}, stream {i}. {prompt}") for i in range(streams)]
        step(f"{streams} streams at once")
        lines = await asyncio.gather(*(_timeline(engine, r) for r in requests))
        rate, tokens = window_rate(lines)
        out["aggregate"][str(streams)] = {"decode_tok_s": rate, "window_tokens": tokens}
    if full:
        step(f"prefix cache: a {args.cache_prompt_tokens}-token system prompt, cold then cached")
        system = padded_text(engine.tokenizer, args.cache_prompt_tokens, "System. ")
        marked = Turn("system", system, cache_marks=(CacheMark(len(system), "5m"),))
        first = await engine.start(ask("What is the first step?", 4, marked))
        first_line = [(time.perf_counter(), 0)]
        async for delta in first:
            first_line.append((time.perf_counter(), delta.output_tokens))
        again = await engine.start(ask("And the second step?", 4, marked))
        again_line = [(time.perf_counter(), 0)]
        async for delta in again:
            again_line.append((time.perf_counter(), delta.output_tokens))
        cold, warm = _single(first_line)["ttft_s"], _single(again_line)["ttft_s"]
        out["prefix_cache"] = {
            "prompt_tokens": first.usage.tokens,
            "cold_ttft_s": cold,
            "hit_ttft_s": warm,
            "speedup": cold / warm,
            "cold_usage": vars_of(first.usage),
            "hit_usage": vars_of(again.usage),
        }
        step("server overhead: the same requests over HTTP and on the engine alone")
        out["overhead"] = await bench_overhead(args, engine, ask(prompt))
    await engine.aclose()
    return out


def vars_of(usage: Any) -> dict[str, int]:
    return {
        "input_tokens": usage.uncached,
        "cache_read_input_tokens": usage.cache_read,
        "cache_creation_input_tokens": usage.cache_write,
    }


async def bench_overhead(args: argparse.Namespace, engine: Any, request: Any) -> dict[str, Any]:
    """The same streamed request through the server and through the engine, alternating."""
    import httpx

    from conformance.wire.launcher import reference_server

    text = request.turns[-1].text
    body = {
        "model": args.model,
        "max_tokens": request.max_tokens,
        "temperature": 0,
        "stream": True,
        "messages": [{"role": "user", "content": text}],
    }
    log = ROOT / "reports" / "bench" / "server.log"
    engine_s: list[float] = []
    server_s: list[float] = []
    with reference_server(args.model, log=log) as url:
        async with httpx.AsyncClient(
            base_url=url, timeout=300, headers={"anthropic-version": "2023-06-01"}
        ) as http:
            for _ in range(args.runs + 1):  # the first pair warms both up and is not counted
                line = await _timeline(engine, request)
                engine_s.append(line[-1][0] - line[0][0])
                began = time.perf_counter()
                async with http.stream("POST", "/v1/messages", json=body) as response:
                    async for _ in response.aiter_lines():
                        pass
                server_s.append(time.perf_counter() - began)
    engine_med, server_med = statistics.median(engine_s[1:]), statistics.median(server_s[1:])
    return {
        "engine_s": engine_med,
        "server_s": server_med,
        "overhead": server_med / engine_med - 1,
        "max_tokens": request.max_tokens,
    }


# --- head to head with llama.cpp, alternating ----------------------------------------------


# Our engine's resident memory, in a process of its own (as llama.cpp's child measures its own):
# what loading the model and one short generation add once MLX and the server are imported.
OURS_RESIDENT = r"""
import asyncio, json, sys
sys.path.insert(0, sys.argv[2])
from reference_server.engine.blas import enable_fast_blas
enable_fast_blas("auto")
import mlx.core
from reference_server.engine import load_engine
from reference_server.engine.base import EngineRequest, Sampling, Turn
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))
async def main():
    before = rss()
    engine = await asyncio.to_thread(load_engine, sys.argv[1])
    turns = (Turn("user", "Hello there."),)
    request = EngineRequest(engine.models()[0].id, turns, 16, Sampling(temperature=0))
    [d async for d in engine.generate(request)]
    after = rss()
    await engine.aclose()
    print(json.dumps({"rss_before": before, "rss_after": after}))
asyncio.run(main())
"""


def ours_resident_bytes(model: str) -> int:
    """What our engine adds to a fresh process's resident memory (`OURS_RESIDENT`)."""
    import subprocess

    done = subprocess.run(
        [sys.executable, "-c", OURS_RESIDENT, model, str(ROOT)], capture_output=True, text=True, check=True
    )
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return int(figures["rss_after"]) - int(figures["rss_before"])


def dense_copy_bytes(engine: Any) -> int:
    """Bytes of the float32 copies the quantized layers keep for prefill (quantized.py)."""
    model = engine._scheduler._model  # a measurement of the loaded model, nothing changed
    return sum(module["dense"].nbytes for _, module in model.named_modules() if "dense" in module)


async def bench_head_to_head(args: argparse.Namespace) -> dict[str, Any]:
    """Our engine (the defaults) and llama.cpp's AVX-512 build, both loaded, measured in turn
    `--rounds` times, the order swapped every round: this machine's speed drifts by a third over
    minutes (a shared host), and a comparator measured minutes later carries that drift into its
    ratio. Per round: single-stream decode and prefill of each, and our aggregate decode at 8
    streams; each ratio is taken within its round, the reported one is their median (the
    worst round's too). Where the CPU has VNNI, also our single stream on int8 input rows
    (`q4-int8`). Resident memory: what loading and warming each up added to its process."""
    from bench_llama_cpp import BUILDS, LlamaChild

    from reference_server.engine import load_engine
    from reference_server.engine.base import EngineRequest, Sampling, Turn
    from reference_server.engine.mlx import ServingLimits
    from reference_server.engine.quantized import input_bits, set_input_bits

    limits = ServingLimits(max_batch=max(8, *args.streams), cache_min_tokens=1024)
    engine = await asyncio.to_thread(load_engine, args.model, limits=limits)
    model_id = engine.models()[0].id

    def ask(text: str, max_tokens: int = args.max_tokens) -> EngineRequest:
        return EngineRequest(model_id, (Turn("user", text),), max_tokens, Sampling(temperature=0))

    prompt = padded_text(engine.tokenizer, args.prompt_tokens)
    await _timeline(engine, ask(f"Warm-up. {prompt}"))
    # The AVX-512 build dies with SIGILL on a CPU without AVX-512 (seen on an AVX2-only VM).
    build = "avx512" if "avx512f" in Path("/proc/cpuinfo").read_text() else "avx2"
    llama = LlamaChild(args, build, padded_text)
    rounds: list[dict[str, float]] = []
    try:
        for n in range(args.rounds):
            step(f"round {n + 1} of {args.rounds}")
            figures: dict[str, float] = {}

            async def ours(n: int = n, figures: dict[str, float] = figures) -> None:
                figures["ours_decode"] = _single(await _timeline(engine, ask(f"Single {n}. {prompt}")))[
                    "decode_tok_s"
                ]
                # A prompt of its own each round: no prefix of it is cached.
                text = padded_text(engine.tokenizer, args.prefill_tokens, f"Head to head {n}. ")
                tokens = await engine.count_tokens(ask(text))
                figures["ours_prefill"] = tokens / _single(await _timeline(engine, ask(text, 1)))["ttft_s"]
                streams = [ask(f"Round {n}, stream {i}. {prompt}") for i in range(8)]
                lines = await asyncio.gather(*(_timeline(engine, r) for r in streams))
                figures["ours_agg8"] = window_rate(lines)[0]
                # The same model on int8 input rows (--precision q4-int8: llama.cpp's arithmetic).
                if set_input_bits(8) == 0 and input_bits() == 8:
                    try:
                        line = await _timeline(engine, ask(f"Int8 {n}. {prompt}"))
                        figures["int8_decode"] = _single(line)["decode_tok_s"]
                    finally:
                        set_input_bits(0)

            def theirs(figures: dict[str, float] = figures) -> None:
                figures["llama_decode"] = llama.run("prompt", args.max_tokens)["decode_tok_s"]
                prefill = llama.run("prefill", 1)
                figures["llama_prefill"] = prefill["prompt_tokens"] / prefill["ttft_s"]

            if n % 2 == 0:
                await ours()
                theirs()
            else:
                theirs()
                await ours()
            figures["decode_ratio"] = figures["ours_decode"] / figures["llama_decode"]
            figures["prefill_ratio"] = figures["ours_prefill"] / figures["llama_prefill"]
            figures["agg8_ratio"] = figures["ours_agg8"] / figures["llama_decode"]
            if "int8_decode" in figures:
                figures["int8_decode_ratio"] = figures["int8_decode"] / figures["llama_decode"]
            rounds.append(figures)
        dense = dense_copy_bytes(engine)
    finally:
        llama.close()
        await engine.aclose()
    out: dict[str, Any] = {"rounds": rounds, "comparator": f"llama.cpp {build} (" + BUILDS[build][1] + ")"}
    for key in rounds[0]:
        values = [r[key] for r in rounds]
        out[key] = {"median": statistics.median(values), "worst": min(values)}
    llama_resident = llama.ready["rss_after"] - llama.ready["rss_before"]
    ours_resident = ours_resident_bytes(args.model)
    out["resident"] = {
        "ours_bytes": ours_resident,
        "llama_cpp_bytes": llama_resident,
        "ratio": ours_resident / llama_resident,
        "ours_float32_prefill_copies_bytes": dense,
    }
    return out


# --- bare mlx-lm on the same loaded model --------------------------------------------------


def bench_mlx_lm(args: argparse.Namespace) -> dict[str, Any]:
    import mlx.core as mx
    from mlx_lm.generate import BatchGenerator, generate_step

    from reference_server.engine.base import Turn
    from reference_server.engine.blas import enable_fast_blas
    from reference_server.engine.loading import load_model as _load
    from reference_server.engine.sources import resolve_model

    loaded = _load(resolve_model(args.model), enable_fast_blas("auto"), 0, None)
    model, tokenizer = loaded.model, loaded.tokenizer
    prompt = padded_text(tokenizer, args.prompt_tokens)
    tokens = tokenizer.encode_turns((Turn("user", prompt),))
    eos = tokenizer.eos_token_ids

    def greedy(logprobs: Any) -> Any:
        return mx.argmax(logprobs, axis=-1)

    singles = []
    for _ in range(args.runs):
        line = [(time.perf_counter(), 0)]
        for count, (token, _) in enumerate(
            generate_step(mx.array(tokens), model, max_tokens=args.max_tokens, sampler=greedy), start=1
        ):
            line.append((time.perf_counter(), count))
            if int(token) in eos:
                break
        singles.append(_single(line))
    out: dict[str, Any] = {
        "ttft_s": statistics.median(s["ttft_s"] for s in singles),
        "decode_tok_s": statistics.median(s["decode_tok_s"] for s in singles),
        "aggregate": {},
    }
    for streams in args.streams:
        prompts = [
            tokenizer.encode_turns((Turn("user", f"Round {streams}, stream {i}. {prompt}"),))
            for i in range(streams)
        ]
        generator = BatchGenerator(
            model,
            max_tokens=args.max_tokens,
            stop_tokens=[[t] for t in eos],
            completion_batch_size=streams,
            prefill_batch_size=min(8, streams),
        )
        uids = generator.insert(prompts)
        lines: dict[int, list[tuple[float, int]]] = {uid: [(time.perf_counter(), 0)] for uid in uids}
        live = set(uids)
        while live:
            for response in generator.next_generated():
                line = lines[response.uid]
                line.append((time.perf_counter(), line[-1][1] + 1))
                if response.finish_reason is not None:
                    live.discard(response.uid)
        generator.close()
        rate, window = window_rate(list(lines.values()))
        out["aggregate"][str(streams)] = {"decode_tok_s": rate, "window_tokens": window}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--prompt-tokens", type=int, default=195)
    parser.add_argument("--prefill-tokens", type=int, default=1024)
    parser.add_argument("--cache-prompt-tokens", type=int, default=6000)
    parser.add_argument("--streams", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 8, 16])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds against llama.cpp")
    parser.add_argument("--with-llama-cpp", action="store_true", help="also measure llama.cpp (opt-in)")
    parser.add_argument("--skip", default="", help="comma-separated comparators not to measure (e.g. mlx_lm)")
    parser.add_argument(
        "--echo-tokens", type=int, default=256, help="output tokens of each speculative workload"
    )
    parser.add_argument("--quick", action="store_true", help="small sizes: a smoke run")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_tokens, args.prefill_tokens, args.cache_prompt_tokens, args.echo_tokens = 16, 256, 1200, 48
        args.streams, args.runs, args.rounds = [1, 4], 1, 2
    from reference_server.engine.blas import enable_fast_blas

    blas = enable_fast_blas("auto")  # before MLX loads, for every engine in this process
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {
        "model": args.model,
        "machine": f"{platform.machine()}, {len(os.sched_getaffinity(0))} cores, BLAS {blas}",
        "load_average": os.getloadavg(),
        "streams": args.streams,
        "max_tokens": args.max_tokens,
    }
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("ours", lambda: asyncio.run(bench_engine(args, batching=True))),
        ("ours_f32", lambda: asyncio.run(bench_engine(args, batching=True, precision="f32", full=False))),
        ("round_robin", lambda: asyncio.run(bench_engine(args, batching=False, full=False))),
        ("mlx_lm", lambda: bench_mlx_lm(args)),
    ]
    from bench_speculative import bench_served, bench_speculative

    steps.append(("served", lambda: bench_served(args, args.out / "server.log")))
    if args.with_llama_cpp:
        from bench_llama_cpp import bench_llama_cpp

        for key, build in (("llama_cpp_avx512", "avx512"), ("llama_cpp", "avx2")):
            steps.append((key, lambda build=build: bench_llama_cpp(args, build, padded_text)))
        steps.append(("head_to_head", lambda: asyncio.run(bench_head_to_head(args))))
        steps.append(("speculative", lambda: bench_speculative(args, padded_text, args.out / "server.log")))
    skipped = set(filter(None, args.skip.split(",")))
    for key, step in steps:
        if key in skipped:
            continue
        began = time.perf_counter()
        print(f"measuring {key}...", flush=True)
        results[key] = step()
        results[key]["measured_in_s"] = round(time.perf_counter() - began, 1)
        print(f"measured {key} in {results[key]['measured_in_s']} s", flush=True)
        # Kept as measured so far: a late failure loses nothing already measured.
        (args.out / "bench.partial.json").write_text(json.dumps(results, indent=2, default=float) + "\n")
    from bench_report import chart, print_table, targets

    results["targets"] = targets(results)
    (args.out / "bench.json").write_text(json.dumps(results, indent=2, default=float) + "\n")
    chart(results, args.out / "bench.png")
    print_table(results)
    print(f"wrote {args.out / 'bench.json'} and {args.out / 'bench.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
