"""Engines: neutral requests in, text deltas out (no HTTP, no Anthropic JSON).

Importing this package does not import `mlx.core`: `load_engine` first sets up the BLAS that
MLX's CPU backend will use, which must happen before MLX's library is loaded.
"""

from __future__ import annotations

from .base import (
    Engine,
    EngineDelta,
    EngineRequest,
    FinishReason,
    Grammar,
    ModelCard,
    Role,
    Sampling,
    ToolCall,
    ToolSpec,
    Turn,
)
from .blas import BlasMode, enable_fast_blas
from .constraint import check_grammar
from .errors import (
    ConstraintError,
    EngineClosedError,
    GrammarError,
    PromptTooLongError,
    TokenizerError,
    UnknownModelError,
)
from .mlx import MLXEngine, load_engine
from .sources import DEFAULT_MODEL, ModelNotFoundError

__all__ = [
    "DEFAULT_MODEL",
    "BlasMode",
    "ConstraintError",
    "Engine",
    "EngineClosedError",
    "EngineDelta",
    "EngineRequest",
    "FinishReason",
    "Grammar",
    "GrammarError",
    "MLXEngine",
    "ModelCard",
    "ModelNotFoundError",
    "PromptTooLongError",
    "Role",
    "Sampling",
    "TokenizerError",
    "ToolCall",
    "ToolSpec",
    "Turn",
    "UnknownModelError",
    "check_grammar",
    "enable_fast_blas",
    "load_engine",
]
