"""Which optional features the target serves: the profile's word, else the model's
capabilities, else (tools, structured outputs) one probe request.

A property that `requires` a feature the target does not serve is UNSUPPORTED, with the reason;
a target that serves it is judged, and breaking it is a FAIL. Most users run `--target URL`
without a profile, so "not said" cannot mean "absent" for the features every peer claims:

1. the profile's `[features]` table: `true` or `false` decides;
2. else `GET /v1/models/{model}`: `capabilities.<name>.supported` (a boolean; anything else is
   no answer, and MODELS-003 judges the ModelInfo) decides for the features it covers
   (structured outputs, thinking, images, documents, batches, citations, context management
   and each of its edits). Tools have no capability field;
3. else, for tools, structured outputs, Anthropic's own tools, `temperature: 0`
   (`sampling_parameters`) and an assistant prefill (`prefill`), one tiny request that uses
   the feature (the last two before every run: they shape every property's requests): a 400
   means the target refuses it (absent, as the real API refuses what a model
   lacks). For tools and structured outputs any other answer, a 200 or a crash, means served,
   so the properties judge it (a target that silently ignores tools is probed as serving them,
   and fails the properties that force a tool call). Anthropic's own tools are served only
   when the answer shows them run (SHOWN_BY: the server tool's result block, bash's tool_use):
   a 200 that does not (the tool accepted and ignored, or run as a client tool) or a 5xx is the
   probe's failure, judged once by SRVTOOL-015; the properties that need the tool SKIP, naming
   it, instead of each failing for the same cause;
4. else, for the Files API, `GET /v1/files` with its beta header: a 2xx, 401, 403 or 5xx means
   served, any other 4xx (no such route, or a route that refuses Anthropic's request) absent;
   for rate limits, one tiny message: `anthropic-ratelimit-*` headers on its answer mean served;
5. else the feature is absent: nothing declares it.

Each feature is detected once per run, when the first property that needs it runs; the probe's
requests are recorded apart from that property's evidence and are not tagged with its id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx

from conformance.generating.tooluse import (
    BASH,
    fetch_body,
    forced_tool,
    search_body,
    tool_body,
    web_search_body,
)
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "CAPABILITY_PATHS",
    "PROBED",
    "REQUEST_SHAPING",
    "SHOWN_BY",
    "Features",
    "Support",
    "content_blocks",
    "judge_probe",
    "probe_body",
]

# The ModelInfo capability that answers for each feature (ModelCapabilities in schemas/).
CAPABILITY_PATHS: dict[str, str] = {
    "structured_outputs": "capabilities.structured_outputs.supported",
    "thinking": "capabilities.thinking.supported",
    "images": "capabilities.image_input.supported",
    "documents": "capabilities.pdf_input.supported",
    "batches": "capabilities.batch.supported",
    "citations": "capabilities.citations.supported",
    "context_management": "capabilities.context_management.supported",
    # Each context management edit has its own flag: a target may serve one and refuse another.
    "clear_thinking": "capabilities.context_management.clear_thinking_20251015.supported",
    "clear_tool_uses": "capabilities.context_management.clear_tool_uses_20250919.supported",
    "compaction": "capabilities.context_management.compact_20260112.supported",
}

_PROBE_SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}},
    "required": ["ok"],
    "additionalProperties": False,
}
PROBE_TOOL = "plumbline_probe"


def _tools_probe(target: Target) -> dict[str, Any]:
    return message_body(
        target,
        messages=[{"role": "user", "content": "Call the tool."}],
        tools=[{"name": PROBE_TOOL, "description": "Says ok.", "input_schema": _PROBE_SCHEMA}],
        tool_choice={"type": "tool", "name": PROBE_TOOL},
    )


def _structured_probe(target: Target) -> dict[str, Any]:
    return message_body(
        target,
        messages=[{"role": "user", "content": "Is the sea wet? Answer in JSON."}],
        output_config={"format": {"type": "json_schema", "schema": _PROBE_SCHEMA}},
    )


def _sampling_probe(target: Target) -> dict[str, Any]:
    return {**message_body(target, max_tokens=1), "temperature": 0}


def _prefill_probe(target: Target) -> dict[str, Any]:
    prefill = {"role": "assistant", "content": "The answer is"}
    body = message_body(target, max_tokens=1)
    return {**body, "messages": [*body["messages"], prefill]}


def _search_probe(target: Target) -> dict[str, Any]:
    return search_body(target, max_tokens=PROBE_MAX_TOKENS)


def _fetch_probe(target: Target) -> dict[str, Any]:
    return fetch_body(target, max_tokens=PROBE_MAX_TOKENS)


def _web_search_probe(target: Target) -> dict[str, Any]:
    return web_search_body(target, max_tokens=PROBE_MAX_TOKENS)


def _builtin_probe(target: Target) -> dict[str, Any]:
    return tool_body(target, tools=[BASH], tool_choice=forced_tool("bash"), max_tokens=PROBE_MAX_TOKENS)


# Features with endpoints of their own, probed by a GET of their list.
# Detected before every run, whatever is selected: they shape the requests of every property.
REQUEST_SHAPING = ("prefill", "sampling_parameters")

# Features with endpoints of their own: (the list path, the beta header their requests carry).
LISTED: dict[str, tuple[str, str]] = {"files": ("/v1/files", "files-api-2025-04-14")}

PROBE_MAX_TOKENS = 64  # a server tool's or bash's forced call is short; the answer is not judged

# Features that one request can show: (what the request is, how to build it).
PROBED: dict[str, tuple[str, Callable[[Target], dict[str, Any]]]] = {
    "tools": ("a forced tool call", _tools_probe),
    "structured_outputs": ("a request with output_config.format", _structured_probe),
    # What requests may carry at the version judged: 2026-10-21 removes temperature, top_p and
    # top_k, and the newest models take only their defaults and refuse prefills (a 400).
    "sampling_parameters": ("a request with temperature 0", _sampling_probe),
    "prefill": ("a request that ends with an assistant prefill", _prefill_probe),
    # Anthropic's own tools: a server that does not run them refuses their types with a 400.
    "tool_search": ("a forced tool_search_tool_regex_20251119 call", _search_probe),
    "web_fetch": ("a forced web_fetch_20250910 call", _fetch_probe),
    "web_search": ("a forced web_search_20250305 call", _web_search_probe),
    "builtin_tools": ("a forced bash_20250124 call", _builtin_probe),
}


# What an answer holds when the target ran one of Anthropic's own tools: (the block type that
# shows it, the name of the tool the probe forces). A server tool's call and its result come in
# the same turn (server-tools docs); bash runs on the client, so its tool_use shows it.
SHOWN_BY: dict[str, tuple[str, str]] = {
    "tool_search": ("tool_search_tool_result", "tool_search_tool_regex"),
    "web_fetch": ("web_fetch_tool_result", "web_fetch"),
    "web_search": ("web_search_tool_result", "web_search"),
    "builtin_tools": ("tool_use", "bash"),
}
# The property that judges a probe of SHOWN_BY that neither served nor refused the tool.
PROBE_JUDGE = "SRVTOOL-015"


@dataclass(frozen=True, slots=True)
class Support:
    """Whether the target serves one optional feature, who said so, and why. `failed`: the probe
    showed neither the feature served nor refused (PROBE_JUDGE judges that, and every probe of
    SHOWN_BY, on `evidence`: the probe's exchange)."""

    feature: str
    supported: bool
    source: str  # "profile", "capabilities", "probe" or "undeclared"
    detail: str
    failed: bool = False
    evidence: dict[str, Any] | None = None

    @property
    def reason(self) -> str:
        """One line for an UNSUPPORTED or SKIP verdict, or the console."""
        state = "not judged" if self.failed else "served" if self.supported else "not served"
        return f"{self.feature} {state} ({self.source}: {self.detail})"

    def as_dict(self) -> dict[str, object]:
        """What index.json says (the evidence is PROBE_JUDGE's)."""
        found: dict[str, object] = {"supported": self.supported, "source": self.source, "detail": self.detail}
        return {**found, "failed": True} if self.failed else found

    def as_context(self) -> dict[str, object]:
        """All of it, for the xdist workers."""
        return {**self.as_dict(), "failed": self.failed, "evidence": self.evidence}


def probe_body(feature: str, target: Target) -> dict[str, Any]:
    """The request that probes `feature` (one of PROBED)."""
    return PROBED[feature][1](target)


def judge_probe(
    feature: str,
    status: int | None,
    body: bytes,
    failure: str | None = None,
    evidence: dict[str, Any] | None = None,
) -> Support:
    """The verdict of a probe's answer: only a 400 says the feature is absent. For one of
    Anthropic's own tools (SHOWN_BY), only an answer that shows it run says it is served."""
    what = PROBED[feature][0]
    if feature in SHOWN_BY:
        return _judge_shown(feature, what, status, body, failure, evidence)
    if failure is not None:
        return Support(feature, True, "probe", f"{what} failed ({failure}); judged as served")
    if status == 400:
        return Support(feature, False, "probe", f"{what} got HTTP 400{_error_words(body)}")
    if status is not None and 200 <= status < 300:
        return Support(feature, True, "probe", f"{what} got HTTP {status}")
    return Support(
        feature, True, "probe", f"{what} got HTTP {status}; judged as served (only a 400 refuses a feature)"
    )


def _judge_shown(
    feature: str,
    what: str,
    status: int | None,
    body: bytes,
    failure: str | None,
    evidence: dict[str, Any] | None,
) -> Support:
    def failed(detail: str) -> Support:
        return Support(feature, False, "probe", detail, failed=True, evidence=evidence)

    if failure is not None:
        return failed(f"{what} failed ({failure})")
    if status == 400:
        return Support(feature, False, "probe", f"{what} got HTTP 400{_error_words(body)}", evidence=evidence)
    if status is None or not 200 <= status < 300:
        return failed(f"{what} got HTTP {status}{_error_words(body)}: neither run nor refused with a 400")
    shown, name = SHOWN_BY[feature]
    blocks = content_blocks(body)
    if any(block.get("type") == shown and block.get("name", name) == name for block in blocks):
        return Support(
            feature, True, "probe", f"{what} got HTTP {status} with a {shown} block", evidence=evidence
        )
    # A server tool's call cut by max_tokens (a model that samples a long input) never ran, but
    # its server_tool_use shows the server took the tool for its own: served, judged elsewhere.
    called = any(block.get("type") == "server_tool_use" and block.get("name") == name for block in blocks)
    if called and shown != "tool_use" and _stop_reason(body) == "max_tokens":
        return Support(
            feature,
            True,
            "probe",
            f"{what} got HTTP {status} with its server_tool_use, cut by max_tokens before it ran",
            evidence=evidence,
        )
    seen = [" ".join(str(b.get(k)) for k in ("type", "name") if isinstance(b.get(k), str)) for b in blocks]
    return failed(
        f"{what} got HTTP {status} without a {shown} block (content: {seen or 'none'}): accepted, not run"
    )


def _stop_reason(body: bytes) -> Any:
    try:
        data = json.loads(body)
    except ValueError:
        return None
    return data.get("stop_reason") if isinstance(data, dict) else None


def content_blocks(body: bytes) -> list[dict[str, Any]]:
    """The content blocks of a Message body (none when it is not one)."""
    try:
        data = json.loads(body)
    except ValueError:
        return []
    content = data.get("content") if isinstance(data, dict) else None
    return [block for block in content if isinstance(block, dict)] if isinstance(content, list) else []


def _error_words(body: bytes) -> str:
    """`: <error.type>: <message>` of an error body, when it has them (never raises)."""
    try:
        data = json.loads(body)
    except ValueError:
        return ""
    inner = data.get("error") if isinstance(data, dict) else None
    if not isinstance(inner, dict):
        return ""
    words = [str(inner[key])[:200] for key in ("type", "message") if isinstance(inner.get(key), str)]
    return f": {': '.join(words)}" if words else ""


class Features:
    """The run's knowledge of the target's optional features, detected once each."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._found: dict[str, Support] = {}
        self._capabilities: dict[str, Any] | None = None
        self._capabilities_read = False

    @property
    def detected(self) -> dict[str, Support]:
        """The features detected so far, in detection order."""
        return dict(self._found)

    def detect(self, features: Iterable[str]) -> None:
        """Detect these now, in sorted order (before the properties run: once per run, apart)."""
        for feature in sorted(set(features)):
            self.support(feature)

    def as_context(self) -> dict[str, dict[str, object]]:
        return {name: support.as_context() for name, support in self._found.items()}

    def preset(self, found: Mapping[str, Mapping[str, Any]]) -> None:
        """What the run's controller detected (`as_context`): an xdist worker asks nothing again."""
        for name, support in found.items():
            evidence = support.get("evidence")
            self._found[name] = Support(
                name,
                bool(support["supported"]),
                str(support["source"]),
                str(support["detail"]),
                failed=bool(support.get("failed")),
                evidence=evidence if isinstance(evidence, dict) else None,
            )

    def support(self, feature: str) -> Support:
        if feature not in self._found:
            self._found[feature] = self._detect(feature)
        return self._found[feature]

    def _detect(self, feature: str) -> Support:
        declared = self._target.config.profile.declares(feature)
        if declared is not None:
            said = "true" if declared else "false"
            return Support(feature, declared, "profile", f"the profile says {feature} = {said}")
        path = CAPABILITY_PATHS.get(feature)
        if path is not None:
            stated = _walk(self._model_info(), path)
            if isinstance(stated, bool):
                where = f"/v1/models/{self._target.model}"
                return Support(feature, stated, "capabilities", f"{where}: {path} is {json.dumps(stated)}")
        if feature in PROBED:
            return self._probe(feature)
        if feature in LISTED:
            return self._list_probe(feature)
        if feature == "rate_limits":
            return self._headers_probe(feature)
        return Support(
            feature, False, "undeclared", "neither the profile nor the model's capabilities declare it"
        )

    def _model_info(self) -> Any:
        if not self._capabilities_read:
            self._capabilities_read = True
            with self._apart():
                try:
                    response = self._target.request("GET", f"/v1/models/{self._target.model}")
                    info = response.json() if response.status_code == 200 else None
                except (httpx.TransportError, ValueError):
                    info = None
            self._capabilities = info if isinstance(info, dict) else None
        return self._capabilities

    def _probe(self, feature: str) -> Support:
        with self._apart():
            return self.probe(feature)

    def probe(self, feature: str) -> Support:
        """Send `feature`'s probe now, recorded as the running property's exchange, and judge
        its answer (detection sends it apart, before the run)."""
        try:
            body = probe_body(feature, self._target)
            response = self._target.request("POST", "/v1/messages", json_body=body)
        except httpx.TransportError as exc:
            failure = f"{type(exc).__name__}: {exc}"
            return judge_probe(feature, None, b"", failure, self._probe_evidence())
        return judge_probe(feature, response.status_code, response.content, None, self._probe_evidence())

    def _probe_evidence(self) -> dict[str, Any] | None:
        """The probe's exchange, as the evidence of the property that judges it."""
        exchanges = self._target.recorder.exchanges
        return exchanges[-1].as_evidence() if exchanges else None

    def _list_probe(self, feature: str) -> Support:
        """A feature with endpoints of its own, asked for its list as the SDK asks (beta header
        included): a 2xx says it is served, and so do a 401/403 (AUTH-* judge keys) and a 5xx
        (the properties judge the crash); a 404 or 405 (no such route) or another 4xx says it is
        absent: the route refuses Anthropic's request (LiteLLM's `/v1/files` is OpenAI's Files
        API and refuses it with a 400), and its properties would only restate that."""
        path, beta = LISTED[feature]
        headers = {**self._target.headers(), "anthropic-beta": beta}
        with self._apart():
            try:
                response = self._target.request("GET", path, headers=headers)
            except httpx.TransportError as exc:
                return Support(
                    feature, True, "probe", f"GET {path} failed ({type(exc).__name__}); judged as served"
                )
        status = response.status_code
        served = status < 400 or status in (401, 403) or status >= 500
        return Support(
            feature, served, "probe", f"GET {path} got HTTP {status}{_error_words(response.content)}"
        )

    def _headers_probe(self, feature: str) -> Support:
        """Rate limits: whether one tiny message's answer reports them in `anthropic-ratelimit-*`
        headers (a target that limits without saying so is not judged: nothing tells its limit)."""
        body = {
            "model": self._target.model,
            "max_tokens": 1,
            "messages": [{"role": "user", "content": "Hi"}],
        }
        with self._apart():
            try:
                response = self._target.request("POST", "/v1/messages", json_body=body)
            except httpx.TransportError as exc:
                return Support(feature, False, "probe", f"the probe failed ({type(exc).__name__})")
        named = sorted(n for n in response.headers if n.lower().startswith("anthropic-ratelimit-"))
        detail = f"HTTP {response.status_code} with " + (
            ", ".join(named[:3]) if named else "no anthropic-ratelimit-* header"
        )
        return Support(feature, bool(named), "probe", detail)

    @contextmanager
    def _apart(self) -> Iterator[None]:
        """Requests neither tagged with the running property's id nor kept as its evidence."""
        recorder = self._target.recorder
        property_id, exchanges = recorder.property_id, recorder.exchanges
        recorder.reset(None)
        try:
            yield
        finally:
            recorder.property_id, recorder.exchanges = property_id, exchanges


def _walk(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
