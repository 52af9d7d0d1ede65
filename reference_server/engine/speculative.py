"""Speculative decoding by prompt lookup: drafts from the sequence's own tokens.

Agent traffic repeats itself: a tool call's arguments quote the prompt, an edit echoes a file,
JSON keys follow a schema. When the last few tokens of a sequence (prompt and output) occurred
before, the tokens that followed them then are a good guess for what follows now. The batching
scheduler (batching.py) verifies such a draft in one pass over the weights (decode.py's
`chain_logits`: every position computed exactly as its own decode step would compute it) and
keeps the longest prefix that the model's own choice agrees with, plus the model's token after
it: greedy output is the plain decode's token for token, and a sampled row draws each position
with the very subkey plain decoding would use (sampler.py), so its tokens are the same too.

No MLX here: a `Drafter` keeps one sequence's n-gram index and decides when drafting pays.
A verification that keeps nothing costs more than a plain step, so after a miss the drafter
rests for a while, longer after each miss in a row (free text turns it off by itself), and
the draft grows with what the last ones kept.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_DRAFT", "Drafter"]

# Longest draft: one verification computes MAX_DRAFT + 1 positions (the kernel takes up to 32
# rows a product; compute grows with the rows once the weights are read).
MAX_DRAFT = 8
# The n-gram lengths matched, longest first: a match of fewer tokens is mostly chance.
_NGRAMS = (4, 3)
# Tokens to wait after a draft kept nothing; doubled per miss in a row, up to _MAX_REST.
_FIRST_REST = 4
_MAX_REST = 64


class Drafter:
    """One sequence's prompt-lookup drafts: `extend` it with every token, ask `draft`, report
    each verification with `kept`."""

    def __init__(self, tokens: Iterable[int], *, max_draft: int = MAX_DRAFT) -> None:
        """Index `tokens` (the prompt, its last token included)."""
        self._tokens: list[int] = []
        # n-gram -> the position after its most recent occurrence, for occurrences that end
        # before the sequence's last token (the sequence's own suffix is never its match).
        self._index: dict[tuple[int, ...], int] = {}
        self._max_draft = max_draft
        # The next draft's length, grown and shrunk by `kept`: half the longest to begin with,
        # since a verified position that is not kept costs about half a decode step here.
        self._length = max(1, max_draft // 2)
        self._rest = 0  # tokens to wait before drafting again
        self._misses = 0  # drafts in a row that kept nothing
        self.extend(tokens)

    def extend(self, tokens: Iterable[int]) -> None:
        """Add the sequence's next tokens."""
        for token in tokens:
            # The n-grams ending at the previous last token become matchable now.
            end = len(self._tokens)
            for n in _NGRAMS:
                if end >= n:
                    self._index[tuple(self._tokens[end - n : end])] = end
            self._tokens.append(token)
            if self._rest:
                self._rest -= 1

    def match(self) -> int | None:
        """Where the continuation of the latest earlier occurrence of the sequence's suffix
        starts, or None when the suffix has not occurred before."""
        tokens = self._tokens
        for n in _NGRAMS:
            if len(tokens) > n:
                start = self._index.get(tuple(tokens[-n:]))
                if start is not None:
                    return start
        return None

    @property
    def resting(self) -> bool:
        """Drafting is off for now (recent drafts kept nothing)."""
        return self._rest > 0

    def draft(self, limit: int) -> list[int]:
        """Up to `limit` tokens guessed to follow the sequence; empty when there is no match or
        the drafter rests."""
        if self._rest or limit <= 0:
            return []
        start = self.match()
        if start is None:
            return []
        # What followed the earlier occurrence; where that runs into the suffix itself, the draft
        # goes on repeating (a loop of period len - start).
        tokens, end = self._tokens, len(self._tokens)
        draft: list[int] = []
        for i in range(min(limit, self._length)):
            draft.append(tokens[start + i] if start + i < end else draft[start + i - end])
        return draft

    def kept(self, drafted: int, accepted: int) -> None:
        """A verification of `drafted` tokens kept `accepted` of them."""
        if accepted == 0:
            self._misses += 1
            self._rest = min(_FIRST_REST << (self._misses - 1), _MAX_REST)
            self._length = 2
            return
        self._misses = 0
        # All kept: guess further next time; else no further than what held, and one more.
        self._length = min(self._max_draft, 2 * drafted if accepted == drafted else accepted + 1)
