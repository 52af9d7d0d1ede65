"""Tokenizer, chat template and UTF-8-safe streaming detokenizer; no MLX here.

A `ChatTokenizer` is built either from GGUF metadata (`tokenizer.ggml.*`: a byte-level BPE
rebuilt with the `tokenizers` library) or from a Hugging Face style model directory
(`tokenizer.json` + `tokenizer_config.json`). `encode_turns` is the single function that turns
a conversation into prompt tokens, used both to count and to generate, so the two always agree.
"""

from __future__ import annotations

import bisect
import json
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers

from .errors import TokenizerError
from .toolformat import plain_turns, template_messages, tool_function

if TYPE_CHECKING:
    from .base import CacheTTL, ToolSpec, Turn

__all__ = ["ChatTokenizer", "StreamDecoder", "TokenizerError"]

_log = logging.getLogger(__name__)

# GGUF token types (llama.cpp): 3 = control, 4 = user defined. Both are matched as whole
# tokens in text (so a template's "<|im_start|>" becomes one token) and are never merged.
_SPECIAL_TYPES = {3, 4}
# Tokens that end an assistant turn in common chat formats, beyond the metadata's EOS id.
_END_OF_TURN = ("<|im_end|>", "<|eot_id|>", "<|end|>", "<end_of_turn>", "<|endoftext|>")
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2_SPLIT = _LLAMA3_SPLIT.replace(r"\p{N}{1,3}", r"\p{N}")
# Used only when a model ships no template at all.
_CHATML = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + "
    "message['content'] + '<|im_end|>\\n' }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
# Stands in for a prefill while rendering, so the cut lands exactly where its text starts.
_PREFILL_MARK = "\x00plumbline-prefill\x00"


def _pre_tokenizer(pre: str) -> Any:
    """llama.cpp's `tokenizer.ggml.pre` name -> the equivalent `tokenizers` pre-tokenizer."""
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    if pre in {"smollm", "starcoder", "refact", "codeshell"}:
        # Single digits, then GPT-2's split (as these models' tokenizer.json files do).
        return pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        )
    if pre in {"llama-bpe", "llama3", "smaug-bpe"}:
        split = pre_tokenizers.Split(Regex(_LLAMA3_SPLIT), behavior="isolated")
        return pre_tokenizers.Sequence([split, byte_level])
    if pre in {"qwen2"}:
        split = pre_tokenizers.Split(Regex(_QWEN2_SPLIT), behavior="isolated")
        return pre_tokenizers.Sequence([split, byte_level])
    if pre not in {"default", "gpt2", "gpt-2"}:
        _log.warning("Unknown GGUF pre-tokenizer %r; using GPT-2's split", pre)
    return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


def _raise_exception(message: str) -> None:
    # Chat templates call raise_exception() to reject conversations they cannot render.
    raise jinja2.TemplateError(message)


def _strftime_now(fmt: str) -> str:
    return datetime.now(UTC).strftime(fmt)


class ChatTokenizer:
    """Encodes conversations with the model's chat template; decodes generated tokens."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        *,
        chat_template: str | None,
        bos_token: str | None,
        eos_token: str | None,
        eos_token_ids: Iterable[int],
        add_bos: bool = False,
        parts_content: bool = False,
    ) -> None:
        """Wrap a `tokenizers.Tokenizer`; prefer the `from_gguf`/`from_directory` builders.

        `parts_content`: the template takes each message's content as a list of parts
        (`{"type": "text"|"image"}`), as vision models' templates do; images are then rendered
        as the template's image placeholder, which the vision processor expands.
        """
        self._tokenizer = tokenizer
        self.parts_content = parts_content
        if chat_template is None:
            _log.warning("The model has no chat template; using ChatML")
        env = ImmutableSandboxedEnvironment(
            trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
        )
        env.filters["tojson"] = lambda value, indent=None: json.dumps(
            value, ensure_ascii=False, indent=indent
        )
        env.globals["raise_exception"] = _raise_exception
        env.globals["strftime_now"] = _strftime_now
        self._template = env.from_string(chat_template or _CHATML)
        # Hugging Face templates that take tools read a `tools` variable; others ignore it, and
        # get tools and tool turns in the built-in format (toolformat.plain_turns).
        self.takes_tools = chat_template is not None and "tools" in chat_template
        self._bos_token = bos_token
        self._eos_token = eos_token
        self._bos_id = tokenizer.token_to_id(bos_token) if bos_token else None
        self._add_bos = add_bos and self._bos_id is not None
        ids = set(eos_token_ids)
        for text in (eos_token, *_END_OF_TURN):
            if text is None:
                continue
            if (token_id := tokenizer.token_to_id(text)) is not None:
                ids.add(token_id)
        self.eos_token_ids: frozenset[int] = frozenset(ids)

    @classmethod
    def from_gguf(cls, meta: dict[str, Any]) -> ChatTokenizer:
        """Rebuild the tokenizer stored in GGUF metadata (byte-level BPE models only)."""
        kind = meta.get("tokenizer.ggml.model")
        if kind != "gpt2":
            raise TokenizerError(
                f"GGUF tokenizer model {kind!r} is not supported (only byte-level BPE, 'gpt2'); "
                "convert the model to an mlx-lm directory instead"
            )
        tokens: list[str] = meta["tokenizer.ggml.tokens"]
        merges = [tuple(m.split(" ", 1)) for m in meta["tokenizer.ggml.merges"]]
        vocab = {token: index for index, token in enumerate(tokens)}
        tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False))
        tokenizer.pre_tokenizer = _pre_tokenizer(str(meta.get("tokenizer.ggml.pre", "default")))
        tokenizer.decoder = decoders.ByteLevel()
        types: list[int] = meta.get("tokenizer.ggml.token_type", [])
        tokenizer.add_special_tokens(
            [
                AddedToken(tokens[i], special=True, normalized=False)
                for i, kind_ in enumerate(types)
                if kind_ in _SPECIAL_TYPES
            ]
        )

        def token(key: str) -> str | None:
            index = meta.get(f"tokenizer.ggml.{key}_token_id")
            return tokens[int(index)] if index is not None and int(index) < len(tokens) else None

        eos = meta.get("tokenizer.ggml.eos_token_id")
        return cls(
            tokenizer,
            chat_template=meta.get("tokenizer.chat_template"),
            bos_token=token("bos"),
            eos_token=token("eos"),
            eos_token_ids=[int(eos)] if eos is not None else [],
            add_bos=bool(meta.get("tokenizer.ggml.add_bos_token", False)),
        )

    @classmethod
    def from_directory(cls, path: Path, *, parts_content: bool = False) -> ChatTokenizer:
        """Load `tokenizer.json` and the chat template of a Hugging Face / mlx-lm directory
        (`parts_content`: see the constructor)."""
        if not (path / "tokenizer.json").is_file():
            raise TokenizerError(f"{path} has no tokenizer.json")
        tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        config = _read_json(path / "tokenizer_config.json")
        template = config.get("chat_template")
        if (path / "chat_template.jinja").is_file():
            template = (path / "chat_template.jinja").read_text(encoding="utf-8")
        elif (path / "chat_template.json").is_file():
            template = _read_json(path / "chat_template.json").get("chat_template")
        if isinstance(template, list):  # named templates: take the default one
            named = {t.get("name"): t.get("template") for t in template}
            template = named.get("default")
        eos_ids: list[int] = []
        for source in (
            _read_json(path / "generation_config.json"),
            _read_json(path / "config.json"),
        ):
            value = source.get("eos_token_id")
            eos_ids.extend(value if isinstance(value, list) else [] if value is None else [value])
        return cls(
            tokenizer,
            chat_template=template if isinstance(template, str) else None,
            bos_token=_token_text(config.get("bos_token")),
            eos_token=_token_text(config.get("eos_token")),
            eos_token_ids=[int(i) for i in eos_ids],
            add_bos=False,  # HF templates write the BOS text themselves
            parts_content=parts_content,
        )

    @property
    def backend(self) -> Tokenizer:
        """The wrapped `tokenizers.Tokenizer` (llguidance builds its own view of it)."""
        return self._tokenizer

    @property
    def vocab_size(self) -> int:
        """Number of token ids, special tokens included."""
        return int(self._tokenizer.get_vocab_size(with_added_tokens=True))

    def render(self, turns: Sequence[Turn], tools: Sequence[ToolSpec] = ()) -> str:
        """The prompt text for `turns`, offering `tools`.

        Ends with the template's generation prompt when the last turn is user, system or tool;
        when it is an assistant turn (a prefill) it ends exactly at the end of that turn's text.
        """
        structured = self.takes_tools and (tools or any(t.role == "tool" or t.tool_calls for t in turns))
        if not structured and (tools or any(t.role == "tool" or t.tool_calls for t in turns)):
            turns = plain_turns(turns, tools)
        last = turns[-1] if turns else None
        prefill = last.text if last is not None and last.role == "assistant" and not last.tool_calls else None
        messages = template_messages(turns)
        if prefill is not None:
            messages[-1]["content"] = _PREFILL_MARK
        if any(turn.images for turn in turns) and not self.parts_content:
            raise TokenizerError("this model does not read images (it has no vision tower)")
        if self.parts_content:
            for message, turn in zip(messages, turns, strict=True):
                # Images first, then the text: the order the API recommends for one message.
                parts: list[dict[str, Any]] = [{"type": "image"} for _ in turn.images]
                message["content"] = [*parts, {"type": "text", "text": message["content"]}]
        extra: dict[str, Any] = {"tools": [tool_function(t) for t in tools]} if structured and tools else {}
        try:
            text = self._template.render(
                messages=messages,
                add_generation_prompt=prefill is None,
                bos_token=self._bos_token or "",
                eos_token=self._eos_token or "",
                **extra,
            )
        except jinja2.TemplateError as exc:
            # e.g. templates that only allow a system turn first: a bad request, not a crash.
            raise TokenizerError(f"the chat template rejected this conversation: {exc}") from exc
        if prefill is None:
            return text
        cut = text.rfind(_PREFILL_MARK)
        if cut < 0:
            raise TokenizerError("the chat template dropped the final assistant turn")
        return text[:cut] + prefill

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; special-token text such as `<|im_start|>` maps to its id."""
        ids: list[int] = self._tokenizer.encode(text, add_special_tokens=False).ids
        if self._add_bos and (not ids or ids[0] != self._bos_id) and self._bos_id is not None:
            ids.insert(0, self._bos_id)
        return ids

    def encode_turns(self, turns: Sequence[Turn], tools: Sequence[ToolSpec] = ()) -> list[int]:
        """Prompt token ids of a conversation: what generation feeds the model."""
        return self.encode(self.render(turns, tools))

    def encode_marked(
        self, turns: Sequence[Turn], tools: Sequence[ToolSpec] = ()
    ) -> tuple[list[int], list[tuple[int, CacheTTL]]]:
        """`encode_turns`, and the token position of each of the turns' cache marks: how many
        prompt tokens lie wholly before the mark's place in the rendered text.

        The turns are rendered once more with a sentinel at each mark; a mark the template
        drops, duplicates or moves text around is left out (so is every mark, if the text
        without sentinels differs from the plain render), never misplaced.
        """
        clean = self.render(turns, tools)
        marks = [(i, mark) for i, turn in enumerate(turns) for mark in turn.cache_marks]
        encoding = self._tokenizer.encode(clean, add_special_tokens=False)
        ids = self.encode(clean)
        if not marks:
            return ids, []
        lead = len(ids) - len(encoding.ids)  # a BOS that `encode` inserted
        sentinels = [f"\x00plumbline-cache-{n}\x00" for n in range(len(marks))]
        marked = list(turns)
        for i, turn in enumerate(turns):
            text = turn.text
            for n, (owner, mark) in sorted(enumerate(marks), key=lambda m: -m[1][1].offset):
                if owner == i:
                    text = text[: mark.offset] + sentinels[n] + text[mark.offset :]
            marked[i] = replace(turn, text=text, cache_marks=())
        rendered = self.render(marked, tools)
        if any(rendered.count(sentinel) > 1 for sentinel in sentinels):
            return ids, []
        places = sorted((rendered.index(s), n) for n, s in enumerate(sentinels) if s in rendered)
        pieces: list[str] = []
        positions: list[tuple[int, int]] = []  # (place in the clean text, mark number)
        cursor = length = 0
        for place, n in places:
            pieces.append(rendered[cursor:place])
            length += place - cursor
            cursor = place + len(sentinels[n])
            positions.append((length, n))
        pieces.append(rendered[cursor:])
        if "".join(pieces) != clean:
            return ids, []
        ends = [end for _, end in encoding.offsets]
        points = [(lead + bisect.bisect_right(ends, char), marks[n][1].ttl) for char, n in positions]
        return ids, points

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; incomplete UTF-8 sequences come out as U+FFFD."""
        return str(self._tokenizer.decode(list(ids), skip_special_tokens=False))

    def stream_decoder(self) -> StreamDecoder:
        """A fresh incremental detokenizer for one generation."""
        return StreamDecoder(self.decode)


class StreamDecoder:
    """Turns tokens into text one at a time without ever splitting a character.

    Decodes a small window of recent tokens and releases new text only when it does not end
    in U+FFFD (an incomplete UTF-8 sequence); the window keeps the decoder's context, so
    leading-space handling matches a full decode.
    """

    def __init__(self, decode: Callable[[Sequence[int]], str]) -> None:
        """`decode` maps token ids to text (lossy on incomplete UTF-8)."""
        self._decode = decode
        self._tokens: list[int] = []
        self._prefix = 0  # window start: tokens before it are settled
        self._read = 0  # tokens before it have had their text released

    def push(self, token: int) -> str:
        """Add a token; return the newly completed text (maybe empty)."""
        self._tokens.append(token)
        done = self._decode(self._tokens[self._prefix : self._read])
        text = self._decode(self._tokens[self._prefix :])
        if len(text) > len(done) and not text.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self._tokens)
            return text[len(done) :]
        return ""

    def flush(self) -> str:
        """Release whatever is held back (incomplete bytes become U+FFFD)."""
        done = self._decode(self._tokens[self._prefix : self._read])
        text = self._decode(self._tokens[self._prefix :])
        self._prefix = self._read = len(self._tokens)
        return text[len(done) :]


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str | None:
    # tokenizer_config.json writes special tokens as strings or as AddedToken dicts.
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None
