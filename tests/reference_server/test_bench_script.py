"""scripts/bench.py's arithmetic: the aggregate decode window and the targets table."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def _load(name: str, path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench() -> Any:
    return _load("bench_script", SCRIPTS / "bench.py")


@pytest.fixture(scope="module")
def report() -> Any:
    return _load("bench_report_script", SCRIPTS / "bench_report.py")


def test_the_window_starts_at_the_last_first_token_and_ends_at_the_first_end(bench: Any) -> None:
    # (time, cumulative tokens); each timeline starts with its request (0 tokens).
    early = [(0.0, 0), (1.0, 1), (2.0, 2), (3.0, 3), (4.0, 4)]
    late = [(0.0, 0), (2.0, 1), (3.0, 2), (5.0, 3)]
    rate, tokens = bench.window_rate([early, late])
    # Window [2, 4]: early makes tokens 3 and 4, late token 2; prefill time is outside it.
    assert tokens == 3
    assert rate == pytest.approx(1.5)


def test_targets_compare_against_the_named_comparators(report: Any) -> None:
    targets = report.targets
    ours = {
        "decode_tok_s": 10.0,
        "prefill_tok_s": 300.0,
        "aggregate": {"8": {"decode_tok_s": 45.0}},
        "prefix_cache": {"speedup": 12.0},
        "overhead": {"overhead": 0.01},
    }
    results = {
        "ours": ours,
        "round_robin": {"decode_tok_s": 8.0},
        "llama_cpp": {"decode_tok_s": 60.0, "prefill_tok_s": 250.0},
        "llama_cpp_avx512": {"decode_tok_s": 10.0, "prefill_tok_s": 400.0},
    }
    rows = {row["target"]: row for row in targets(results)}
    assert rows["aggregate decode at 8 streams / our single stream"]["ratio"] == 4.5
    assert rows["aggregate decode at 8 streams / our single stream"]["met"] is True
    assert rows["aggregate decode at 8 streams / llama.cpp AVX2 (earlier) single stream"]["ratio"] == 0.75
    assert rows["single-stream decode / llama.cpp AVX-512 decode"]["met"] is True
    assert rows["single-stream decode / round-robin scheduler's"]["met"] is False
    assert rows["prefill / llama.cpp AVX2 (earlier) prefill"]["ratio"] == 1.2
    assert rows["prefill / llama.cpp AVX-512 prefill"]["met"] is False
    # Comparators left out (--skip, no --with-llama-cpp): their targets are unjudged, not errors.
    without = {row["target"]: row["met"] for row in targets({"ours": ours})}
    assert without["prefill / llama.cpp AVX-512 prefill"] is None
    assert without["single-stream decode / round-robin scheduler's"] is None


def test_speculative_and_served_rows_judge_their_goals(report: Any) -> None:
    ours = {"decode_tok_s": 10.0, "prefill_tok_s": 300.0, "aggregate": {}, "prefix_cache": {"speedup": 6.0}}
    ours["overhead"] = {"overhead": 0.0}

    def workload(tok_s: float, plain: float, llama: float) -> dict[str, float]:
        return {
            "ours_tok_s": tok_s,
            "ours_plain_tok_s": plain,
            "llama_cpp_tok_s": llama,
            "llama_cpp_lookup_tok_s": llama,
            "vs_llama_cpp": tok_s / llama,
            "vs_ours_plain": tok_s / plain,
        }

    spec = {
        "workloads": ["free_text", "tool_quote", "edit_echo", "structured"],
        "echo": ["tool_quote", "edit_echo"],
        "comparator": "llama.cpp avx2",
        "free_text": workload(39.0, 40.0, 40.0),
        "tool_quote": workload(80.0, 40.0, 40.0),
        "edit_echo": workload(50.0, 40.0, 40.0),
        "structured": workload(44.0, 40.0, 40.0),
    }
    spec["average_vs_llama_cpp"] = (0.975 + 2.0 + 1.25 + 1.1) / 4
    served = {
        "prompt": {"1": {"tok_s": 30.0}, "8_vs_1": 2.1, "prompt_tokens_about": 195},
        "short": {"1": {"tok_s": 40.0}, "8_vs_1": 3.2, "prompt_tokens_about": 24},
        "measured_in_s": 61.5,  # bench.py adds it to every comparator's figures
    }
    rows = {
        row["target"]: row for row in report.targets({"ours": ours, "speculative": spec, "served": served})
    }
    assert rows["speculative tool_quote: ours / llama.cpp plain decode"]["met"] is True
    assert rows["speculative edit_echo: ours / llama.cpp plain decode"]["met"] is False  # 1.25 < 1.5
    assert rows["speculative structured: ours / llama.cpp plain decode"]["met"] is None  # no goal of its own
    assert rows["speculative: the four workloads on average / llama.cpp plain"]["met"] is True
    assert rows["speculative free_text: ours / ours without drafting"]["met"] is False  # slower: fails
    served_rows = "served: 8 streams / 1 stream over HTTP, prefill included ({} prompts)"
    assert rows[served_rows.format("prompt")]["met"] is False
    assert rows[served_rows.format("short")]["met"] is True
