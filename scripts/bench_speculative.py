"""Speculative decoding and the served aggregate, for scripts/bench.py: both through the HTTP
server, as a client sees them.

Workloads (`WORKLOADS`), greedy, streamed, each a Messages request:
- `free_text`: a story; nothing to look up (the drafter must turn itself off);
- `tool_quote`: a forced tool call whose argument quotes a ~2,000-token document of the prompt;
- `edit_echo`: a ~500-token file given back with one name changed;
- `structured`: `output_config.format` (a JSON schema) filled from a CSV table of the prompt.
Each is measured on our server with drafting (`--speculative`, the default) and without
(`--no-speculative`), and on llama.cpp (the same GGUF and the very prompt text our chat template
renders, tools included) in plain decode and with its own prompt lookup
(`LlamaPromptLookupDecoding`, llama-cpp-python's); llama.cpp decodes without the grammar (it
has no tool or schema constraint of ours). Rounds alternate the order; figures are medians of
decode tok/s after the first token: (output tokens - 1) / (last event - first delta).

The served aggregate: N streams posted at once, each its own prompt, prefill included:
output tokens of all over the wall time from the first post to the last end, against one stream
measured the same way.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

WORKLOADS = ("free_text", "tool_quote", "edit_echo", "structured")
# The echo workloads: where drafts should pay most (the 1.5x target).
ECHO = ("tool_quote", "edit_echo")
LEGACY = {"anthropic-version": "2023-06-01"}  # temperature is a 2023-06-01 field

SAVE_TOOL = {
    "name": "save_document",
    "description": "Save a document, its text exactly as given.",
    "input_schema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]},
}
PEOPLE_SCHEMA = {
    "type": "object",
    "properties": {
        "people": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "name": {"type": "string"},
                    "age": {"type": "integer"},
                    "city": {"type": "string"},
                },
                "required": ["name", "age", "city"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["people"],
    "additionalProperties": False,
}
_TOPICS = ("harbour", "lighthouse", "ferry", "storm", "tide", "beacon", "pier", "crew")


def document(lines: int) -> str:
    """A ship log as CSV, `lines` rows (about 14 tokens each): text a small model copies."""
    rows = (
        f"{i},{_TOPICS[i % 8]},day {i},{i * 7 % 31} ships,{i * 3 % 11} repairs" for i in range(1, lines + 1)
    )
    return "id,place,day,ships,repairs\n" + "\n".join(rows)


def source_file(functions: int) -> str:
    """A Python file of `functions` small functions (about 45 tokens each)."""
    parts = ['"""Ledger helpers."""\n']
    for i in range(functions):
        parts.append(
            f'def total_{i}(items):\n    """Sum of the items\' amounts, batch {i}."""\n'
            f"    return sum(item.amount * {i + 1} for item in items)\n"
        )
    return "\n\n".join(parts)


def people(rows: int) -> str:
    return "name,age,city\n" + "\n".join(f"Person {i},{20 + i % 50},City {i % 9}" for i in range(rows))


def workloads(quick: bool, max_tokens: int) -> dict[str, dict[str, Any]]:
    """The Messages bodies (stream, greedy) of each workload."""
    scale = 4 if quick else 1
    message = lambda text: [{"role": "user", "content": text}]  # noqa: E731
    return {
        "free_text": {
            "max_tokens": max_tokens,
            "messages": message("Write a long, imaginative story about a lighthouse keeper and her cat."),
        },
        "tool_quote": {
            "max_tokens": max_tokens,
            "tools": [SAVE_TOOL],
            "tool_choice": {"type": "tool", "name": "save_document"},
            "messages": message(
                "Call save_document with `text` set to this CSV document, every line copied exactly:\n\n"
                + document(140 // scale)
            ),
        },
        "edit_echo": {
            "max_tokens": max_tokens,
            "messages": message(
                "Here is a file:\n\n```python\n"
                + source_file(12 // scale)
                + "\n```\n\nGive back the whole file, unchanged except that the docstring at the top "
                "says Accounting helpers. Answer with the file only."
            ),
        },
        "structured": {
            "max_tokens": max_tokens,
            "output_config": {"format": {"type": "json_schema", "schema": PEOPLE_SCHEMA}},
            "messages": message("List every person of this table as JSON.\n\n" + people(40 // scale)),
        },
    }


async def stream_once(http: Any, body: dict[str, Any]) -> dict[str, float]:
    """One streamed request: its output tokens, time to the first delta, decode tok/s after it,
    and the times it was posted, first answered and finished (perf_counter)."""
    posted = time.perf_counter()
    first: float | None = None
    tokens = 0
    async with http.stream(
        "POST", "/v1/messages", json={**body, "stream": True, "temperature": 0}
    ) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if not line.startswith("data:"):
                continue
            event = json.loads(line[5:])
            if event["type"] == "content_block_delta" and first is None:
                first = time.perf_counter()
            elif event["type"] == "message_delta":
                tokens = int(event["usage"]["output_tokens"])
    end = time.perf_counter()
    if first is None:
        raise RuntimeError("no content was streamed")
    return {
        "tokens": tokens,
        "ttft_s": first - posted,
        "tok_s": (tokens - 1) / (end - first) if tokens > 1 and end > first else 0.0,
        "posted": posted,
        "first": first,
        "end": end,
    }


def llama_prompts(model: str, bodies: dict[str, dict[str, Any]]) -> dict[str, str]:
    """The prompt text our chat template renders for each workload (tools included), for
    llama.cpp to read the very same tokens."""
    from reference_server.engine.base import ToolSpec, Turn
    from reference_server.engine.gguf import read_metadata
    from reference_server.engine.sources import resolve_model
    from reference_server.engine.tokenizer import ChatTokenizer

    tokenizer = ChatTokenizer.from_gguf(read_metadata(resolve_model(model).path))
    texts = {}
    for name, body in bodies.items():
        tools = tuple(ToolSpec(t["name"], t["description"], t["input_schema"]) for t in body.get("tools", ()))
        texts[name] = tokenizer.render((Turn("user", body["messages"][0]["content"]),), tools)
    return texts


def bench_speculative(args: Any, padded_text: Callable[..., str], log: Path) -> dict[str, Any]:
    """Every workload on our server with and without drafting and on llama.cpp plain and with
    its lookup decoding, `args.rounds` alternating rounds; medians."""
    import httpx
    from bench_llama_cpp import LlamaChild

    from conformance.wire.launcher import reference_server

    bodies = workloads(args.quick, args.echo_tokens)
    texts = llama_prompts(args.model, bodies)
    build = "avx512" if "avx512f" in Path("/proc/cpuinfo").read_text() else "avx2"
    runs: dict[str, dict[str, list[dict[str, float]]]] = {w: {} for w in WORKLOADS}

    async def ours(url: str, key: str) -> None:
        async with httpx.AsyncClient(base_url=url, timeout=900, headers=LEGACY) as http:
            for name in WORKLOADS:
                runs[name].setdefault(key, []).append(
                    await stream_once(http, {"model": args.model, **bodies[name]})
                )

    def theirs(child: Any, key: str) -> None:
        for name in WORKLOADS:
            result = child.run(name, args.echo_tokens)
            runs[name].setdefault(key, []).append(
                {
                    "tokens": result.get("tokens", 0),
                    "tok_s": result["decode_tok_s"],
                    "ttft_s": result["ttft_s"],
                }
            )

    with (
        reference_server(args.model, log=log, args=["--speculative"]) as drafting,
        reference_server(
            args.model, log=log.with_name("server-plain.log"), args=["--no-speculative"]
        ) as plain,
    ):
        llama = LlamaChild(args, build, padded_text, texts=texts)
        lookup = LlamaChild(args, build, padded_text, texts=texts, lookup=True)
        try:
            # One warm-up each, not counted (the first request compiles and caches).
            asyncio.run(ours(drafting, "warm"))
            asyncio.run(ours(plain, "warm"))
            measures: list[Callable[[], None]] = [
                lambda: asyncio.run(ours(drafting, "ours")),
                lambda: asyncio.run(ours(plain, "ours_plain")),
                lambda: theirs(llama, "llama_cpp"),
                lambda: theirs(lookup, "llama_cpp_lookup"),
            ]
            for n in range(args.rounds):
                print(f"  {time.strftime('%H:%M:%S')} speculative round {n + 1} of {args.rounds}", flush=True)
                order = measures[n % 4 :] + measures[: n % 4]
                for measure in order:
                    measure()
        finally:
            llama.close()
            lookup.close()
    out: dict[str, Any] = {
        "comparator": f"llama.cpp {build}, plain decode and its prompt lookup",
        "workloads": list(WORKLOADS),
        "echo": list(ECHO),
    }
    for name in WORKLOADS:
        row: dict[str, Any] = {}
        for key in ("ours", "ours_plain", "llama_cpp", "llama_cpp_lookup"):
            row[f"{key}_tok_s"] = statistics.median(r["tok_s"] for r in runs[name][key])
        row["ours_tokens"] = runs[name]["ours"][-1]["tokens"]
        row["ours_ttft_s"] = statistics.median(r["ttft_s"] for r in runs[name]["ours"])
        row["vs_llama_cpp"] = row["ours_tok_s"] / row["llama_cpp_tok_s"]
        row["vs_ours_plain"] = row["ours_tok_s"] / row["ours_plain_tok_s"]
        row["rounds"] = {key: [r["tok_s"] for r in values] for key, values in runs[name].items()}
        out[name] = row
    out["average_vs_llama_cpp"] = statistics.mean(out[name]["vs_llama_cpp"] for name in WORKLOADS)
    out["echo_min_vs_llama_cpp"] = min(out[name]["vs_llama_cpp"] for name in ECHO)
    return out


def served_prompt(n: int, tokens: int) -> str:
    """A prompt of its own for stream `n` (distinct from the first token: no prefix reuse)."""
    return f"Stream {n}: " + " ".join(
        f"Describe {_TOPICS[(n + i) % 8]} number {i}." for i in range(max(1, tokens // 6))
    )


# Prompt sizes of the served aggregate: the bench's prompt, and a short one (about 24 tokens of
# text) where decode, not prefill, is most of the work: the two apart say what prefill costs.
def served_sizes(args: Any) -> dict[str, int]:
    return {"prompt": args.prompt_tokens, "short": 24}


def bench_served(args: Any, log: Path) -> dict[str, Any]:
    """N concurrent streams through the server (prompts of their own, prefill included) against
    one, `args.rounds` times, alternating, for each of `served_sizes`: tokens over wall time;
    medians. Also, per stream count, the sum of the streams' own decode rates after their first
    token (what the engine bench's window measures, without prefill)."""
    return {size: _served(args, log, tokens) for size, tokens in served_sizes(args).items()}


def _served(args: Any, log: Path, prompt_tokens: int) -> dict[str, Any]:
    import httpx

    from conformance.wire.launcher import reference_server

    counts = sorted({1, *args.streams})
    rates: dict[int, list[float]] = {n: [] for n in counts}
    decode: dict[int, list[float]] = {n: [] for n in counts}
    serial = 0

    async def once(url: str, streams: int) -> None:
        nonlocal serial
        async with httpx.AsyncClient(base_url=url, timeout=900, headers=LEGACY) as http:
            bodies = []
            for _ in range(streams):
                serial += 1
                text = served_prompt(serial, prompt_tokens)
                bodies.append(
                    {
                        "model": args.model,
                        "max_tokens": args.max_tokens,
                        "messages": [{"role": "user", "content": text}],
                    }
                )
            results = await asyncio.gather(*(stream_once(http, body) for body in bodies))
        total = sum(r["tokens"] for r in results)
        wall = max(r["end"] for r in results) - min(r["posted"] for r in results)
        rates[streams].append(total / wall)
        # While every stream decodes (each at its own steady rate): the engine bench's window.
        start, end = max(r["first"] for r in results), min(r["end"] for r in results)
        if end > start:
            decode[streams].append(sum(r["tok_s"] for r in results))

    with reference_server(args.model, log=log) as url:
        asyncio.run(once(url, 1))  # warm-up
        for n in range(args.rounds):
            print(f"  {time.strftime('%H:%M:%S')} served round {n + 1} of {args.rounds}", flush=True)
            for streams in counts if n % 2 == 0 else reversed(counts):
                asyncio.run(once(url, streams))
    out: dict[str, Any] = {"max_tokens": args.max_tokens, "prompt_tokens_about": prompt_tokens}
    for streams in counts:
        out[str(streams)] = {
            "tok_s": statistics.median(rates[streams]),
            "decoding_tok_s": statistics.median(decode[streams]) if decode[streams] else 0.0,
            "rounds": rates[streams],
        }
    for streams in counts[1:]:
        out[f"{streams}_vs_1"] = out[str(streams)]["tok_s"] / out["1"]["tok_s"]
    return out
