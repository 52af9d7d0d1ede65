"""Thinking as the first phase of one generation: a prompt, a grammar, and a splitter.

Any instruct model can reason if asked to, but not in a format the server can rely on. So the
prompt asks for one paragraph of reasoning, then a blank line, then the answer, and a grammar
holds the model to it: a non-blank paragraph (no blank line inside, bounded by the thinking
budget through llguidance's `max_tokens`), the blank line, then what the answer may be (free
text, or the tools / output format grammar). The engine sees an ordinary request with a
constraint; `ThinkingSplitter` cuts the generated text back into thinking and answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from reference_server.engine.base import Grammar, Turn

__all__ = [
    "SEPARATOR",
    "THINKING_INSTRUCTION",
    "ThinkingEnd",
    "ThinkingSplitter",
    "ThinkingText",
    "shape_turns",
    "thinking_grammar",
]

THINKING_INSTRUCTION = (
    "Before you answer, reason about the request step by step in one short paragraph."
    " Then write a blank line, then your answer."
)
SEPARATOR = "\n\n"
# A paragraph: something visible, no blank line, not ending in whitespace (so the first blank
# line of the output is the separator).
_THINKING = r"THINKING: /(?s:\s*\S(.*\S)?)/ & ~/(?s:.*\n\n.*)/"
_FREE_ANSWER = "reply: /(?s:.*)/"


def shape_turns(turns: Sequence[Turn]) -> tuple[Turn, ...]:
    """`turns` with the thinking instruction at the end of the system prompt (or as one)."""
    if turns and turns[0].role == "system":
        first = turns[0]
        text = f"{first.text}{SEPARATOR}{THINKING_INSTRUCTION}" if first.text else THINKING_INSTRUCTION
        return (replace(first, text=text), *turns[1:])
    return (Turn("system", THINKING_INSTRUCTION), *turns)


def thinking_grammar(answer: Grammar | None, budget: int) -> Grammar:
    """Thinking of at most `budget` tokens, the separator, then `answer` (None: any text)."""
    if answer is None:
        rules = [_FREE_ANSWER]
    else:
        start, _, rest = answer.lark.partition("\n")
        if not start.startswith("start:"):
            raise ValueError("an answer grammar starts with its `start` rule")
        rules = ["reply:" + start[len("start:") :], rest.rstrip("\n")]
    head = [f"start: thinking {json.dumps(SEPARATOR)} reply", f"thinking[max_tokens={budget}]: THINKING"]
    return Grammar("\n".join([*head, _THINKING, *rules]) + "\n")


@dataclass(frozen=True, slots=True)
class ThinkingText:
    """New thinking text."""

    text: str


@dataclass(frozen=True, slots=True)
class ThinkingEnd:
    """The thinking is over: all of its text, and the output tokens it took (separator included)."""

    thinking: str
    tokens: int


class ThinkingSplitter:
    """Splits the generated text at the first blank line: thinking before, answer after.

    `feed` returns the new thinking text, a `ThinkingEnd` once the separator is read, and the new
    answer text (leading whitespace dropped). A trailing newline is held back until the next
    text shows whether it starts the separator.
    """

    def __init__(self) -> None:
        self._parts: list[str] = []
        self._held = ""
        self._end: ThinkingEnd | None = None
        self._answer_started = False

    @property
    def ended(self) -> bool:
        """True once the thinking is over."""
        return self._end is not None

    def feed(self, text: str, output_tokens: int) -> tuple[str, ThinkingEnd | None, str]:
        """(new thinking text, the end if it came now, new answer text)."""
        if self._end is not None:
            return "", None, self._answer(text)
        text = self._held + text
        self._held = ""
        cut = text.find(SEPARATOR)
        if cut < 0:
            if text.endswith("\n"):
                text, self._held = text[:-1], "\n"
            self._parts.append(text)
            return text, None, ""
        thinking = text[:cut]
        self._parts.append(thinking)
        self._end = ThinkingEnd("".join(self._parts), output_tokens)
        return thinking, self._end, self._answer(text[cut + len(SEPARATOR) :])

    def split(
        self, text: str, output_tokens: int, *, last: bool
    ) -> tuple[list[ThinkingText | ThinkingEnd], str]:
        """`feed` as pieces: (new thinking text, then the end if it came now, or because this is
        the `last` text of a generation that cut the thinking short; new answer text)."""
        thought, end, answer = self.feed(text, output_tokens)
        pieces: list[ThinkingText | ThinkingEnd] = [ThinkingText(thought)] if thought else []
        if last and end is None:
            end = self.flush(output_tokens)  # cut short by max_tokens
        if end is not None:
            pieces.append(end)
        return pieces, answer

    def flush(self, output_tokens: int) -> ThinkingEnd | None:
        """At the end of the generation: the end of a thinking the generation cut short."""
        if self._end is not None:
            return None
        self._end = ThinkingEnd("".join(self._parts), output_tokens)
        return self._end

    def _answer(self, text: str) -> str:
        if not self._answer_started:
            text = text.lstrip()
            self._answer_started = bool(text)
        return text
