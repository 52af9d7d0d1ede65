"""Thinking as the first phase of one generation: the grammar and the splitter."""

from __future__ import annotations

from reference_server.engine.base import Grammar, Turn
from reference_server.engine.constraint import check_grammar
from reference_server.thinking import ThinkingEnd, ThinkingSplitter, shape_turns, thinking_grammar
from reference_server.thinking.phases import THINKING_INSTRUCTION


def test_the_grammar_wraps_free_text_and_an_answer_grammar():
    check_grammar(thinking_grammar(None, 32))
    answer = Grammar('start: answer\nanswer: %json {"type": "object"}\n')
    wrapped = thinking_grammar(answer, 16)
    check_grammar(wrapped)
    assert "thinking[max_tokens=16]" in wrapped.lark
    assert "reply: answer" in wrapped.lark


def test_the_instruction_joins_the_system_prompt_or_becomes_it():
    assert shape_turns((Turn("user", "q"),))[0] == Turn("system", THINKING_INSTRUCTION)
    shaped = shape_turns((Turn("system", "Be brief."), Turn("user", "q")))
    assert shaped[0].text == f"Be brief.\n\n{THINKING_INSTRUCTION}"
    assert len(shaped) == 2


def test_the_first_blank_line_ends_the_thinking():
    splitter = ThinkingSplitter()
    fed = [splitter.feed(text, n) for n, text in enumerate(["Two", " plus two.\n", "\n\nFour", "."], start=1)]
    assert fed[0] == ("Two", None, "")
    assert fed[1] == (" plus two.", None, "")  # the newline is held back
    assert fed[2] == ("", ThinkingEnd("Two plus two.", 3), "Four")  # the answer's leading newline dropped
    assert fed[3] == ("", None, ".")
    assert splitter.flush(4) is None


def test_a_single_newline_stays_in_the_thinking():
    splitter = ThinkingSplitter()
    assert splitter.feed("a\n", 1) == ("a", None, "")
    assert splitter.feed("b", 2) == ("\nb", None, "")


def test_a_generation_cut_short_ends_its_thinking_at_the_end():
    splitter = ThinkingSplitter()
    splitter.feed("still thinking", 7)
    assert splitter.flush(7) == ThinkingEnd("still thinking", 7)
    assert splitter.ended
