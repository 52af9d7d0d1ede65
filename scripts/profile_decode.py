"""Where one decode step of the engine's model goes: each part timed on its own.

    python scripts/profile_decode.py                          # SmolLM2, the default precision
    python scripts/profile_decode.py --precision f32 --rows 1,8 --context 200

For each batch size (`--rows`), with a KV cache holding `--context` positions (the parts of
the rebuilt llama blocks of engine/decode.py, or with `--original` those of mlx-lm's blocks):
- the whole step as the batching scheduler runs it (forward, argmax, eval, `tolist`), and the
  time spent building its graph in Python (the forward call before any evaluation);
- each part alone, over all layers at once so that per-eval overhead is paid once: the seven
  projections per layer, the output projection (tied embedding, vocab x hidden), decode
  attention, RMS norms, rotary embeddings, SwiGLU, residual adds, KV-cache updates, argmax;
- per token outside MLX: a grammar's mask and advance (llguidance) and the detokenizer.

Each figure is the median of `--repeat` runs in milliseconds. The parts run in isolation, so
they do not add up exactly to the step (the step overlaps nothing, but pays per-operation
overhead between them). CPU contention distorts every figure: the load average is printed.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def _median_ms(run: Callable[[], Any], repeat: int) -> float:
    run()  # warm-up
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        run()
        times.append(time.perf_counter() - began)
    return round(statistics.median(times) * 1000, 3)


def _parts(model: Any, rows: int, context: int, repeat: int) -> dict[str, float]:
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from reference_server.engine.attention import decode_attention

    layers = model.model.layers
    args = model.args
    hidden, heads, kv_heads = args.hidden_size, args.num_attention_heads, args.num_key_value_heads
    dim = hidden // heads
    x = mx.random.normal((rows, 1, hidden))
    wide = mx.random.normal((rows, 1, args.intermediate_size))
    attn_out = mx.random.normal((rows, 1, heads * dim))
    mx.eval(x, wide, attn_out)
    out: dict[str, float] = {}

    def projections(names: tuple[str, ...]) -> Callable[[], Any]:
        def run() -> Any:
            results = []
            for layer in layers:
                for name in names:
                    module = (
                        layer.self_attn if name in ("q_proj", "k_proj", "v_proj", "o_proj") else layer.mlp
                    )
                    source = {"o_proj": attn_out, "down_proj": wide}.get(name, x)
                    results.append(getattr(module, name)(source))
            mx.eval(results)

        return run

    out["matmul q,k,v (30 layers)"] = _median_ms(projections(("q_proj", "k_proj", "v_proj")), repeat)
    out["matmul o (30 layers)"] = _median_ms(projections(("o_proj",)), repeat)
    out["matmul gate,up (30 layers)"] = _median_ms(projections(("gate_proj", "up_proj")), repeat)
    out["matmul down (30 layers)"] = _median_ms(projections(("down_proj",)), repeat)
    head = model.lm_head if hasattr(model, "lm_head") else model.model.embed_tokens.as_linear
    out["output projection (vocab x hidden)"] = _median_ms(lambda: mx.eval(head(x)), repeat)
    tokens = mx.zeros((rows, 1), dtype=mx.uint32)
    out["embedding lookup"] = _median_ms(lambda: mx.eval(model.model.embed_tokens(tokens)), repeat)
    q = mx.random.normal((rows, heads, 1, dim))
    k = mx.random.normal((rows, kv_heads, context, dim))
    v = mx.random.normal((rows, kv_heads, context, dim))
    mask = mx.ones((rows, 1, 1, context), dtype=mx.bool_) if rows > 1 else None
    mx.eval(q, k, v)
    out["attention (30 layers)"] = _median_ms(
        lambda: mx.eval([decode_attention(q, k, v, scale=dim**-0.5, mask=mask) for _ in layers]), repeat
    )
    norm = layers[0].input_layernorm
    out["rms norm (61)"] = _median_ms(lambda: mx.eval([norm(x + i) for i in range(61)]), repeat)
    rope = layers[0].self_attn.rope
    qk = mx.random.normal((rows, heads, 1, dim))
    mx.eval(qk)
    out["rope (60)"] = _median_ms(lambda: mx.eval([rope(qk, offset=context + i) for i in range(60)]), repeat)
    from mlx_lm.models.activations import swiglu

    out["swiglu (30)"] = _median_ms(lambda: mx.eval([swiglu(wide, wide + i) for i in range(30)]), repeat)
    out["residual add (60)"] = _median_ms(lambda: mx.eval([x + i for i in range(60)]), repeat)
    logits = mx.random.normal((rows, args.vocab_size))
    mx.eval(logits)
    out["argmax"] = _median_ms(lambda: mx.eval(mx.argmax(logits, axis=-1)), repeat)

    cache = make_prompt_cache(model)
    kk = mx.random.normal((rows, kv_heads, 1, dim))
    mx.eval(kk)

    def updates() -> None:
        for layer_cache in cache:
            layer_cache.update_and_fetch(kk, kk)
        mx.eval([c.state for c in cache])

    out["kv cache update (30)"] = _median_ms(updates, repeat)
    return out


def _fast_parts(model: Any, rows: int, context: int, repeat: int) -> dict[str, float]:
    """The parts of a decode step of the rebuilt llama blocks (engine/decode.py)."""
    import mlx.core as mx
    from mlx_lm.models.cache import make_prompt_cache

    from reference_server.engine import decode
    from reference_server.engine.quantized import cpu_kernel

    layers = model.model.layers
    args = model.args
    hidden, heads, kv_heads = args.hidden_size, args.num_attention_heads, args.num_key_value_heads
    dim = hidden // heads
    x = mx.random.normal((rows, 1, hidden))
    gate_up = mx.random.normal((rows, 1, 2 * args.intermediate_size))
    attn_out = mx.random.normal((rows, 1, heads * dim))
    mx.eval(x, gate_up, attn_out)
    kernel = cpu_kernel()
    cos, sin, _ = model.model.rope_tables
    positions = mx.array([context] * rows)
    out: dict[str, float] = {}

    def each(make: Callable[[Any], Any]) -> Callable[[], None]:
        return lambda: mx.eval([make(layer) for layer in layers])

    def projection(layer: Any) -> Any:
        config, norms, linears, _ = layer._layout
        (w, s, b), quantized, _dense = linears[0]
        if kernel is None or quantized is None:
            return decode._linear(x, linears[0], norms[0], config.eps)
        return kernel.decode_projection(
            x,
            w,
            s,
            b,
            *quantized,
            norms[0],
            config.eps,
            cos,
            sin,
            positions,
            heads,
            kv_heads,
            dim,
            layer.self_attn.rope.traditional,
            config.scale,
        )

    def linear(index: int, source: Any, **options: Any) -> Callable[[Any], Any]:
        return lambda layer: decode._linear(source, layer._layout[2][index], **options)

    out["q,k,v projection + norm + rope (30 layers)"] = _median_ms(each(projection), repeat)
    out["o projection + residual (30)"] = _median_ms(each(linear(1, attn_out, residual=x)), repeat)
    norm = layers[0].post_attention_layernorm.weight
    out["gate,up projection + norm (30)"] = _median_ms(each(linear(2, x, norm=norm, eps=1e-5)), repeat)
    out["down projection + swiglu + residual (30)"] = _median_ms(
        each(linear(3, gate_up, swiglu=True, residual=x)), repeat
    )
    head = model.lm_head if hasattr(model, "lm_head") else model.model.embed_tokens.as_linear
    out["output projection (vocab x hidden)"] = _median_ms(lambda: mx.eval(head(x)), repeat)
    tokens = mx.zeros((rows, 1), dtype=mx.uint32)
    out["embedding lookup"] = _median_ms(lambda: mx.eval(model.model.embed_tokens(tokens)), repeat)
    cache = make_prompt_cache(model)
    for layer_cache in cache:
        layer_cache.update_and_fetch(
            mx.zeros((rows, kv_heads, context, dim)), mx.zeros((rows, kv_heads, context, dim))
        )
    mx.eval([c.state for c in cache])
    queries = mx.random.normal((rows, kv_heads, heads // kv_heads, dim))
    mx.eval(queries)
    out["attention (30 layers)"] = _median_ms(
        lambda: mx.eval([decode._attend(queries, c) for c in cache]), repeat
    )
    out["final rms norm"] = _median_ms(lambda: mx.eval(model.model.norm(x)), repeat)
    logits = mx.random.normal((rows, args.vocab_size))
    mx.eval(logits)
    out["argmax"] = _median_ms(lambda: mx.eval(mx.argmax(logits, axis=-1)), repeat)
    kk = mx.random.normal((rows, kv_heads, 1, dim))
    mx.eval(kk)

    def updates() -> None:
        for layer_cache in cache:
            layer_cache.update_and_fetch(kk, kk)
        mx.eval([c.state for c in cache])

    out["kv cache update (30)"] = _median_ms(updates, repeat)
    return out


def _step(model: Any, rows: int, context: int, repeat: int) -> dict[str, float]:
    import mlx.core as mx
    from mlx_lm.models.cache import BatchKVCache, make_prompt_cache

    caches = []
    for row in range(rows):
        cache = make_prompt_cache(model)
        model(mx.array([[(7 * row + i) % 1000 + 10 for i in range(context)]]), cache=cache)
        mx.eval([c.state for c in cache])
        caches.append(cache)
    merged = [BatchKVCache.merge([c[i] for c in caches]) for i in range(len(caches[0]))]
    inputs = mx.array([[11]] * rows, dtype=mx.uint32)
    build: list[float] = []
    whole: list[float] = []
    for _ in range(repeat + 1):
        began = time.perf_counter()
        logits = model(inputs, cache=merged)[:, -1, :]
        tokens = mx.argmax(logits, axis=-1)
        built = time.perf_counter()
        mx.eval(tokens)
        tokens.tolist()
        done = time.perf_counter()
        build.append(built - began)
        whole.append(done - began)
    return {
        "whole step": round(statistics.median(whole[1:]) * 1000, 3),
        "graph building (Python)": round(statistics.median(build[1:]) * 1000, 3),
    }


def _per_token(loaded: Any, repeat: int) -> dict[str, float]:
    from reference_server.engine.base import Grammar

    tokenizer = loaded.tokenizer
    text = json.dumps({"title": "Steps", "steps": ["tokenize the prompt", "embed", "attend"] * 4})
    tokens = tokenizer.encode(text)
    out: dict[str, float] = {}
    if loaded.grammars is not None:
        schema = {
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "steps": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["title", "steps"],
        }
        constraint = loaded.grammars.compile(Grammar(f"start: %json {json.dumps(schema)}"))
        began = time.perf_counter()
        for token in tokens:
            constraint.allowed(tokenizer.vocab_size)
            constraint.consume(token)
        per_token = (time.perf_counter() - began) * 1000 / len(tokens)
        out["llguidance mask + advance (per token)"] = round(per_token, 3)
    decoder = tokenizer.stream_decoder()
    began = time.perf_counter()
    for token in tokens:
        decoder.push(token)
    out["detokenize (per token)"] = round((time.perf_counter() - began) * 1000 / len(tokens), 4)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--precision", default=None, help="engine precision (default: the engine's)")
    parser.add_argument("--rows", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8])
    parser.add_argument("--context", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--original", action="store_true", help="mlx-lm's llama blocks (not decode.py's)")
    args = parser.parse_args()
    from reference_server.engine.blas import enable_fast_blas

    blas = enable_fast_blas("auto")
    from reference_server.engine import decode
    from reference_server.engine.loading import load_model as _load
    from reference_server.engine.sources import resolve_model

    if args.original:  # mlx-lm's own llama blocks, as before engine/decode.py
        decode.install_fast_decode = lambda model: False  # type: ignore[assignment]
    load_args: dict[str, Any] = {} if args.precision is None else {"precision": args.precision}
    loaded = _load(resolve_model(args.model), blas, 0, None, **load_args)
    fast = type(loaded.model.model).__name__ == "FastLlamaModel"
    report: dict[str, Any] = {
        "model": args.model,
        "precision": args.precision or "default",
        "blocks": "rebuilt (decode.py)" if fast else "mlx-lm's",
        "blas": blas,
        "load_average_before": os.getloadavg(),
        "context": args.context,
    }
    for rows in args.rows:
        figures = _step(loaded.model, rows, args.context, args.repeat)
        parts = _fast_parts if fast else _parts
        figures.update(parts(loaded.model, rows, args.context, args.repeat))
        report[f"rows={rows}"] = figures
    report["per token"] = _per_token(loaded, args.repeat)
    report["load_average_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
