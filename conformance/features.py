"""Which optional features the target serves, found by what it does: a feature is served when a
request that uses it is answered as if it were used (conformance/evidence.py says what shows
that for each). Most users run `--target URL` without a profile, and gateways declare no
capabilities, so neither "not said" nor "said" decides:

1. the profile's `[features]` table: `true` or `false` decides (the user's own word);
2. else a request that uses the feature (thinking, documents, images, citations, each context
   management edit, structured outputs, tools; for tools and thinking each way to set it up
   in turn, the first the target takes being the one the properties use, `Target.ways`). A 4xx
   refuses it (absent, in the target's words); an answer that shows it used serves it; an
   answer that does not (the feature accepted and ignored), a 5xx or a broken connection is the
   probe's failure, judged once by the feature's judge (JUDGES), while the feature's other
   properties SKIP naming it. The model's `capabilities` (from `GET /v1/models/{model}`, else
   its entry in `GET /v1/models`) are a hint: they order the ways to try and are recorded
   (`declared`), never the only evidence;
3. `temperature: 0` (`sampling_parameters`) and an assistant prefill (`prefill`): one tiny
   request before every run (they shape every property's requests): a 400 means absent;
4. Anthropic's own tools are served only when the answer shows them run (SHOWN_BY: the server
   tool's result block, bash's tool_use); a 400 refuses them; anything else is the probe's
   failure, judged by SRVTOOL-015;
5. the Files API and Message Batches: a GET of their list (with the beta header the SDK sends):
   a 2xx, 401 or 403 means served, a 5xx is the probe's failure, any other 4xx (no such route,
   or a route that refuses Anthropic's request) absent; rate limits: one tiny message's answer
   carries `anthropic-ratelimit-*` headers;
6. else the feature is absent: nothing declares it and no request shows it (the MCP connector,
   which only a profile can declare).

Each feature is detected once per run, before the properties that need it run; the probes'
requests are recorded apart from any property's evidence and are not tagged with its id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import httpx

from conformance import evidence
from conformance.evidence import Answer, Support, error_words
from conformance.generating.code_execution import paused_call
from conformance.generating.tooluse import (
    BASH,
    COMPUTER,
    fetch_body,
    forced_tool,
    search_body,
    tool_body,
    web_search_body,
)
from conformance.judging.checks import status_subject
from conformance.wire.drivers import message_body
from conformance.wire.target import Target

__all__ = [
    "CAPABILITY_PATHS",
    "JUDGES",
    "PROBED",
    "REQUEST_SHAPING",
    "SHOWN_BY",
    "Features",
    "Support",
    "content_blocks",
    "declared_in",
    "judge_probe",
    "probe_body",
    "probe_subject",
]

# The ModelInfo capability that speaks for each feature (ModelCapabilities in schemas/): a hint.
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
    "code_execution": "capabilities.code_execution.supported",
}

# The property that judges a feature whose probe failed (accepted and not used, a 5xx, no
# answer): it FAILs (or WARNs) once on the probe's exchange, and the other properties that need
# the feature SKIP naming it. Its rule is the one the failure breaks.
JUDGES: dict[str, str] = {
    "tools": "TOOL-001",
    "tool_calls": "TOOL-001",
    "structured_outputs": "STRUCT-001",
    "thinking": "THINK-001",
    "documents": "DOC-002",
    "citations": "DOC-005",
    "images": "IMG-007",
    "context_management": "CTX-005",
    "clear_tool_uses": "CTX-005",
    "clear_thinking": "CTX-005",
    "compaction": "CTX-005",
    "batches": "BATCH-001",
    "files": "FILES-001",
    "skills": "SKILL-001",
    "workspaces": "ISO-001",
    "tool_search": "SRVTOOL-015",
    "web_fetch": "SRVTOOL-015",
    "web_search": "SRVTOOL-015",
    "builtin_tools": "SRVTOOL-015",
    "computer_use": "SRVTOOL-015",
    "code_execution": "SRVTOOL-015",
}


def declared_in(model_info: Any, feature: str) -> bool | None:
    """What a ModelInfo's capabilities say of `feature`: a boolean, else None (no word, or a
    malformed one: MODELS-003 judges the ModelInfo)."""
    path = CAPABILITY_PATHS.get(feature)
    stated = _walk(model_info, path) if path is not None else None
    return stated if isinstance(stated, bool) else None


def probe_subject(support: Support) -> str:
    """What the target did to a failed probe, for grouping causes: the feature accepted and not
    used, else the answer it gave (grouped with the properties that met the same answer)."""
    if "accepted, not" in support.detail:
        return f"{support.feature} accepted, not used"
    if support.detail.endswith("refused though declared served"):
        return f"{support.feature} refused though its capabilities say it is served"
    proof = support.evidence or {}
    answer, asked = proof.get("response") or {}, proof.get("request") or {}
    status = answer.get("status")
    if not isinstance(status, int) or not asked.get("url"):
        return f"the {support.feature} probe got no answer"
    body = answer.get("body", "")
    raw = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    sent = asked.get("body", "")
    request = httpx.Request(
        str(asked.get("method", "POST")),
        str(asked["url"]),
        content=sent.encode() if isinstance(sent, str) else json.dumps(sent).encode(),
    )
    return status_subject(httpx.Response(status, content=raw, request=request))


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


def _code_probe(target: Target) -> dict[str, Any]:
    # A bash call sent back unanswered: the target runs it first, whatever its model would write.
    return paused_call(
        target, "bash_code_execution", {"command": "echo plumbline"}, "srvtoolu_plumbline_probe"
    )


def _builtin_probe(target: Target) -> dict[str, Any]:
    return tool_body(target, tools=[BASH], tool_choice=forced_tool("bash"), max_tokens=PROBE_MAX_TOKENS)


def _computer_probe(target: Target) -> dict[str, Any]:
    return tool_body(
        target, tools=[COMPUTER], tool_choice=forced_tool("computer"), max_tokens=PROBE_MAX_TOKENS
    )


# Detected before every run, whatever is selected: they shape the requests of every property.
REQUEST_SHAPING = ("prefill", "sampling_parameters")

# Features with endpoints of their own: (the list path, the beta header their requests carry).
LISTED: dict[str, tuple[str, str | None]] = {
    "files": ("/v1/files", "files-api-2025-04-14"),
    "skills": ("/v1/skills", "skills-2025-10-02"),
    "batches": ("/v1/messages/batches", None),
}

PROBE_MAX_TOKENS = 64  # a server tool's or bash's forced call is short; the answer is not judged

# Features that one request shows, judged by judge_probe: (what the request is, how to build it).
PROBED: dict[str, tuple[str, Callable[[Target], dict[str, Any]]]] = {
    # What requests may carry at the version judged: 2026-10-21 removes temperature, top_p and
    # top_k, and the newest models take only their defaults and refuse prefills (a 400).
    "sampling_parameters": ("a request with temperature 0", _sampling_probe),
    "prefill": ("a request that ends with an assistant prefill", _prefill_probe),
    # Anthropic's own tools: a server that does not run them refuses their types with a 400.
    "tool_search": ("a forced tool_search_tool_regex_20251119 call", _search_probe),
    "web_fetch": ("a forced web_fetch_20250910 call", _fetch_probe),
    "web_search": ("a forced web_search_20250305 call", _web_search_probe),
    "builtin_tools": ("a forced bash_20250124 call", _builtin_probe),
    "computer_use": ("a forced computer_20250124 call", _computer_probe),
    "code_execution": ("a code_execution_20250825 bash call sent back to run", _code_probe),
}

# The features a request that uses them shows served (conformance/evidence.py).
EVIDENCED: dict[str, Callable[[evidence.Send, Target, dict[str, Any] | None], Support]] = {
    "tool_calls": evidence.tool_calls,
    "structured_outputs": evidence.structured_outputs,
    "thinking": evidence.thinking,
    "documents": evidence.documents,
    "citations": evidence.citations,
    "images": evidence.images,
    **{name: evidence.edit(name) for name in evidence.EDITS},
}


# What an answer holds when the target ran one of Anthropic's own tools: (the block type that
# shows it, the name of the tool the probe forces). A server tool's call and its result come in
# the same turn (server-tools docs); bash runs on the client, so its tool_use shows it.
SHOWN_BY: dict[str, tuple[str, str]] = {
    "tool_search": ("tool_search_tool_result", "tool_search_tool_regex"),
    "web_fetch": ("web_fetch_tool_result", "web_fetch"),
    "web_search": ("web_search_tool_result", "web_search"),
    "builtin_tools": ("tool_use", "bash"),
    "computer_use": ("tool_use", "computer"),
    "code_execution": ("bash_code_execution_tool_result", "bash_code_execution"),
}


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
    """The verdict of a probe's answer (PROBED): only a 400 says the feature is absent. For one of
    Anthropic's own tools (SHOWN_BY), only an answer that shows it run says it is served."""
    what = PROBED[feature][0]
    if feature in SHOWN_BY:
        return _judge_shown(feature, what, status, body, failure, evidence)
    if failure is not None:
        return Support(feature, True, "probe", f"{what} failed ({failure}); judged as served")
    if status == 400:
        return Support(feature, False, "probe", f"{what} got HTTP 400{error_words(body)}")
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
        return Support(feature, False, "probe", f"{what} got HTTP 400{error_words(body)}", evidence=evidence)
    if status is None or not 200 <= status < 300:
        return failed(f"{what} got HTTP {status}{error_words(body)}: neither run nor refused with a 400")
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


class Features:
    """The run's knowledge of the target's optional features, detected once each."""

    def __init__(self, target: Target) -> None:
        self._target = target
        self._found: dict[str, Support] = {}
        self._info: dict[str, Any] | None = None
        self._info_read = False

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
            proof = support.get("evidence")
            way, declared = support.get("way"), support.get("declared")
            self._keep(
                Support(
                    name,
                    bool(support["supported"]),
                    str(support["source"]),
                    str(support["detail"]),
                    failed=bool(support.get("failed")),
                    evidence=proof if isinstance(proof, dict) else None,
                    way=way if isinstance(way, str) else None,
                    declared=declared if isinstance(declared, bool) else None,
                )
            )

    def support(self, feature: str) -> Support:
        if feature not in self._found:
            self._keep(self._detect(feature))
        return self._found[feature]

    def _keep(self, support: Support) -> None:
        """Record a detection; the way it was found served is how the properties set it up."""
        self._found[support.feature] = support
        if support.supported and support.way is not None:
            self._target.ways[support.feature] = support.way

    def declared(self, feature: str) -> bool | None:
        """What the model's capabilities say of `feature` (a hint; None: they say nothing)."""
        return declared_in(self.model_info(), feature)

    def _detect(self, feature: str) -> Support:
        declared = self._target.config.profile.declares(feature)
        if declared is not None:
            said = "true" if declared else "false"
            return Support(feature, declared, "profile", f"the profile says {feature} = {said}")
        if feature == "context_management":
            found = self._context_management()
        elif feature == "tools":
            found = self._tools()
        elif feature == "tool_calls" and self._target.config.profile.declares("tools") is False:
            found = Support(feature, False, "profile", "the profile says tools = false")
        elif feature in EVIDENCED:
            with self._apart():
                found = EVIDENCED[feature](self._send, self._target, self.model_info())
        elif feature in PROBED:
            with self._apart():
                found = self.probe(feature)
        elif feature in LISTED:
            found = self._list_probe(feature)
        elif feature == "rate_limits":
            found = self._headers_probe(feature)
        elif feature == "workspaces":
            found = self._second_key()
        else:
            found = Support(feature, False, "undeclared", "nothing declares it and no request shows it")
        return _hinted(found, self.declared(feature), CAPABILITY_PATHS.get(feature))

    def _tools(self) -> Support:
        """The tool fields taken at all: where a way of asking for a call was taken, whether a
        call came or not (forced calls not honoured are TOOL-001's finding, `tool_calls`)."""
        calls = self.support("tool_calls")
        taken = calls.supported or (calls.failed and calls.way is not None)
        if taken:
            return Support("tools", True, calls.source, calls.detail, way=calls.way)
        failed, proof = calls.failed, calls.evidence
        return Support("tools", False, calls.source, calls.detail, failed=failed, evidence=proof)

    def _context_management(self) -> Support:
        """Served where one of its edits is; failed where none is and one was accepted and not
        used; absent where every edit was refused."""
        edits = [self.support(name) for name in evidence.EDITS]
        served = [s for s in edits if s.supported]
        failed = [s for s in edits if s.failed]
        chosen = (served or failed or edits)[0]
        detail = "; ".join(s.detail for s in edits)
        return Support(
            "context_management",
            bool(served),
            chosen.source,
            detail,
            failed=not served and bool(failed),
            evidence=chosen.evidence,
        )

    def model_info(self) -> dict[str, Any] | None:
        """The model's ModelInfo: `GET /v1/models/{model}`, else its entry in `GET /v1/models`
        (gateways that serve only the list); None where neither gives one."""
        if not self._info_read:
            self._info_read = True
            with self._apart():
                self._info = self._model_by_id() or self._model_in_list()
        return self._info

    def _model_by_id(self) -> dict[str, Any] | None:
        info = self._get_json(f"/v1/models/{self._target.model}")
        return info if isinstance(info, dict) and info.get("id") == self._target.model else None

    def _model_in_list(self) -> dict[str, Any] | None:
        listed = self._get_json("/v1/models?limit=1000")
        entries = listed.get("data") if isinstance(listed, dict) else None
        found = [e for e in entries or [] if isinstance(e, dict) and e.get("id") == self._target.model]
        return found[0] if found else None

    def _get_json(self, path: str) -> Any:
        try:
            response = self._target.request("GET", path)
            return response.json() if response.status_code == 200 else None
        except (httpx.TransportError, ValueError):
            return None

    def _send(self, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Answer:
        """POST one probe request (apart: see _apart); never raises for what the target does."""
        try:
            response = self._target.request("POST", "/v1/messages", json_body=body, headers=headers)
        except httpx.TransportError as exc:
            return Answer(None, b"", f"{type(exc).__name__}: {exc}", self._probe_evidence())
        return Answer(response.status_code, response.content, None, self._probe_evidence())

    def probe(self, feature: str) -> Support:
        """Send `feature`'s probe (PROBED or EVIDENCED) now, recorded as the running property's
        exchanges, and judge its answer (detection sends it apart, before the run)."""
        if feature in EVIDENCED:
            return EVIDENCED[feature](self._send, self._target, self.model_info())
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
        included): a 2xx says it is served, and so do a 401/403 (AUTH-* judge keys); a 5xx is the
        probe's failure; a 404 or 405 (no such route) or another 4xx says it is absent: the route
        refuses Anthropic's request (LiteLLM's `/v1/files` is OpenAI's Files API and refuses it
        with a 400), and its properties would only restate that."""
        path, beta = LISTED[feature]
        headers = {**self._target.headers(), **({"anthropic-beta": beta} if beta else {})}
        with self._apart():
            try:
                response = self._target.request("GET", path, headers=headers)
            except httpx.TransportError as exc:
                detail = f"GET {path} failed ({type(exc).__name__}): neither served nor refused"
                return Support(feature, False, "probe", detail, failed=True, evidence=self._probe_evidence())
            proof = self._probe_evidence()
        status = response.status_code
        said = f"GET {path} got HTTP {status}{error_words(response.content)}"
        if status >= 500:
            return Support(
                feature, False, "probe", f"{said}: neither served nor refused", failed=True, evidence=proof
            )
        served = status < 400 or status in (401, 403)
        return Support(feature, served, "probe", said, evidence=proof)

    def _second_key(self) -> Support:
        """Workspaces: judged with a key of another workspace (--second-api-key), once the target
        takes it (GET /v1/models answers 200); nothing else tells that a target has two."""
        if self._target.config.second_api_key is None:
            detail = "no --second-api-key: a key of another workspace of the target is needed"
            return Support("workspaces", False, "option", detail)
        with self._apart():
            try:
                response = self._target.request(
                    "GET", "/v1/models", headers=self._target.headers(second=True)
                )
            except httpx.TransportError as exc:
                detail = f"GET /v1/models with the second key failed ({type(exc).__name__})"
                return Support(
                    "workspaces", False, "probe", detail, failed=True, evidence=self._probe_evidence()
                )
            proof = self._probe_evidence()
        status = response.status_code
        said = f"GET /v1/models with the second key got HTTP {status}{error_words(response.content)}"
        if response.status_code != 200:
            return Support("workspaces", False, "probe", f"{said}: the key is not taken", evidence=proof)
        return Support("workspaces", True, "probe", said, evidence=proof)

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


def _hinted(found: Support, declared: bool | None, path: str | None) -> Support:
    """The detection, with what the capabilities say beside it (never instead of it). A feature
    the capabilities say is served and a request that uses it refused is one finding, the
    feature's judge's: the target contradicts itself, and its users meet the refusal."""
    if declared is None or path is None or found.source == "profile":
        return found
    said = f" (declared: {path.removeprefix('capabilities.')} {json.dumps(declared)})"
    claimed = declared and not found.supported and not found.failed
    return Support(
        found.feature,
        found.supported,
        found.source,
        found.detail + said + (": refused though declared served" if claimed else ""),
        failed=found.failed or claimed,
        evidence=found.evidence,
        way=found.way,
        declared=declared,
    )


def _walk(data: Any, path: str) -> Any:
    for key in path.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data
