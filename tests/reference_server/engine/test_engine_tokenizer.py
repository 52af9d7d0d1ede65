"""SmolLM2's tokenizer rebuilt from GGUF metadata, its chat template, and streaming decode."""

from __future__ import annotations

from typing import Any

import pytest

from reference_server.engine.base import Turn
from reference_server.engine.tokenizer import StreamDecoder

DEFAULT_SYSTEM = (
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
)


def test_round_trip(smollm2_tokenizer: Any) -> None:
    text = "Hello, world! 12345 naïve café — 日本語 🎉\n\tindented  spaces"
    ids = smollm2_tokenizer.encode(text)
    assert smollm2_tokenizer.decode(ids) == text
    # SmolLM2's pre-tokenizer splits digits one by one.
    assert len(smollm2_tokenizer.encode("12345")) == 5


def test_known_tokens(smollm2_tokenizer: Any) -> None:
    assert smollm2_tokenizer.encode("Hello world") == [19556, 905]
    # Special-token text in the rendered template becomes one id each, never pieces.
    assert smollm2_tokenizer.encode("<|im_start|>user\n") == [1, 4093, 198]
    assert smollm2_tokenizer.encode("<|im_end|>") == [2]
    assert smollm2_tokenizer.eos_token_ids >= {0, 2}


def test_template_inserts_default_system_prompt(smollm2_tokenizer: Any) -> None:
    text = smollm2_tokenizer.render([Turn("user", "Hi")])
    assert text == DEFAULT_SYSTEM + "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"


def test_template_uses_given_system_prompt(smollm2_tokenizer: Any) -> None:
    turns = [Turn("system", "Be brief."), Turn("user", "Hi")]
    assert smollm2_tokenizer.render(turns) == (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
    )


def test_system_turn_mid_conversation(smollm2_tokenizer: Any) -> None:
    turns = [Turn("user", "Hi"), Turn("assistant", "Hello."), Turn("system", "Now in French.")]
    text = smollm2_tokenizer.render(turns)
    assert text.endswith(
        "<|im_start|>assistant\nHello.<|im_end|>\n<|im_start|>system\nNow in French.<|im_end|>\n"
        "<|im_start|>assistant\n"
    )


@pytest.mark.parametrize("prefill", ["The answer is", "", "  spaced ", '{\n  "a":'])
def test_prefill_ends_exactly_at_its_text(smollm2_tokenizer: Any, prefill: str) -> None:
    turns = [Turn("user", "Question?"), Turn("assistant", prefill)]
    text = smollm2_tokenizer.render(turns)
    assert text == (
        DEFAULT_SYSTEM + "<|im_start|>user\nQuestion?<|im_end|>\n<|im_start|>assistant\n" + prefill
    )


def test_encode_turns_is_render_then_encode(smollm2_tokenizer: Any) -> None:
    turns = [Turn("user", "What is 2+2?"), Turn("assistant", "It is")]
    ids = smollm2_tokenizer.encode_turns(turns)
    assert ids == smollm2_tokenizer.encode(smollm2_tokenizer.render(turns))
    assert smollm2_tokenizer.decode(ids).endswith("<|im_start|>assistant\nIt is")


def test_streaming_decode_never_splits_a_character(smollm2_tokenizer: Any) -> None:
    text = "Emoji 🎉🚀, accents éàü, CJK 日本語, math ∑∫ and 👩‍👩‍👧 family."
    ids = smollm2_tokenizer.encode(text)
    decoder = smollm2_tokenizer.stream_decoder()
    pieces = [decoder.push(token) for token in ids]
    pieces.append(decoder.flush())
    assert "".join(pieces) == text
    assert all("\ufffd" not in piece for piece in pieces)
    # Some characters span several tokens: those pushes had to hold their bytes back.
    assert "" in pieces[:-1]


def test_stream_decoder_holds_incomplete_utf8() -> None:
    # A toy tokenizer whose tokens are raw byte strings, decoded lossily like byte-level BPE.
    vocab = {0: b"a", 1: "é".encode()[:1], 2: "é".encode()[1:], 3: b"b", 4: b"\xff"}

    def decode(ids: Any) -> str:
        return b"".join(vocab[i] for i in ids).decode("utf-8", errors="replace")

    decoder = StreamDecoder(decode)
    assert [decoder.push(t) for t in [0, 1, 2, 3]] == ["a", "", "é", "b"]
    # Bytes that never complete are released (as U+FFFD) once later text arrives, or at flush.
    assert decoder.push(4) == ""
    assert decoder.flush() == "\ufffd"
    assert decoder.push(1) == ""
    assert decoder.push(0) == "\ufffda"


def test_template_refusals_are_value_errors() -> None:
    from tokenizers import Tokenizer, models

    from reference_server.engine.tokenizer import ChatTokenizer, TokenizerError

    strict = (
        "{% for m in messages %}{% if m['role'] == 'system' and not loop.first %}"
        "{{ raise_exception('System turns must come first') }}{% endif %}{{ m['content'] }}{% endfor %}"
    )
    tokenizer = ChatTokenizer(
        Tokenizer(models.BPE()), chat_template=strict, bos_token=None, eos_token=None, eos_token_ids=[]
    )
    assert tokenizer.render([Turn("system", "a"), Turn("user", "b")]) == "ab"
    with pytest.raises(TokenizerError, match="System turns must come first"):
        tokenizer.render([Turn("user", "b"), Turn("system", "a")])
