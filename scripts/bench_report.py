"""The report of scripts/bench.py: the targets as ratios measured in the run, the terminal
table and the chart (`reports/bench/bench.png`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    ours, before = results["ours"], results.get("round_robin")  # comparators may be --skip'ped
    agg8 = ours["aggregate"].get("8", {}).get("decode_tok_s")
    rows: list[dict[str, Any]] = []

    def row(name: str, value: float | None, goal: float | None, comparator: str) -> None:
        rows.append(
            {
                "target": name,
                "ratio": None if value is None else round(value, 3),
                "goal": goal,
                "met": None if value is None or goal is None else value >= goal,
                "comparator": comparator,
            }
        )

    # Issue 36: against llama.cpp (the AVX-512 build where the CPU has it, else AVX2), alternating
    # in one process pair (head_to_head): the median of the per-round ratios, and the worst
    # round's in the comparator column.
    head = results.get("head_to_head") or {}
    build = "llama.cpp " + str(head.get("comparator", "AVX-512").removeprefix("llama.cpp ").split(" ")[0])
    for name, key, goal in (
        (f"single-stream decode / {build} (alternating rounds, median)", "decode_ratio", 1.1),
        (f"prefill / {build} (alternating rounds, median)", "prefill_ratio", 1.2),
        (f"aggregate decode at 8 streams / {build} single stream (alternating)", "agg8_ratio", 3.0),
        (f"single-stream decode on int8 input rows (q4-int8) / {build}", "int8_decode_ratio", None),
    ):
        if key in head:
            row(name, head[key]["median"], goal, f"{build}; worst round {head[key]['worst']:.3f}")
    if "resident" in head:
        resident = head["resident"]
        row(
            "resident memory of the loaded model / llama.cpp's",
            resident["ratio"],
            None,
            f"{resident['ours_bytes'] / 2**20:.0f} MiB against {resident['llama_cpp_bytes'] / 2**20:.0f} MiB",
        )
    # Issue 19, section 3: against llama.cpp's single stream, each measured once after ours, the
    # AVX-512 build (the same vector units as our kernels) and the AVX2 build of the earlier figures.
    for key, label in (("llama_cpp_avx512", "llama.cpp AVX-512"), ("llama_cpp", "llama.cpp AVX2 (earlier)")):
        llama = results.get(key) or {}
        decode, prefill = llama.get("decode_tok_s"), llama.get("prefill_tok_s")
        row(f"single-stream decode / {label} decode", decode and ours["decode_tok_s"] / decode, 1.0, label)
        row(f"prefill / {label} prefill", prefill and ours["prefill_tok_s"] / prefill, 1.0, label)
        row(
            f"aggregate decode at 8 streams / {label} single stream",
            agg8 and decode and agg8 / decode,
            3.0,
            label,
        )
    f32 = results.get("ours_f32") or {}
    if f32:
        row(
            "single-stream decode / ours at float32",
            ours["decode_tok_s"] / f32["decode_tok_s"],
            None,
            "ours f32",
        )
        row("prefill / ours at float32", ours["prefill_tok_s"] / f32["prefill_tok_s"], None, "ours f32")

    row(
        "aggregate decode at 8 streams / our single stream",
        agg8 and agg8 / ours["decode_tok_s"],
        4.0,
        "ours, 1 stream",
    )
    row(
        "single-stream decode / round-robin scheduler's",
        before and ours["decode_tok_s"] / before["decode_tok_s"],
        1.3,
        "round robin (before batching)",
    )
    row("prefix-cache hit: cold TTFT / hit TTFT", ours["prefix_cache"]["speedup"], 5.0, "same prefix, cold")
    speculative_rows(results, row)
    for size, served in (results.get("served") or {}).items():
        if isinstance(served, dict) and "8_vs_1" in served:
            row(
                f"served: 8 streams / 1 stream over HTTP, prefill included ({size} prompts)",
                served["8_vs_1"],
                3.0,
                f"one served stream: {served['1']['tok_s']:.1f} tok/s, prompts of about "
                f"{served['prompt_tokens_about']} tokens",
            )
    rows.append(
        {
            "target": "server overhead (HTTP + protocol + SSE) vs engine alone",
            "ratio": round(ours["overhead"]["overhead"], 4),
            "goal": "<= 0.02",
            "met": ours["overhead"]["overhead"] <= 0.02,
            "comparator": "engine alone, same request",
        }
    )
    return rows


# Issue 44's goals against llama.cpp's plain decode: the echo workloads, and all four on average.
_ECHO_GOAL, _AVERAGE_GOAL = 1.5, 1.1


def speculative_rows(results: dict[str, Any], row: Any) -> None:
    """Issue 44: each workload with drafting against llama.cpp's plain decode (medians of
    alternating rounds), the four on average, and free text against ours without drafting."""
    spec = results.get("speculative") or {}
    if "average_vs_llama_cpp" not in spec:
        return
    for name in spec["workloads"]:
        figures = spec[name]
        row(
            f"speculative {name}: ours / llama.cpp plain decode",
            figures["vs_llama_cpp"],
            _ECHO_GOAL if name in spec["echo"] else None,
            f"ours {figures['ours_tok_s']:.1f}, without drafts {figures['ours_plain_tok_s']:.1f}, "
            f"llama.cpp {figures['llama_cpp_tok_s']:.1f}, "
            f"its lookup {figures['llama_cpp_lookup_tok_s']:.1f} tok/s",
        )
    row(
        "speculative: the four workloads on average / llama.cpp plain",
        spec["average_vs_llama_cpp"],
        _AVERAGE_GOAL,
        spec["comparator"],
    )
    row(
        "speculative free_text: ours / ours without drafting",
        spec["free_text"]["vs_ours_plain"],
        1.0,
        "ours, --no-speculative",
    )


def print_table(results: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    table = Table(title=f"Serving benchmark: {results['model']} ({results['machine']})")
    columns = ["prefill tok/s", "TTFT s", "decode tok/s", *(f"agg@{s}" for s in results["streams"])]
    table.add_column("engine")
    for column in columns:
        table.add_column(column, justify="right")
    for key, label in (
        ("ours", f"ours ({results['ours'].get('precision')}, batching)"),
        ("ours_f32", "ours, float32 (before)"),
        ("round_robin", "ours, round robin"),
        ("mlx_lm", "bare mlx-lm"),
        ("llama_cpp_avx512", "llama.cpp AVX-512"),
        ("llama_cpp", "llama.cpp AVX2 (earlier)"),
    ):
        figures = results.get(key)
        if not figures or "error" in figures:
            continue

        def cell(value: float | None, digits: int = 1) -> str:
            return "-" if value is None else f"{value:.{digits}f}"

        aggregate = figures.get("aggregate", {})
        table.add_row(
            label,
            cell(figures.get("prefill_tok_s")),
            cell(figures.get("ttft_s"), 3),
            cell(figures.get("decode_tok_s")),
            *(cell(aggregate.get(str(s), {}).get("decode_tok_s")) for s in results["streams"]),
        )
    console.print(table)
    goals = Table(title="Targets (ratios measured in this run)")
    for column in ("target", "ratio", "goal", "met", "comparator"):
        goals.add_column(column)
    for target in results["targets"]:
        goals.add_row(*(str(target[c]) for c in ("target", "ratio", "goal", "met", "comparator")))
    console.print(goals)
    cache = results["ours"]["prefix_cache"]
    console.print(
        f"prefix cache: {cache['prompt_tokens']} tokens, cold TTFT {cache['cold_ttft_s']:.2f} s, "
        f"hit {cache['hit_ttft_s']:.2f} s ({cache['speedup']:.1f}x); usage {cache['hit_usage']}"
    )
    overhead = results["ours"]["overhead"]
    console.print(
        f"server overhead: {overhead['server_s']:.3f} s through HTTP vs {overhead['engine_s']:.3f} s engine "
        f"alone ({overhead['overhead'] * 100:+.1f} %, max_tokens {overhead['max_tokens']})"
    )


def chart(results: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    streams = results["streams"]
    figure, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for key, label in (
        ("ours", "ours (batching)"),
        ("ours_f32", "ours, float32 (before)"),
        ("round_robin", "ours, round robin"),
        ("mlx_lm", "mlx-lm BatchGenerator"),
    ):
        aggregate = results.get(key, {}).get("aggregate", {})
        if aggregate:
            left.plot(streams, [aggregate[str(s)]["decode_tok_s"] for s in streams], marker="o", label=label)
    for key, label, style in (
        ("llama_cpp_avx512", "llama.cpp AVX-512", "--"),
        ("llama_cpp", "llama.cpp AVX2", ":"),
    ):
        llama = results.get(key) or {}
        if "decode_tok_s" in llama:
            left.axhline(llama["decode_tok_s"], color="grey", linestyle=style, label=f"{label}, 1 stream")
    left.set_xlabel("concurrent streams")
    left.set_ylabel("aggregate decode tok/s")
    left.set_xticks(streams)
    left.legend()
    left.set_title("Aggregate decode")
    names, prefill, decode = [], [], []
    for key, label in (
        ("ours", "ours"),
        ("ours_f32", "ours f32"),
        ("round_robin", "round robin"),
        ("mlx_lm", "mlx-lm"),
        ("llama_cpp_avx512", "llama.cpp\nAVX-512"),
        ("llama_cpp", "llama.cpp\nAVX2"),
    ):
        figures = results.get(key) or {}
        if "decode_tok_s" in figures:
            names.append(label)
            prefill.append(figures.get("prefill_tok_s") or 0)
            decode.append(figures["decode_tok_s"])
    positions = range(len(names))
    right.bar([p - 0.2 for p in positions], prefill, width=0.4, label="prefill tok/s")
    right.bar([p + 0.2 for p in positions], decode, width=0.4, label="decode tok/s (1 stream)")
    right.set_xticks(list(positions), names)
    right.legend()
    right.set_title("Single stream")
    figure.suptitle(f"{results['model']} on {results['machine']}")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
