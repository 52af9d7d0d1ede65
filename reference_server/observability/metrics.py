"""The server's Prometheus metrics, on a registry of its own (one per app, so that several apps
in one process never share counters).

Requests are counted by route template (bounded cardinality: `/v1/files/{file_id}`, never
the id), status and workspace (the keys file's: bounded too; never the key). Tokens, time to
first token and decode rate are measured on every generation `MessagesService.start` admits,
whichever route or batch asked for it; queue depth, batch size and the prompt cache's size are
read from the engine at scrape time.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from reference_server.engine.base import EngineDelta, EngineLoad, Generation, PromptUsage

__all__ = ["CONTENT_TYPE", "MeteredGeneration", "ServingMetrics"]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
UNMATCHED = "unmatched"  # a 404 or 405 the router answered: no route template
_TTFT_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_RATE_BUCKETS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0)


class ServingMetrics:
    """Every metric of one server. `load` reads the engine's queue and cache (None: not shown)."""

    def __init__(self, load: Callable[[], EngineLoad] | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "plumbline_http_requests",
            "HTTP responses, by route template, method, status and workspace (never by key)",
            ["route", "method", "status", "workspace"],
            registry=r,
        )
        self.input_tokens = Counter(
            "plumbline_input_tokens",
            "Prompt tokens of admitted generations (cache reads included)",
            registry=r,
        )
        self.output_tokens = Counter("plumbline_output_tokens", "Tokens generated", registry=r)
        self.generations = Counter("plumbline_generations", "Generations admitted by the engine", registry=r)
        self.cache_hits = Counter(
            "plumbline_prompt_cache_hits", "Generations whose prompt read a cached prefix", registry=r
        )
        self.cache_read_tokens = Counter(
            "plumbline_prompt_cache_read_tokens", "Prompt tokens read from the prompt cache", registry=r
        )
        self.ttft = Histogram(
            "plumbline_time_to_first_token_seconds",
            "From admission to the first generated text (queueing and prefill)",
            buckets=_TTFT_BUCKETS,
            registry=r,
        )
        self.decode_rate = Histogram(
            "plumbline_decode_tokens_per_second",
            "Tokens a second after the first, per generation of at least two tokens",
            buckets=_RATE_BUCKETS,
            registry=r,
        )
        if load is not None:
            gauges = (
                ("plumbline_queue_depth", "Generations waiting to start", "queued"),
                ("plumbline_batch_size", "Generations being decoded together", "running"),
                ("plumbline_prompt_cache_entries", "Prompt prefixes held in the cache", "cache_entries"),
                ("plumbline_prompt_cache_bytes", "Bytes of KV state the prompt cache holds", "cache_bytes"),
                (
                    "plumbline_speculative_drafted_tokens",
                    "Draft tokens speculative decoding verified since the engine started",
                    "drafted",
                ),
                (
                    "plumbline_speculative_kept_tokens",
                    "Draft tokens the model's own choice agreed with, kept, since the engine started",
                    "kept",
                ),
            )
            for name, documentation, attribute in gauges:
                Gauge(name, documentation, registry=r).set_function(_reader(load, attribute))

    def count_response(self, route: str | None, method: str, status: int, workspace: str) -> None:
        self.requests.labels(route or UNMATCHED, method, str(status), workspace).inc()

    def metered(self, generation: Generation) -> MeteredGeneration:
        """`generation`, measured as it is read."""
        usage = generation.usage
        self.generations.inc()
        self.input_tokens.inc(usage.tokens)
        if usage.cache_read:
            self.cache_hits.inc()
            self.cache_read_tokens.inc(usage.cache_read)
        return MeteredGeneration(generation, self)

    def render(self) -> bytes:
        return generate_latest(self.registry)


def _reader(load: Callable[[], EngineLoad], attribute: str) -> Callable[[], float]:
    return lambda: float(getattr(load(), attribute))


class MeteredGeneration:
    """A Generation that records its first-token time, its output tokens and its decode rate
    once, when its last delta is read or it is closed."""

    def __init__(
        self, inner: Generation, metrics: ServingMetrics, clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self._inner = inner
        self._metrics = metrics
        self._clock = clock
        self._started = clock()
        self._first: tuple[float, int] | None = None  # (when, output tokens by then)
        self._last: tuple[float, int] | None = None
        self._recorded = False

    @property
    def usage(self) -> PromptUsage:
        return self._inner.usage

    def __aiter__(self) -> AsyncIterator[EngineDelta]:
        return self._deltas()

    async def _deltas(self) -> AsyncIterator[EngineDelta]:
        async for delta in self._inner:
            now = self._clock()
            if self._first is None and delta.output_tokens > 0:
                self._first = (now, delta.output_tokens)
                self._metrics.ttft.observe(now - self._started)
            self._last = (now, delta.output_tokens)
            yield delta
            if delta.finish is not None:
                self._record()

    async def aclose(self) -> None:
        try:
            await self._inner.aclose()
        finally:
            self._record()

    def _record(self) -> None:
        if self._recorded:
            return
        self._recorded = True
        if self._last is None:
            return
        self._metrics.output_tokens.inc(self._last[1])
        if self._first is not None:
            (start, before), (end, after) = self._first, self._last
            if after - before >= 1 and end > start:
                self._metrics.decode_rate.observe((after - before) / (end - start))
