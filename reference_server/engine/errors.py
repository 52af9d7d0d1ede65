"""Engine errors, importable without MLX, `tokenizers` or jinja2 installed.

All but `EngineClosedError` and `ConstraintError` are `ValueError`s, raised before the first
delta: the request cannot be served as given, which serving reports as a 400.
`ConstraintError` happens mid-generation and is the server's fault, not the client's.
"""

from __future__ import annotations

__all__ = [
    "ConstraintError",
    "EngineClosedError",
    "EngineOverloadedError",
    "GrammarError",
    "PromptTooLongError",
    "TokenizerError",
    "UnknownModelError",
]


class PromptTooLongError(ValueError):
    """The rendered prompt has more tokens than the model's context window."""

    def __init__(self, prompt_tokens: int, limit: int) -> None:
        """Record the prompt's token count and the model's limit."""
        super().__init__(f"prompt is too long: {prompt_tokens} tokens > {limit} maximum")
        self.prompt_tokens = prompt_tokens
        self.limit = limit


class UnknownModelError(ValueError):
    """The request names a model this engine does not serve."""


class TokenizerError(ValueError):
    """The tokenizer data is unsupported, or the chat template rejected the conversation."""


class EngineClosedError(RuntimeError):
    """The engine was closed (or its worker died) before or during the request."""


class GrammarError(ValueError):
    """The request's grammar is invalid, or uses an unsupported feature (a JSON Schema keyword
    llguidance does not implement, say). The message is llguidance's, with the position."""


class ConstraintError(RuntimeError):
    """Constrained decoding failed mid-generation (the grammar matcher entered an error state).

    Fails that one generation; a valid grammar should never cause it.
    """


class EngineOverloadedError(RuntimeError):
    """The engine's admission queue is full: try again after `retry_after` seconds (a 529)."""

    def __init__(self, pending: int, retry_after: int) -> None:
        """Record how many generations are admitted and when to retry."""
        super().__init__(f"the engine is at capacity ({pending} generations admitted)")
        self.pending = pending
        self.retry_after = retry_after
