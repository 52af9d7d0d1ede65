"""What a request that uses an optional feature must show when the target serves it.

A feature is served when a request that uses it is answered as if it were used, whatever the
target declares (gateways declare nothing, and a declaration is not evidence):

- thinking: a `thinking` (or `redacted_thinking`) block. Adaptive thinking may skip thinking, so
  an adaptive answer without one is tried again with `enabled` thinking, which may not;
- documents and images: the answer's `usage` counts them: the same request without the block
  has clearly fewer input tokens (a gateway that drops them answers both alike);
- citations: a citation on the answer to a document with citations enabled that asks for a quote;
- context management (each edit apart): a `context_management` report in the answer;
- structured outputs: the answer's text is JSON valid against the schema;
- tool calls: a forced call answered with a `tool_use` block; `tool_choice` any, else the named
  tool, else auto, the first the target takes: that is the way the properties set their calls
  up. Tools themselves are taken where a way is taken, a call or not.

Each probe ends in one Support: served (with the evidence, or why none could be read), refused
(a 4xx: absent, in the target's own words), or failed: accepted and not used, or a 5xx or a
broken connection, which one property judges (features.JUDGES) while the feature's other
properties say they could not judge it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from conformance.generating.content import b64, image_block, png
from conformance.generating.thinking import adaptive_served, thinking_body
from conformance.generating.tooluse import FORCING_WAYS, TOOLS, tool_body, way_choice
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "CONTEXT_BETA",
    "EDITS",
    "Answer",
    "Send",
    "Support",
    "citations",
    "documents",
    "edit",
    "edit_body",
    "error_words",
    "images",
    "structured_outputs",
    "thinking",
    "tool_calls",
]


@dataclass(frozen=True, slots=True)
class Support:
    """Whether the target serves one optional feature, who said so, and why. `failed`: the probe
    showed it neither served nor refused (features.JUDGES names the property that judges that,
    on `evidence`: the probe's exchange). `way`: the set-up the probe saw served, which the
    properties use (`Target.ways`). `declared`: what the model's capabilities say, a hint."""

    feature: str
    supported: bool
    source: str  # "profile", "capabilities", "probe" or "undeclared"
    detail: str
    failed: bool = False
    evidence: dict[str, Any] | None = None
    way: str | None = None
    declared: bool | None = None

    @property
    def reason(self) -> str:
        """One line for an UNSUPPORTED or SKIP verdict, or the console."""
        state = "not judged" if self.failed else "served" if self.supported else "not served"
        return f"{self.feature} {state} ({self.source}: {self.detail})"

    def as_dict(self) -> dict[str, object]:
        """What index.json says (the evidence is the judging property's)."""
        found: dict[str, object] = {"supported": self.supported, "source": self.source, "detail": self.detail}
        if self.way is not None:
            found["way"] = self.way
        if self.declared is not None:
            found["declared"] = self.declared
        return {**found, "failed": True} if self.failed else found

    def as_context(self) -> dict[str, object]:
        """All of it, for the xdist workers."""
        return {**self.as_dict(), "failed": self.failed, "evidence": self.evidence}


# Statuses that say nothing of the feature: a key refused (AUTH-* judge keys), a target busy or
# limited (ERR-031 judges what it meets), a request that timed out at the target.
_NOT_ABOUT_IT = (401, 403, 408, 429, 529)


@dataclass(frozen=True, slots=True)
class Answer:
    """A probe's answer: its status (None: no answer), body, the transport failure, and its
    exchange as evidence."""

    status: int | None
    body: bytes
    failure: str | None = None
    evidence: dict[str, Any] | None = None

    @property
    def data(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    @property
    def refused(self) -> bool:
        """A 4xx about the request: the target does not take the feature."""
        return self.status is not None and 400 <= self.status < 500 and self.status not in _NOT_ABOUT_IT

    @property
    def unanswerable(self) -> bool:
        """Neither taken nor refused: no answer at all, or a 5xx (a 529 is a busy target)."""
        return self.failure is not None or (
            self.status is not None and self.status >= 500 and self.status != 529
        )

    @property
    def answered(self) -> bool:
        return self.status is not None and 200 <= self.status < 300

    def said(self, what: str) -> str:
        """`<what> got HTTP 400: invalid_request_error: words`, or how it failed."""
        if self.failure is not None:
            return f"{what} failed ({self.failure})"
        return f"{what} got HTTP {self.status}{error_words(self.body)}"

    def content(self) -> list[dict[str, Any]]:
        data = self.data
        content = data.get("content") if isinstance(data, dict) else None
        return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []

    def input_tokens(self) -> int | None:
        """All input tokens its usage reports (uncached + cache writes + cache reads), or None
        when the usage cannot be read."""
        data = self.data
        usage = data.get("usage") if isinstance(data, dict) else None
        if not isinstance(usage, dict):
            return None
        keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        counts = [_count(usage.get(key)) for key in keys]
        return None if counts[0] is None else sum(count or 0 for count in counts)


def _count(value: Any) -> int | None:
    """A token count, or None where it is not one."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def error_words(body: bytes) -> str:
    """`: <type>: <message>` of an error body in the target's words, whatever its shape
    (Anthropic's envelope, OpenAI's `error`, FastAPI's `detail`, a bare `message`); never raises."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    error = data.get("error")
    inner: dict[str, Any] = error if isinstance(error, dict) else data
    words = [inner[key] for key in ("type", "message") if isinstance(inner.get(key), str)]
    detail = data.get("detail")
    if not words and detail is not None:
        words = [detail if isinstance(detail, str) else json.dumps(detail)]
    # One line (a gateway's message may hold its backend's on lines of their own).
    return f": {': '.join(' '.join(word.split())[:200] for word in words)}" if words else ""


Send = Callable[[dict[str, Any], Mapping[str, str] | None], Answer]


def _served(feature: str, detail: str, answer: Answer, **extra: Any) -> Support:
    return Support(feature, True, "probe", detail, evidence=answer.evidence, **extra)


def _refused(feature: str, detail: str, answer: Answer) -> Support:
    return Support(feature, False, "probe", detail, evidence=answer.evidence)


def _failed(feature: str, detail: str, answer: Answer) -> Support:
    return Support(feature, False, "probe", detail, failed=True, evidence=answer.evidence)


def _settled(feature: str, answer: Answer, what: str) -> Support | None:
    """The Support an answer gives before its content is read: refused, broken or busy."""
    if answer.refused:
        return _refused(feature, answer.said(what), answer)
    if answer.unanswerable:
        return _failed(feature, f"{answer.said(what)}: neither served nor refused with a 4xx", answer)
    if not answer.answered:
        return _served(
            feature, f"{answer.said(what)}; judged as served (it says nothing of {feature})", answer
        )
    return None


# ------------------------------------------------------------------ thinking

Info = dict[str, Any] | None


def _thinks(answer: Answer) -> bool:
    return any(block.get("type") in ("thinking", "redacted_thinking") for block in answer.content())


def thinking(send: Send, target: Target, info: Info) -> Support:
    """Adaptive thinking (enabled first where the capabilities say adaptive is lacking), then the
    other: a thinking block shows it served; an `enabled` answer without one is thinking
    accepted and not used; an adaptive one without is served, unproven (the model may skip)."""
    ways = ("adaptive", "enabled") if adaptive_served(info) else ("enabled", "adaptive")
    skipped: tuple[str, Answer] | None = None
    ignored: Answer | None = None
    refusals: list[str] = []
    for way in ways:
        what = f"a request with {way} thinking"
        answer = send(thinking_body(target, info, way=way), None)
        if answer.refused:
            refusals.append(answer.said(what))
            continue
        if (settled := _settled("thinking", answer, what)) is not None:
            return settled
        if _thinks(answer):
            return _served(
                "thinking", f"{what} got HTTP {answer.status} with a thinking block", answer, way=way
            )
        if way == "enabled":
            ignored = answer
        else:
            skipped = (way, answer)
    if ignored is not None:
        what = "a request with enabled thinking"
        return _failed(
            "thinking", f"{what} got HTTP {ignored.status} without a thinking block: {IGNORED}", ignored
        )
    if skipped is not None:
        way, answer = skipped
        detail = f"a request with {way} thinking got HTTP {answer.status} without a thinking block"
        because = "; ".join(["adaptive thinking may skip it", *refusals])
        return _served("thinking", f"{detail} ({because}): judged as served", answer, way=way)
    return Support("thinking", False, "probe", "; ".join(refusals))


IGNORED = "accepted, not used"

# ------------------------------------------------------------------ documents and images

QUESTION = "What colour is the lighthouse?"
# About 60 words: 60-90 tokens in any tokenizer in use; a placeholder a gateway might put in
# the document's place is a handful.
DOCUMENT_TEXT = (
    "The lighthouse on the northern cape is painted green. Its keeper is a woman called Ada, "
    "who has lived in the keeper's cottage for thirty years. The lamp turns once every nine "
    "seconds and can be seen from twenty miles out at sea. In winter the ferry to the island "
    "stops running, and supplies come by a small boat from the harbour."
)
DOCUMENT = {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": DOCUMENT_TEXT}}
MIN_DOCUMENT_TOKENS = 20
# A 200 x 200 image: about 53 tokens by the API's formula (width x height / 750), dozens in
# every vision model's.
IMAGE_SIDE = 200
MIN_IMAGE_TOKENS = 8


def _counted(feature: str, send: Send, target: Target, block: dict[str, Any], least: int) -> Support:
    """Served when the request with `block` reports at least `least` more input tokens than the
    same request without it: a target that drops the block answers both alike."""
    what = f"a request with {_NAMED[feature]}"
    bare = send(_asking(target), None)
    answer = send(_asking(target, block), None)
    if (settled := _settled(feature, answer, what)) is not None:
        return settled
    without, with_it = bare.input_tokens(), answer.input_tokens()
    said = f"{what} got HTTP {answer.status}"
    if without is None or with_it is None or not bare.answered:
        return _served(feature, f"{said}; its usage could not be compared: judged as served", answer)
    counts = f"usage.input_tokens {with_it} with it, {without} without"
    if with_it - without >= least:
        return _served(feature, f"{said}: {counts}", answer)
    return _failed(feature, f"{said}, {counts}: accepted, not read", answer)


_NAMED = {"documents": "a plain-text document", "images": f"a {IMAGE_SIDE}x{IMAGE_SIDE} PNG image"}


def _asking(target: Target, *blocks: dict[str, Any]) -> dict[str, Any]:
    content = [*blocks, {"type": "text", "text": QUESTION}]
    return message_body(target, max_tokens=1, messages=[{"role": "user", "content": content}])


def documents(send: Send, target: Target, info: Info) -> Support:
    return _counted("documents", send, target, DOCUMENT, MIN_DOCUMENT_TOKENS)


def images(send: Send, target: Target, info: Info) -> Support:
    block = image_block(b64(png(IMAGE_SIDE, IMAGE_SIDE)), "image/png")
    return _counted("images", send, target, block, MIN_IMAGE_TOKENS)


CITING_QUESTION = "What colour is the lighthouse? Quote the sentence of the document that says so."


def citations(send: Send, target: Target, info: Info) -> Support:
    """A document with citations enabled and a question that asks for a quote."""
    cited = {**DOCUMENT, "title": "The cape", "citations": {"enabled": True}}
    turn = {"role": "user", "content": [cited, {"type": "text", "text": CITING_QUESTION}]}
    what = "a request with a document with citations enabled"
    answer = send(message_body(target, max_tokens=160, messages=[turn]), None)
    if (settled := _settled("citations", answer, what)) is not None:
        return settled
    said = f"{what} got HTTP {answer.status}"
    if any(isinstance(b.get("citations"), list) and b["citations"] for b in answer.content()):
        return _served("citations", f"{said} with a citation", answer)
    return _failed("citations", f"{said} without any citation: {IGNORED}", answer)


# ------------------------------------------------------------------ context management

CONTEXT_BETA = "context-management-2025-06-27"
# Each edit, as a feature (conformance/features.py), and the smallest request that asks for it.
EDITS: dict[str, dict[str, Any]] = {
    "clear_tool_uses": {"type": "clear_tool_uses_20250919"},
    "clear_thinking": {"type": "clear_thinking_20251015", "keep": {"type": "thinking_turns", "value": 1}},
    "compaction": {"type": "compact_20260112"},
}


def edit_body(target: Target, feature: str, info: Info) -> dict[str, Any]:
    """A short request with one edit (EDITS[feature]), with thinking on for clear_thinking."""
    body = thinking_body(target, info) if feature == "clear_thinking" else message_body(target)
    return {**body, "context_management": {"edits": [EDITS[feature]]}}


def edit(feature: str) -> Callable[[Send, Target, Info], Support]:
    """The probe of one edit on a short request (clear_thinking with thinking on, as the API
    wants): the answer reports `context_management` (applied_edits: empty where nothing was
    cleared)."""

    def probe(send: Send, target: Target, info: Info) -> Support:
        what = f"a request with the context_management edit {EDITS[feature]['type']}"
        answer = send(edit_body(target, feature, info), {**target.headers(), "anthropic-beta": CONTEXT_BETA})
        if (settled := _settled(feature, answer, what)) is not None:
            return settled
        said = f"{what} got HTTP {answer.status}"
        data = answer.data
        if isinstance(data, dict) and isinstance(data.get("context_management"), dict):
            return _served(feature, f"{said} with its context_management report", answer)
        return _failed(feature, f"{said} without a context_management report: {IGNORED}", answer)

    return probe


# ------------------------------------------------------------------ structured outputs and tools

PROBE_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}


def structured_outputs(send: Send, target: Target, info: Info) -> Support:
    """A small schema; the answer's text must be JSON of it (an object cut by max_tokens is not
    evidence either way; prose or a markdown fence, cut or not, is the format not used)."""
    body = message_body(
        target,
        messages=[{"role": "user", "content": "Is the sea wet? Answer in JSON."}],
        output_config={"format": {"type": "json_schema", "schema": PROBE_SCHEMA}},
    )
    what = "a request with output_config.format"
    answer = send(body, None)
    if (settled := _settled("structured_outputs", answer, what)) is not None:
        return settled
    said = f"{what} got HTTP {answer.status}"
    text = "".join(str(b.get("text")) for b in answer.content() if b.get("type") == "text")
    try:
        value: Any = json.loads(text)
    except ValueError:
        data = answer.data
        cut = isinstance(data, dict) and data.get("stop_reason") == "max_tokens"
        first_key = re.match(r'\s*\{\s*(?:"([^"]*)")?', text)
        if cut and first_key and first_key[1] in (None, "ok"):  # the schema's object, cut short
            return _served("structured_outputs", f"{said}, cut by max_tokens: judged as served", answer)
        value = None
    if isinstance(value, dict) and set(value) == {"ok"} and isinstance(value["ok"], bool):
        return _served("structured_outputs", f"{said} with JSON of the schema", answer)
    return _failed(
        "structured_outputs", f"{said} with text not JSON of the schema ({text[:80]!r}): {IGNORED}", answer
    )


def tool_calls(send: Send, target: Target, info: Info) -> Support:
    """A forced call, each way in turn (tooluse.FORCING_WAYS): the first the target takes (not a
    4xx) is the one the properties use. Any and the named tool force a call, so an answer
    without one is forced calls accepted and not honoured (`way`: the one taken); auto forces
    nothing. The `tools` feature (the tool fields taken at all) follows from it
    (features.py): a target that ignores tool_choice still counts tools, answers tool results
    and obeys tool_choice none."""
    refusals: list[str] = []
    ignored: tuple[str, Answer] | None = None
    for way in FORCING_WAYS:
        if way == "auto" and ignored is not None:
            break  # a forcing way was taken and not honoured
        what = f"a request with tool_choice {way}"
        answer = send(tool_body(target, tool_choice=way_choice(way, TOOLS)), None)
        if answer.refused:
            refusals.append(answer.said(what))
            continue
        if (settled := _settled("tool_calls", answer, what)) is not None:
            return settled
        called = any(block.get("type") == "tool_use" for block in answer.content())
        if called or way == "auto":
            shown = "with a tool_use block" if called else "(no call, as auto allows)"
            before = f" ({'; '.join(refusals)})" if refusals else ""
            return _served("tool_calls", f"{what} got HTTP {answer.status} {shown}{before}", answer, way=way)
        ignored = ignored or (way, answer)
    if ignored is not None:
        way, answer = ignored
        said = f"a request with tool_choice {way} got HTTP {answer.status}"
        return Support(
            "tool_calls",
            False,
            "probe",
            f"{said} without a tool_use block: {IGNORED}",
            failed=True,
            evidence=answer.evidence,
            way=way,
        )
    return Support("tool_calls", False, "probe", "; ".join(refusals))
