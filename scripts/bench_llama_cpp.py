"""llama.cpp on the same GGUF, for scripts/bench.py: llama-cpp-python built into `.cache/bench/`.

Two builds, each built on first use (about 5 minutes each on two cores):
- `avx2`: `-DGGML_NATIVE=OFF`, the comparator of the earlier figures. GGML_NATIVE=OFF keeps
  ggml's AVX, AVX2, FMA and F16C kernels and leaves out AVX-512 (its libggml-cpu.so has ymm
  instructions and no zmm one). A native build crashed on the reference machine with an illegal
  instruction in its AMX path (the VM does not grant AMX).
- `avx512`: the same plus AVX-512 F/BW/VL/DQ, VBMI, VNNI and BF16, AMX still off: the vector
  units this CPU has and our kernels (engine/cpu/) use, so the fair comparator here.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
LLAMA_CPP = "llama-cpp-python==0.3.16"
BUILDS = {
    "avx2": ("llama-cpp", "-DGGML_NATIVE=OFF"),
    "avx512": (
        "llama-cpp-avx512",
        "-DGGML_NATIVE=OFF -DGGML_AVX512=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_VNNI=ON"
        " -DGGML_AVX512_BF16=ON",
    ),
}


def llama_python(build: str) -> Path:
    """The venv with llama-cpp-python built with `BUILDS[build]`'s flags, built on first use."""
    folder, flags = BUILDS[build]
    venv = ROOT / ".cache" / "bench" / folder
    python = venv / "bin" / "python"
    if python.exists():
        check = subprocess.run([python, "-c", "import llama_cpp"], capture_output=True, check=False)
        if check.returncode == 0:
            return python
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    env = {**os.environ, "CMAKE_ARGS": flags, "CMAKE_BUILD_PARALLEL_LEVEL": str(os.cpu_count() or 2)}
    print(f"building {LLAMA_CPP} ({flags}) into {venv} (about 5 minutes)...", flush=True)
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-cache-dir", LLAMA_CPP], check=True, env=env)
    return python


# The child: loads the GGUF, warms up, says it is ready (with its resident memory before and
# after loading), then answers one JSON line per command line: {"text": "prompt" or "prefill",
# "max_tokens": n} -> prompt tokens, time to first token, decode tok/s.
LLAMA_CHILD = r"""
import json, sys, time
def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status if line.startswith("VmRSS"))
from llama_cpp import Llama
from llama_cpp.llama_speculative import LlamaPromptLookupDecoding
spec = json.loads(sys.argv[1])
texts = {**spec.get("texts", {}), "prompt": spec["prompt"], "prefill": spec["prefill"]}
before = rss()
# With "lookup": llama-cpp-python's own prompt-lookup drafts (its draft_model).
draft = LlamaPromptLookupDecoding(num_pred_tokens=10) if spec.get("lookup") else None
llm = Llama(model_path=spec["gguf"], n_ctx=4096, n_threads=spec["threads"], n_batch=512, verbose=False,
            draft_model=draft, logits_all=draft is not None)  # drafts are verified on all logits
def run(text, max_tokens):
    tokens = llm.tokenize(text.encode(), add_bos=False, special=True)
    llm.reset()
    began = time.perf_counter(); first = last = None; n = 0
    for n, token in enumerate(llm.generate(tokens, temp=0.0, top_k=1, reset=True), start=1):
        now = time.perf_counter()
        first = first or now
        last = now
        if token == llm.token_eos() or n >= max_tokens:
            break
    return {"prompt_tokens": len(tokens), "ttft_s": first - began, "tokens": n,
            "decode_tok_s": (n - 1) / (last - first) if n > 1 else 0.0}
for _ in range(2):
    run(spec["prompt"], 2)  # warm-up
print(json.dumps({"ready": True, "rss_before": before, "rss_after": rss()}), flush=True)
for line in sys.stdin:
    command = json.loads(line)
    print(json.dumps(run(texts[command["text"]], command["max_tokens"])), flush=True)
"""


class LlamaChild:
    """llama.cpp (build `build`) in a child process that stays loaded between measurements, so
    they can alternate with ours (bench.py's head-to-head)."""

    def __init__(
        self,
        args: Any,
        build: str,
        padded_text: Any,
        *,
        texts: dict[str, str] | None = None,
        lookup: bool = False,
    ) -> None:
        """`texts`: more prompts by name, beside "prompt" and "prefill"; `lookup`: decode with
        llama-cpp-python's prompt-lookup drafts."""
        from reference_server.engine.base import Turn
        from reference_server.engine.gguf import read_metadata
        from reference_server.engine.sources import resolve_model
        from reference_server.engine.tokenizer import ChatTokenizer

        source = resolve_model(args.model)  # the same GGUF as ours (SmolLM2's, or the Qwen's)
        if source.kind != "gguf":
            raise SystemExit(f"llama.cpp reads GGUF files: {args.model} is not one")
        self.gguf = source.path
        tokenizer = ChatTokenizer.from_gguf(read_metadata(self.gguf))
        spec = {
            "gguf": str(self.gguf),
            "threads": len(os.sched_getaffinity(0)),
            # The exact prompt texts our engine reads, chat template included.
            "prompt": tokenizer.render((Turn("user", padded_text(tokenizer, args.prompt_tokens)),)),
            "prefill": tokenizer.render(
                (Turn("user", padded_text(tokenizer, args.prefill_tokens, "Prefill. ")),)
            ),
            "texts": texts or {},
            "lookup": lookup,
        }
        self.build = build
        self.process = subprocess.Popen(
            [llama_python(build), "-c", LLAMA_CHILD, json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.ready: dict[str, Any] = self._answer()

    def _answer(self) -> dict[str, Any]:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"llama.cpp ({self.build}) exited with {self.process.wait()}")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def run(self, text: str, max_tokens: int) -> dict[str, Any]:
        """One generation of `text` ("prompt", "prefill" or a name of `texts`), timed by the child."""
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps({"text": text, "max_tokens": max_tokens}) + "\n")
        self.process.stdin.flush()
        return self._answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        self.process.wait(timeout=60)


def bench_llama_cpp(args: Any, build: str, padded_text: Any) -> dict[str, Any]:
    """Prefill, time to first token and decode of llama.cpp (build `build`) on the prompts our
    engine reads (`padded_text` is bench.py's), medians of `args.runs`."""
    try:
        child = LlamaChild(args, build, padded_text)
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        return {"error": str(exc)}
    try:
        prefill = [child.run("prefill", 1) for _ in range(args.runs)]
        singles = [child.run("prompt", args.max_tokens) for _ in range(args.runs)]
    finally:
        child.close()
    return {
        "prefill_tokens": prefill[0]["prompt_tokens"],
        "prefill_tok_s": prefill[0]["prompt_tokens"] / statistics.median(r["ttft_s"] for r in prefill),
        "ttft_s": statistics.median(r["ttft_s"] for r in singles),
        "decode_tok_s": statistics.median(r["decode_tok_s"] for r in singles),
        "resident_bytes": child.ready["rss_after"] - child.ready["rss_before"],
        "gguf": child.gguf.name,
        "build": BUILDS[build][1],
    }
