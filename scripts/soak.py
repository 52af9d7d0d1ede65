"""Soak: many concurrent streaming clients against the reference server on loopback.

    nox -s soak                                   # 64 clients, 256 requests, SmolLM2
    nox -s soak -- --model tiny-random --requests 64

The server runs in this process (uvicorn on a real socket) so that its engine can be watched.
Every client streams `/v1/messages` at temperature 0 with one of a few prompts; a quarter of
the requests hang up after their first text delta (their max_tokens is large, so a generation
that is not freed would keep running). Pass, all of:
- no 5xx and no `error` event for a client that stayed;
- every completed answer equals that prompt's solo answer (run alone before the load);
- within 1 s of the last client leaving, the engine holds no generation;
- resident memory after the run within 10 % of memory after a warm-up round.
Prints a JSON report; exit status 1 when any check fails.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROMPTS = [
    "Tell me about the sea.",
    "Write a short poem about autumn leaves.",
    "What is a transformer model?",
    "Give me three tips for learning to cook.",
    "Explain what a key-value cache is.",
    "Why is the sky blue?",
]
VERSION = {"anthropic-version": "2023-06-01"}


@dataclass
class SoakReport:
    model: str
    clients: int
    requests: int
    completed: int = 0
    abandoned: int = 0
    server_errors: list[str] = field(default_factory=list)
    error_events: list[str] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    drained_in_s: float | None = None
    rss_after_warmup_mb: float = 0.0
    rss_after_run_mb: float = 0.0
    seconds: float = 0.0

    @property
    def memory_growth(self) -> float:
        return self.rss_after_run_mb / self.rss_after_warmup_mb - 1 if self.rss_after_warmup_mb else 0.0

    @property
    def passed(self) -> bool:
        return (
            not self.server_errors
            and not self.error_events
            and not self.mismatches
            and self.drained_in_s is not None
            and self.drained_in_s <= 1.0
            and self.memory_growth <= 0.10
        )

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "memory_growth": round(self.memory_growth, 4), "passed": self.passed}


def rss_mb() -> float:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


async def stream_once(
    http: Any, prompt: str, max_tokens: int, *, hang_up: bool
) -> tuple[int, str, list[str]]:
    """(status, text, error events) of one streamed request; hangs up after the first text."""
    body = {
        "model": "served",
        "max_tokens": max_tokens,
        "temperature": 0,
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }
    text: list[str] = []
    errors: list[str] = []
    async with http.stream("POST", "/v1/messages", json=body) as response:
        if response.status_code != 200:
            await response.aread()
            return response.status_code, response.text, errors
        event = ""
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                event = line[7:]
            elif line.startswith("data: ") and event == "error":
                errors.append(line[6:])
            elif line.startswith("data: ") and event == "content_block_delta":
                text.append(json.loads(line[6:])["delta"].get("text", ""))
                if hang_up:
                    break  # leaving the block closes the connection mid-stream
    return 200, "".join(text), errors


# How often a long run says where it is (on stderr; the report stays alone on stdout).
PROGRESS_EVERY_S = 10.0


def say(line: str) -> None:
    print(f"soak: {line}", file=sys.stderr, flush=True)


async def progress(phase: str, count: int, report: SoakReport) -> None:
    began = time.perf_counter()
    while True:
        await asyncio.sleep(PROGRESS_EVERY_S)
        done = report.completed + report.abandoned + len(report.server_errors)
        say(
            f"{phase}: {done}/{count} done in {time.perf_counter() - began:.0f} s "
            f"({report.completed} completed, {report.abandoned} hung up, "
            f"{len(report.server_errors)} errors), RSS {rss_mb():.0f} MB"
        )


async def soak(
    model: str, *, clients: int, requests: int, max_tokens: int, hang_up_share: float = 0.25, seed: int = 0
) -> SoakReport:
    import httpx
    import uvicorn

    from reference_server import Settings, create_app
    from reference_server.catalog import Alias
    from reference_server.engine import load_engine

    engine = await asyncio.to_thread(load_engine, model)
    served = engine.models()[0].id
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    # A data directory of its own: batches another server left pending in a shared one would
    # run here too, and their work would be counted as the soak's (and still run at exit).
    data = tempfile.TemporaryDirectory(prefix="plumbline-soak-")
    settings = Settings(
        model=served, port=port, aliases=(Alias.parse(f"served={served}"),), data_dir=Path(data.name)
    )
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings, engine=engine), port=port, log_level="warning")
    )
    serving = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.05)
    report = SoakReport(model=served, clients=clients, requests=requests)
    limits = httpx.Limits(max_connections=clients * 2, max_keepalive_connections=clients)
    try:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port}", headers=VERSION, timeout=600, limits=limits
        ) as http:
            say(f"solo answers of {len(PROMPTS)} prompts")
            solo = {p: (await stream_once(http, p, max_tokens, hang_up=False))[1] for p in PROMPTS}
            plan = random.Random(seed)
            # A hung-up generation would run this long if it were not freed.
            endless = engine.models()[0].context_window // 2

            async def load(count: int, into: SoakReport, phase: str) -> None:
                say(f"{phase}: {count} requests from {clients} clients")
                queue: asyncio.Queue[tuple[str, bool]] = asyncio.Queue()
                for _ in range(count):
                    queue.put_nowait((plan.choice(PROMPTS), plan.random() < hang_up_share))

                async def client() -> None:
                    while not queue.empty():
                        prompt, hang_up = queue.get_nowait()
                        tokens = endless if hang_up else max_tokens
                        status, text, errors = await stream_once(http, prompt, tokens, hang_up=hang_up)
                        if status != 200:
                            into.server_errors.append(f"{status}: {text[:200]}")
                        elif hang_up:
                            into.abandoned += 1
                        else:
                            into.completed += 1
                            into.error_events.extend(errors)
                            if text != solo[prompt]:
                                into.mismatches.append(f"{prompt!r}: {text[:80]!r} != {solo[prompt][:80]!r}")

                ticker = asyncio.create_task(progress(phase, count, into))
                try:
                    await asyncio.gather(*(client() for _ in range(clients)))
                finally:
                    ticker.cancel()

            # Warm-up: one round at full concurrency, so buffers and pools reach their size.
            await load(clients, report, "warm-up")
            report.completed = report.abandoned = 0
            await asyncio.sleep(0.2)
            report.rss_after_warmup_mb = rss_mb()
            began = time.perf_counter()
            await load(requests, report, "load")
            report.seconds = round(time.perf_counter() - began, 2)
            left = time.perf_counter()
            while time.perf_counter() - left < 5:
                if engine.active_requests == 0:
                    report.drained_in_s = round(time.perf_counter() - left, 3)
                    break
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.2)  # the idle worker gives its buffers back
            report.rss_after_run_mb = rss_mb()
    finally:
        server.should_exit = True
        await serving
        await engine.aclose()
        data.cleanup()
    return report


def main() -> int:
    import logging

    logging.getLogger("httpx").setLevel(logging.WARNING)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--model", default="smollm2-135m-instruct")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    report = asyncio.run(
        soak(args.model, clients=args.clients, requests=args.requests, max_tokens=args.max_tokens)
    )
    print(json.dumps(report.as_json(), indent=2))
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
