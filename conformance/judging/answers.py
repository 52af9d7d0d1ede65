"""How an answer, and a request that should have been refused, are named and keyed for a cause.

A failure's cause has words (the first occurrence's, in the target's words: what reports show)
and a key (what groups failures: never shown). An answer is named by its request, status and
body (`POST /v1/messages answered HTTP 400 (invalid_request_error: …)`), and keyed by its
route, status, body kind and the target's own message normalised (verdicts.message_key), the
same whichever transport met it (raw, streamed, the Python or TypeScript SDK) and whichever
check failed on it. A request that should have been refused and was answered is keyed by the
request itself (`refusal_key`).
"""

from __future__ import annotations

import ast
import hashlib
import json
from typing import Any

import httpx

from conformance.judging.verdicts import REFUSAL_KEY, cause_key, first_line, message_key

__all__ = [
    "answer_key",
    "answer_subject",
    "body_shape",
    "error_message",
    "refusal_key",
    "request_label",
    "request_of",
    "request_route",
    "status_key",
    "status_subject",
]


def request_route(request: Any) -> str:
    """`POST /v1/messages`: a request's method and path, whatever carried it (raw, streamed,
    an SDK; an httpx or httpx2 request)."""
    return "a request" if request is None else f"{request.method} {request.url.path}"


def request_label(request: Any) -> str:
    """`POST /v1/messages`, with ` (stream)` for a streaming request: the request, for a cause
    (an httpx or httpx2 request: the SDK's client is httpx2)."""
    label = request_route(request)
    if request is None:
        return label
    try:
        body = json.loads(request.content) if request.content else None
    except Exception:  # a request not read yet (httpx or httpx2), or a body that is not JSON
        body = None
    if isinstance(body, dict) and body.get("stream") is True:
        label += " (stream)"
    return label


def request_of(response: httpx.Response) -> httpx.Request | None:
    """The request an answer answered; None for a Response built by hand."""
    try:
        return response.request
    except RuntimeError:  # a Response built by hand (tests) has none
        return None


_NOT_JSON: Any = object()


def _parsed(content: bytes) -> Any:
    try:
        return json.loads(content)
    except (ValueError, UnicodeDecodeError):
        return _NOT_JSON


def error_message(body: Any) -> str | None:
    """The target's own words in an error body, whatever its shape: Anthropic's and OpenAI's
    `{"error": {"message": ...}}`, `{"error": "..."}`, FastAPI's `{"detail": "..."}` or its list
    of `{"loc", "msg"}` (each with where), `{"message": "..."}`; None when it says nothing."""
    if isinstance(body, str):
        return body.strip() or None
    if isinstance(body, list):
        return "; ".join(m for m in map(error_message, body[:5]) if m) or None
    if not isinstance(body, dict):
        return None
    if isinstance(body.get("msg"), str):
        loc = body.get("loc")
        where = ".".join(map(str, loc)) if isinstance(loc, list | tuple) else ""
        return f"{where}: {body['msg']}" if where else str(body["msg"])
    for key in ("error", "detail", "message"):
        if (found := error_message(body.get(key))) is not None:
            return found
    return None


def _innermost(message: str) -> str:
    """A message that quotes another error body (a gateway passing its backend's JSON on, a
    Python repr of a validation list): the words before it and the quoted body's own message,
    so that the values of the quoted body (all quoted) do not blur the key into one for all."""
    starts = [i for i in (message.find("{"), message.find("[")) if i >= 0]
    end = max(message.rfind("}"), message.rfind("]"))
    if not starts or end < min(starts) or len(message) > 20_000:
        return message
    start = min(starts)
    for parse in (json.loads, ast.literal_eval):
        try:
            inner = parse(message[start : end + 1])
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            continue
        found = error_message(inner)
        return f"{message[:start].strip()} {_innermost(found)}".strip() if found else message
    return message


def _shape(body: Any, content: bytes, *, words: bool = True) -> str:
    """What an answer's body is, in words shared by every answer of that kind: an Anthropic
    error with its type, another JSON shape by its keys, or not JSON; with `words`, the
    target's own message (its first line, shortened: the key reads all of it)."""
    if body is _NOT_JSON:
        return "a body that is not JSON" if content else "an empty body"
    message = error_message(body) if words else None
    said = f": {first_line(message, 100)}" if message else ""
    inner = body.get("error") if isinstance(body, dict) else None
    if isinstance(body, dict) and body.get("type") == "error" and isinstance(inner, dict):
        return f"{inner.get('type')}{said}"
    if isinstance(body, dict):
        return "a body with keys " + ", ".join(sorted(map(str, body))[:6]) + said
    return f"a JSON {type(body).__name__} body{said}"


def body_shape(response: httpx.Response, *, words: bool = True) -> str:
    """What an answer's body is (`_shape`): `invalid_request_error: max_tokens: Field
    required`, `a body with keys detail: Not Found`, `a body that is not JSON`."""
    return _shape(_parsed(response.content), response.content, words=words)


def answer_subject(label: str, status: int, content: bytes) -> str:
    """`POST /v1/messages answered HTTP 500 (api_error: boom)`: an answer, for a cause's text."""
    return f"{label} answered HTTP {status} ({_shape(_parsed(content), content)})"


def answer_key(route: str, status: int, content: bytes, *, words: bool = True) -> str:
    """What groups the failures an answer caused, whichever transport met it (raw, streamed,
    the Python or TypeScript SDK: `route` is the method and path, no stream mark) and whichever
    check (status, JSON): the route, the status, the body's kind and (with `words`) the target's
    own message, normalised (message_key). A 404 or 405 is keyed without its body: the path
    names what is not there (a count_tokens route never added), whatever the body says of it."""
    head = f"{cause_key(route)} answered HTTP {status}"
    if status in (404, 405):
        return head
    body = _parsed(content)
    if body is _NOT_JSON:
        # A 2xx's text is the model's (a different text per request), not a message.
        text = content.decode("utf-8", "replace") if status >= 400 else ""
        kind, message = ("not json" if content else "empty"), text[:2000]
    else:
        inner = body.get("error") if isinstance(body, dict) else None
        if isinstance(body, dict) and body.get("type") == "error" and isinstance(inner, dict):
            kind = f"error {inner.get('type')}"
        elif isinstance(body, dict):
            kind = "keys " + ", ".join(sorted(map(str, body))[:6])
        else:
            kind = f"json {type(body).__name__}"
        message = error_message(body) or ""
    said = message_key(_innermost(message)) if message and words else ""
    return f"{head} ({kind}{': ' + said if said else ''})"


def status_subject(response: httpx.Response) -> str:
    """`POST /v1/messages answered HTTP 500 (api_error: boom)`: the cause of a wrong status."""
    return answer_subject(request_label(request_of(response)), response.status_code, response.content)


def status_key(response: httpx.Response) -> str:
    """The grouping key of an answer (answer_key), for every check that fails on it."""
    return answer_key(request_route(request_of(response)), response.status_code, response.content)


# What the API reads of a request besides its body: the fingerprint of a request that should
# have been refused holds these (credentials only as present, never their value).
_API_HEADERS = frozenset({"anthropic-version", "anthropic-beta", "content-type"})
_CREDENTIALS = frozenset({"x-api-key", "authorization"})


def _credential(value: str) -> str:
    """A credential header as present (with its scheme, `Bearer`), never its secret."""
    scheme, _, secret = value.strip().partition(" ")
    return f"{scheme} <set>" if secret else "<set>" if value.strip() else "<empty>"


def refusal_key(request: Any) -> str | None:
    """The key of a request that should have been refused and was answered: the request itself
    (method, path, query, the headers the API reads, the body with `stream` left out, its keys
    sorted), fingerprinted. The missing check is what groups such failures, and the request is
    what names it exactly: properties that send the same invalid request (ERR-001's and
    ERR-023's body without max_tokens) meet the same missing check, whatever their rules say,
    streamed or not; a rule's other requests are other checks. None when the request is not
    known (the rule and sub-case key it then)."""
    if request is None:
        return None
    try:
        content = bytes(request.content)
    except Exception:  # a request whose body was never read (a streamed upload)
        return None
    body = _parsed(content)
    if isinstance(body, dict):
        body = {k: v for k, v in body.items() if not (k == "stream" and isinstance(v, bool))}
    sent = content if body is _NOT_JSON else json.dumps(body, sort_keys=True).encode()
    headers = sorted(
        (name, _credential(value) if name in _CREDENTIALS else value)
        for name, value in ((k.lower(), v) for k, v in request.headers.items())
        if name in _API_HEADERS or name in _CREDENTIALS
    )
    head = repr((request.method, request.url.path, request.url.query, headers)).encode()
    digest = hashlib.sha256(head + b"\0" + sent).hexdigest()[:16]
    return f"{REFUSAL_KEY}{request.method} {request.url.path} {digest}"
