"""Extended thinking: the request rules (rules.py), the reasoning phase of a generation
(phases.py), signatures (signatures.py) and thinking sent back in history (history.py)."""

from .history import HistoryThinking, kept_thinking
from .phases import ThinkingEnd, ThinkingSplitter, ThinkingText, shape_turns, thinking_grammar
from .rules import (
    DEFAULT_EFFORT,
    EFFORT_THINKING_TOKENS,
    INTERLEAVED_THINKING_BETA,
    ThinkingPlan,
    plan_thinking,
)
from .signatures import KEY_FILE, Sealed, ThinkingSigner

__all__ = [
    "DEFAULT_EFFORT",
    "EFFORT_THINKING_TOKENS",
    "INTERLEAVED_THINKING_BETA",
    "KEY_FILE",
    "HistoryThinking",
    "Sealed",
    "ThinkingEnd",
    "ThinkingPlan",
    "ThinkingSigner",
    "ThinkingSplitter",
    "ThinkingText",
    "kept_thinking",
    "plan_thinking",
    "shape_turns",
    "thinking_grammar",
]
