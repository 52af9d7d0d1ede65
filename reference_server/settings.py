"""Server settings: one frozen dataclass, filled from the CLI (and the environment for the
API key). The only module that reads the environment."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from reference_server.catalog import Alias
from reference_server.engine.mlx import DEFAULT_MAX_BATCH, DEFAULT_MAX_PENDING
from reference_server.engine.precision import PrecisionChoice
from reference_server.engine.prefix_cache import DEFAULT_BUDGET_BYTES, DEFAULT_MIN_TOKENS
from reference_server.model_behaviour import ModelBehaviour
from reference_server.observability.logs import LogFormat
from reference_server.server_tools.loop import DEFAULT_MAX_ITERATIONS

API_KEY_ENV = "PLUMBLINE_API_KEY"
DATA_DIR_ENV = "PLUMBLINE_DATA_DIR"
DEFAULT_MODEL = "smollm2-135m-instruct"
MAX_BODY_BYTES = 32 * 1024 * 1024  # the documented Messages / count_tokens limit
# Batch requests generated at once. Small, so that each decode step stays about as fast as an
# interactive request's alone; the engine keeps a row free for interactive requests anyway.
DEFAULT_BATCH_CONCURRENCY = 4

BlasChoice = Literal["auto", "openblas", "bundled"]


@dataclass(frozen=True, slots=True)
class Settings:
    model: str = DEFAULT_MODEL
    host: str = "127.0.0.1"
    port: int = 8000
    api_key: str | None = None
    keys_file: Path | None = None  # TOML: several keys, each in a workspace (workspaces/keys.py)
    aliases: tuple[Alias, ...] = field(default_factory=tuple)
    ping_interval: float = 5.0
    blas: BlasChoice = "auto"
    # The weights served (engine/precision.py): auto is q4 on the CPU kernel when it builds.
    precision: PrecisionChoice = "auto"
    # Seeds tiny-random's weights and every sampled generation's random key (engine/sampler.py).
    seed: int = 0
    # What the served model accepts (model_behaviour.py): `newest` takes only default sampling
    # values and no assistant prefill, as the newest Claude models.
    model_behaviour: ModelBehaviour = "classic"
    context_window: int | None = None  # tiny-random's window; a cap for other models
    max_body_bytes: int = MAX_BODY_BYTES
    log_level: str = "info"
    log_format: LogFormat = "text"
    # Batching, admission and the prompt cache (engine/mlx.py ServingLimits; docs/server/serving.md).
    max_batch: int = DEFAULT_MAX_BATCH
    max_pending: int = DEFAULT_MAX_PENDING
    cache_budget_mb: int = DEFAULT_BUDGET_BYTES >> 20
    cache_min_tokens: int = DEFAULT_MIN_TOKENS
    # Prompt-lookup speculative decoding of a lone stream (engine/speculative.py).
    speculative: bool = True
    # Where state that must survive a restart lives (the thinking signing key, message batches);
    # None: the environment's PLUMBLINE_DATA_DIR, else the user's data directory.
    data_dir: Path | None = None
    # Message Batch requests generated at once, at background priority (batches/processor.py).
    batch_concurrency: int = DEFAULT_BATCH_CONCURRENCY
    # Server tools (server_tools/): may web fetch reach loopback, private and link-local
    # addresses (off: only public ones); generations in one turn before `pause_turn`.
    allow_private_fetch: bool = False
    allow_private_mcp: bool = False  # may the MCP connector reach such addresses
    server_tool_iterations: int = DEFAULT_MAX_ITERATIONS
    # Web search's provider: a local index over this directory's documents (None: not served).
    web_search_index: Path | None = None
    # Code execution in this host's sandbox (sandbox/, code_execution/): off unless asked for;
    # asked for on a host without a sandbox, the tool is refused with the reason.
    code_execution: bool = False
    # Hosts code execution may reach through the egress proxy (sandbox/egress.py); none: no network.
    code_execution_hosts: tuple[str, ...] = ()
    container_idle_s: float = 3600.0  # a container expires this long after its last use
    # The Files API's largest upload (the API's 500 MB).
    max_file_bytes: int = 500 * 1024 * 1024
    # Rate limits of POST /v1/messages per minute (ratelimits/; None: not limited).
    rate_limit_rpm: int | None = None
    rate_limit_itpm: int | None = None
    rate_limit_otpm: int | None = None

    def resolved_data_dir(self) -> Path:
        """The data directory this server uses."""
        if self.data_dir is not None:
            return self.data_dir
        if from_env := os.environ.get(DATA_DIR_ENV):
            return Path(from_env)
        import platformdirs

        return Path(platformdirs.user_data_dir("plumbline", appauthor=False))

    @staticmethod
    def api_key_from_env() -> str | None:
        return os.environ.get(API_KEY_ENV) or None
