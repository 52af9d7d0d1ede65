"""Grammar constraints with llguidance: the only module that imports it. No MLX here.

A `Grammar` (llguidance's Lark syntax, JSON Schemas embedded with `%json {...}`) becomes, per
generation, a `Constraint`: the set of tokens allowed next, as a boolean NumPy mask the worker
applies to the logits, and the matcher state advanced with each sampled token.

- `check_grammar(grammar)`: cheap validation without a model (about a millisecond); raises
  `GrammarError` with llguidance's message. Serving can call it while validating a request.
- `GrammarCompiler(tokenizer)`: the model's llguidance tokenizer, built once per loaded model
  (0.2 s for SmolLM2's 49k tokens, more for larger vocabularies); thread-safe.
  `compile(grammar)` gives a fresh `Constraint` or raises `GrammarError`.

llguidance and NumPy are imported lazily: importing the engine package loads neither.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from .errors import ConstraintError, GrammarError
from .toolformat import TAGS

if TYPE_CHECKING:
    from collections.abc import Iterable

    import numpy as np
    from numpy.typing import NDArray

    from .base import Grammar
    from .tokenizer import ChatTokenizer

__all__ = ["Constraint", "GrammarCompiler", "check_grammar"]

_log = logging.getLogger(__name__)


def check_grammar(grammar: Grammar) -> None:
    """Raise `GrammarError` if `grammar` is not a valid llguidance grammar.

    Without a tokenizer, references to special tokens (`<|im_end|>`, `<[2]>`) are not checked;
    `GrammarCompiler.check` and `compile` check those against the model's vocabulary too.
    """
    _validate(grammar, None)


def _validate(grammar: Grammar, tokenizer: Any) -> str:
    import llguidance

    compiled = llguidance.LLMatcher.grammar_from_lark(grammar.lark)
    is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(compiled, tokenizer)
    if is_error:
        raise GrammarError(_clean(messages[0] if messages else "invalid grammar"))
    return compiled


def _clean(message: str) -> str:
    return f"invalid grammar: {message.strip()}"


class GrammarCompiler:
    """Compiles grammars against one model's vocabulary. Create once per loaded model."""

    def __init__(self, tokenizer: ChatTokenizer) -> None:
        """Build llguidance's tokenizer from `tokenizer` (costly: seconds for large vocabularies)."""
        import llguidance

        # llguidance reads the Hugging Face tokenizer JSON, whether it came from a
        # tokenizer.json file or was rebuilt from GGUF metadata.
        backend = tokenizer.backend
        self.vocab_size = tokenizer.vocab_size
        self._ids = {text: token for text in TAGS if (token := backend.token_to_id(text)) is not None}
        self._tokenizer = llguidance.LLTokenizer(
            backend.to_str(),
            n_vocab=self.vocab_size,
            # Every end-of-turn id: the mask allows them all once the grammar is complete.
            eos_token=sorted(tokenizer.eos_token_ids),
        )

    def special(self, texts: Iterable[str]) -> frozenset[str]:
        """Those of `texts` that the vocabulary holds as one special token (a grammar names
        them as `<tag>`; llguidance refuses such a token where a grammar spells text)."""
        found: set[str] = set()
        for text in texts:
            token = self._ids.get(text)
            if token is not None and self._tokenizer.is_special_token(token):
                found.add(text)
        return frozenset(found)

    def check(self, grammar: Grammar) -> None:
        """Raise `GrammarError` if `grammar` is invalid for this model (special tokens included)."""
        _validate(grammar, self._tokenizer)

    def compile(self, grammar: Grammar) -> Constraint:
        """A fresh `Constraint` for one generation; `GrammarError` if the grammar is invalid.

        Can take up to a second for very large grammars (llguidance releases the GIL): call it
        off the event loop and off the engine's worker thread.
        """
        import llguidance

        compiled = _validate(grammar, self._tokenizer)
        # log_level=0: errors are read back with get_error(), not printed to stderr.
        matcher = llguidance.LLMatcher(self._tokenizer, compiled, log_level=0)
        if matcher.is_error():
            raise GrammarError(_clean(matcher.get_error()))
        return Constraint(matcher, self.vocab_size)


class Constraint:
    """One generation's grammar state. Used by one thread at a time (the engine's worker).

    Per decode step: `allowed(width)` (the mask for the next token), then `consume(token)`
    with the sampled token; `done` once the grammar is complete and allows nothing but an
    end-of-turn token.
    """

    def __init__(self, matcher: Any, vocab_size: int) -> None:
        """Wrap an `llguidance.LLMatcher` over a vocabulary of `vocab_size` tokens."""
        import numpy as np

        self._matcher = matcher
        # llguidance writes one bit per token into 32-bit words; reused for every step.
        self._bits: NDArray[np.int32] = np.zeros((vocab_size + 31) // 32, dtype=np.int32)
        self._vocab_size = vocab_size

    @property
    def done(self) -> bool:
        """The grammar is complete and allows no more tokens (an end-of-turn token aside)."""
        return bool(self._matcher.is_stopped()) and not self._matcher.is_error()

    def allowed(self, width: int) -> NDArray[np.bool_]:
        """The tokens allowed next, as a boolean mask of `width` entries (the logits' width).

        Ids beyond the tokenizer's vocabulary (padding rows of some models) are never allowed.
        Raises `ConstraintError` if the matcher is in an error state or allows nothing.
        """
        self._raise_if_error()
        self._matcher.unsafe_compute_mask_ptr(self._bits.ctypes.data, self._bits.nbytes)
        self._raise_if_error()
        # Bit i of word w is token 32 * w + i: little-endian words, so little bit order.
        import numpy as np  # already loaded: a dictionary lookup

        mask = np.unpackbits(self._bits.view(np.uint8), count=min(width, self._vocab_size), bitorder="little")
        if width > mask.shape[0]:
            mask = np.concatenate([mask, np.zeros(width - mask.shape[0], dtype=np.uint8)])
        if not mask.any():
            raise ConstraintError("the grammar allows no token here")
        return mask.view(np.bool_)

    def draft_masks(self, draft: list[int], width: int) -> tuple[list[int], list[NDArray[np.bool_]]]:
        """The longest prefix of `draft` the grammar allows (ending before a token that would
        complete it), and the masks before each of its tokens and after the last (one more mask
        than tokens), leaving the state as it was."""
        masks = [self.allowed(width)]
        kept: list[int] = []
        for token in draft:
            if token >= width or not masks[-1][token] or not self._matcher.consume_token(token):
                break
            kept.append(token)
            if self._matcher.is_stopped():  # complete: nothing to draft past it
                kept.pop()
                self._matcher.rollback(1)
                break
            masks.append(self.allowed(width))
        if kept:
            self._matcher.rollback(len(kept))
        return kept, masks[: len(kept) + 1]

    def consume(self, token: int) -> None:
        """Advance past the sampled `token`; `ConstraintError` if the grammar rejects it."""
        if not self._matcher.consume_token(token):
            raise ConstraintError(f"the grammar rejected token {token}: {self._matcher.get_error()}")

    def _raise_if_error(self) -> None:
        if self._matcher.is_error():
            raise ConstraintError(f"grammar matcher failed: {self._matcher.get_error()}")
