"""The server under test and the two ways we drive it.

- `Target.sdk()`: the official `anthropic` SDK (strict response validation, no retries),
  what users experience.
- `Target.raw()`: plain httpx, for the wire itself and for requests the SDK refuses to send.

Both go through a recording transport, so every exchange of the running property (request,
status, headers, body or raw stream bytes) is kept as evidence, with a curl line.
"""

from __future__ import annotations

import contextlib
import json
import shlex
import time
import zlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal
from urllib.parse import urlsplit

import anthropic
import httpx
import httpx2

from conformance.profile import Profile
from conformance.versions import API_VERSIONS, CURRENT_VERSION, LEGACY_VERSION

__all__ = [
    "API_VERSION",
    "API_VERSIONS",
    "CURRENT_VERSION",
    "LEGACY_VERSION",
    "Exchange",
    "Recorder",
    "Target",
    "TargetConfig",
]

# What the installed SDK sends: a run's default (conformance/versions.py).
API_VERSION: str = getattr(getattr(anthropic, "_constants", None), "ANTHROPIC_API_VERSION", API_VERSIONS[-1])
PROPERTY_HEADER = "x-plumbline-property"  # lets server logs (and our fault proxy) see which property
REDACTED = "<redacted>"
MAX_EVIDENCE_BYTES = 64 * 1024

AuthHeader = Literal["x-api-key", "bearer"]


@dataclass(frozen=True, slots=True)
class TargetConfig:
    url: str
    model: str
    api_key: str | None = None
    auth_header: AuthHeader = "x-api-key"
    profile: Profile = field(default_factory=Profile)
    # A key of another workspace of the same target (--second-api-key): the ISO-* properties.
    second_api_key: str | None = None
    timeout: float = 120.0
    api_version: str = API_VERSION

    @property
    def slug(self) -> str:
        """A directory-safe name for reports: `127.0.0.1-8000`."""
        if self.profile.name:
            return self.profile.name
        parts = urlsplit(self.url)
        return f"{parts.hostname or 'target'}-{parts.port or parts.scheme}"

    def auth_headers(self, *, second: bool = False) -> dict[str, str]:
        """The credential headers: the run's key, or (`second`) the other workspace's."""
        key = self.second_api_key if second else self.api_key
        if key is None:
            return {}
        if self.auth_header == "bearer":
            return {"authorization": f"Bearer {key}"}
        return {"x-api-key": key}


@dataclass(slots=True)
class Exchange:
    """One request and what came back (the body as raw bytes, streams included)."""

    method: str
    url: str
    request_headers: dict[str, str]
    request_body: bytes
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    response_body: bytearray = field(default_factory=bytearray)
    started: float = field(default_factory=time.monotonic)
    elapsed: float | None = None
    error: str | None = None

    def curl(self) -> str:
        """A shell line that replays the request (secrets replaced by $PLUMBLINE_API_KEY)."""
        words = ["curl", "-sS", "-N", "-X", self.method, shlex.quote(self.url)]
        for name, value in self.request_headers.items():
            if name in ("content-length", "host", "accept-encoding", "connection"):
                continue
            value = _curl_secret(name, value)
            words += [
                "-H",
                shlex.quote(f"{name}: {value}") if "$" not in value else f'"{name}: {value}"',
            ]
        if self.request_body:
            words += ["--data-binary", shlex.quote(self.request_body.decode("utf-8", "replace"))]
        return " ".join(words)

    @classmethod
    def from_evidence(cls, evidence: Mapping[str, Any]) -> Exchange:
        """An exchange made elsewhere (a feature probe, before the run), back from its evidence,
        so that the property judging it keeps it as its own (secrets stay redacted)."""
        request, response = evidence["request"], evidence["response"]

        def raw(body: Any) -> bytes:
            return body.encode() if isinstance(body, str) else json.dumps(body).encode()

        return cls(
            method=str(request["method"]),
            url=str(request["url"]),
            request_headers=dict(request.get("headers") or {}),
            request_body=raw(request.get("body", "")),
            status=response.get("status"),
            response_headers=dict(response.get("headers") or {}),
            response_body=bytearray(raw(response.get("body", ""))),
            elapsed=evidence.get("elapsed_s"),
            error=evidence.get("transport_error"),
        )

    def as_evidence(self) -> dict[str, Any]:
        body = bytes(self.response_body[:MAX_EVIDENCE_BYTES])
        return {
            "request": {
                "method": self.method,
                "url": self.url,
                "headers": {k: _redact(k, v) for k, v in self.request_headers.items()},
                "body": _decode(self.request_body[:MAX_EVIDENCE_BYTES]),
            },
            "response": {
                "status": self.status,
                "headers": self.response_headers,
                "body": _decode(body),
                "truncated": len(self.response_body) > MAX_EVIDENCE_BYTES,
            },
            "elapsed_s": None if self.elapsed is None else round(self.elapsed, 3),
            "transport_error": self.error,
            "curl": self.curl(),
        }


def _redact(name: str, value: str) -> str:
    lowered = name.lower()
    if lowered == "x-api-key":
        return REDACTED
    if lowered == "authorization":
        return value.split(" ", 1)[0] + " " + REDACTED
    return value


def _curl_secret(name: str, value: str) -> str:
    lowered = name.lower()
    if lowered == "x-api-key":
        return "$PLUMBLINE_API_KEY"
    if lowered == "authorization":
        return value.split(" ", 1)[0] + " $PLUMBLINE_API_KEY"
    return value


def _decode(data: bytes) -> Any:
    text = data.decode("utf-8", "replace")
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


class Recorder:
    """Exchanges of the current property, newest last."""

    def __init__(self) -> None:
        self.exchanges: list[Exchange] = []
        self.property_id: str | None = None

    def reset(self, property_id: str | None) -> None:
        self.exchanges = []
        self.property_id = property_id


# The suite asks for bodies as they are: what it records (and judges after the fact: ERR-031,
# the evidence) is then what was read. A target that compresses anyway is recorded decoded.
UNCOMPRESSED = {"accept-encoding": "identity"}


def _decoder(headers: Mapping[str, str]) -> Callable[[bytes], bytes]:
    """Chunk by chunk, what the recorder keeps of a body sent with a gzip or deflate
    Content-Encoding: the decoded bytes (another encoding is kept as it came)."""
    coding = next((v for k, v in headers.items() if k.lower() == "content-encoding"), "").strip().lower()
    if coding not in ("gzip", "deflate"):
        return lambda chunk: chunk
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS if coding == "gzip" else zlib.MAX_WBITS)

    def decode(chunk: bytes) -> bytes:
        try:
            return inflater.decompress(chunk)
        except zlib.error:
            return chunk

    return decode


def _recording_transport(http: ModuleType, recorder: Recorder) -> Any:
    """A transport for `http` (httpx for the raw client, httpx2 for the SDK, which uses that
    fork) that records each exchange into `recorder`, stream bytes included."""

    class RecordingStream(http.SyncByteStream):  # type: ignore[name-defined,misc]
        def __init__(self, inner: Any, exchange: Exchange) -> None:
            self._inner = inner
            self._exchange = exchange

        def __iter__(self) -> Iterator[bytes]:
            decoder = _decoder(self._exchange.response_headers)
            try:
                for chunk in self._inner:
                    if len(self._exchange.response_body) < MAX_EVIDENCE_BYTES * 4:
                        self._exchange.response_body.extend(decoder(chunk))
                    yield chunk
            finally:
                self._exchange.elapsed = time.monotonic() - self._exchange.started

        def close(self) -> None:
            self._inner.close()

    class RecordingTransport(http.BaseTransport):  # type: ignore[name-defined,misc]
        def __init__(self) -> None:
            self._inner = http.HTTPTransport(retries=0)

        def handle_request(self, request: Any) -> Any:
            if recorder.property_id:
                request.headers[PROPERTY_HEADER] = recorder.property_id
            body = request.read()
            for attempt in (1, 2):
                exchange = Exchange(
                    method=request.method,
                    url=str(request.url),
                    request_headers=dict(request.headers),
                    request_body=body,
                )
                recorder.exchanges.append(exchange)
                try:
                    response = self._inner.handle_request(request)
                    break
                except (http.RemoteProtocolError, http.ReadError) as exc:
                    # Closed before the first byte of an answer: most often a keep-alive
                    # connection the target dropped while idle. Retried once on a new one;
                    # a second close is the target's (the plugin judges it).
                    exchange.error = f"{type(exc).__name__}: {exc}"
                    if attempt == 2:
                        raise
                except http.TransportError as exc:
                    exchange.error = f"{type(exc).__name__}: {exc}"
                    raise
            exchange.status = response.status_code
            exchange.response_headers = dict(response.headers)
            return http.Response(
                status_code=response.status_code,
                headers=response.headers,
                stream=RecordingStream(response.stream, exchange),
                extensions=response.extensions,
            )

        def close(self) -> None:
            self._inner.close()

    return RecordingTransport()


class Target:
    """Clients bound to one target, recording into one recorder."""

    def __init__(self, config: TargetConfig) -> None:
        self.config = config
        self.recorder = Recorder()
        timeout = httpx.Timeout(config.timeout, connect=10.0)
        self._http = httpx.Client(
            base_url=config.url.rstrip("/"),
            transport=_recording_transport(httpx, self.recorder),
            timeout=timeout,
            headers=UNCOMPRESSED,
        )
        self._sdk_http = httpx2.Client(
            transport=_recording_transport(httpx2, self.recorder),
            timeout=httpx2.Timeout(config.timeout, connect=10.0),
        )
        # The SDK refuses to start without a credential; an open target ignores it.
        credential = config.api_key or "unused"
        bearer = config.auth_header == "bearer" and config.api_key is not None
        self._sdk = anthropic.Anthropic(
            base_url=config.url.rstrip("/"),
            api_key=None if bearer else credential,
            auth_token=credential if bearer else None,
            http_client=self._sdk_http,
            # The SDK's own version header gives way to the run's: both clients speak one version.
            default_headers={"anthropic-version": config.api_version, **UNCOMPRESSED},
            max_retries=0,
            timeout=config.timeout,
            _strict_response_validation=True,
        )

        # Whether the same request gives identical answers: the profile's word, or the plugin's
        # probe at the start of the run (see plugin.probe_determinism).
        self.deterministic = bool(config.profile.deterministic)
        # What the target takes at the version judged, found before the run (features
        # `sampling_parameters` and `prefill`): no property sends `temperature` or a prefill
        # to a target that refuses them, unless that refusal is what it judges.
        self.greedy = False
        self.prefill = False
        # The way each optional feature was found served (features.py: the set-up its probe saw
        # answered, e.g. `tools: "tool"` where tool_choice any is refused): the properties set
        # their requests up the same way, so one refused set-up is one property's finding.
        self.ways: dict[str, str] = {}
        # A request the suite gave up on (no answer in time, a stream closed before its end): a
        # target that does not notice keeps working on it, and the next property would wait
        # behind it. `settle_abandoned` waits it out before the next property starts.
        self.abandoned: str | None = None

    @property
    def model(self) -> str:
        return self.config.model

    def greedy_fields(self) -> dict[str, Any]:
        """`temperature: 0` where the target takes it (reproducible answers), else nothing: the
        request samples with the defaults, as every request does under 2026-10-21."""
        return {"temperature": 0} if self.greedy else {}

    def alive(self, timeout: float = 10.0) -> bool:
        """Whether the target answers anything at all (any status) within `timeout`: tells a
        request the target would not answer from a target that is down. Not recorded."""
        try:
            httpx.get(f"{self.config.url.rstrip('/')}/v1/models", headers=self.headers(), timeout=timeout)
        except httpx.TransportError:
            return False
        return True

    def sdk(self) -> anthropic.Anthropic:
        return self._sdk

    def headers(self, *, auth: bool = True, version: bool = True, second: bool = False) -> dict[str, str]:
        """The headers a well-behaved raw client sends (`second`: with the other workspace's key)."""
        headers = {"content-type": "application/json"}
        if version:
            headers["anthropic-version"] = self.config.api_version
        if auth:
            headers.update(self.config.auth_headers(second=second))
        return headers

    def request(
        self,
        method: str,
        path: str,
        *,
        json_body: Any = None,
        content: bytes | None = None,
        headers: Mapping[str, str] | None = None,
        params: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """A raw request; `headers` replace the defaults of `self.headers()` entirely."""
        if json_body is not None:
            content = json.dumps(json_body).encode()
        try:
            return self._http.request(
                method,
                path,
                content=content,
                headers=dict(self.headers() if headers is None else headers),
                params=params,
            )
        except httpx.TimeoutException:
            self.abandoned = f"{method} {path} (no answer in time)"
            raise

    @contextlib.contextmanager
    def stream(
        self, path: str, body: Any, *, headers: Mapping[str, str] | None = None
    ) -> Iterator[httpx.Response]:
        """A streaming POST: the caller reads `iter_raw()`; closed on exit."""
        request = self._http.build_request(
            "POST",
            path,
            content=json.dumps(body).encode(),
            headers=dict(self.headers() if headers is None else headers),
        )
        try:
            response = self._http.send(request, stream=True)
        except httpx.TimeoutException:
            self.abandoned = f"POST {path} (no answer in time)"
            raise
        try:
            yield response
        except httpx.TimeoutException:
            self.abandoned = f"POST {path} (the stream stopped in time)"
            raise
        finally:
            if response.status_code == 200 and not response.is_stream_consumed and self.abandoned is None:
                self.abandoned = f"POST {path} (a stream closed before its end)"
            response.close()

    def post_oversized(
        self, path: str, body: bytes, *, budget: float, answer_within: float
    ) -> httpx.Response:
        """POST a body too large to be taken (a 413 is expected) on a connection of its own:
        sent in 1 MB chunks for at most `budget` seconds, the answer awaited at most
        `answer_within` seconds after that and read only as far as its first 64 KB, then the
        connection closed, so a target that reads the upload slowly, or parses it, costs one
        bounded wait. Recorded as evidence, the body summarised (not 33 MB in a curl line)."""
        started = time.monotonic()
        headers = {**self.headers(), "connection": "close"}
        if self.recorder.property_id:
            headers[PROPERTY_HEADER] = self.recorder.property_id
        exchange = Exchange("POST", f"{self.config.url.rstrip('/')}{path}", dict(headers), b"")
        exchange.request_body = f"<{len(body)} bytes: {body[:80].decode('utf-8', 'replace')}…>".encode()
        self.recorder.exchanges.append(exchange)

        def chunks() -> Iterator[bytes]:
            for offset in range(0, len(body), 1 << 20):
                if time.monotonic() - started > budget:
                    raise httpx.WriteTimeout(f"the target took more than {budget:g} s to read the body")
                yield body[offset : offset + (1 << 20)]

        timeout = httpx.Timeout(budget, connect=10.0, read=answer_within)
        with httpx.Client(base_url=self.config.url.rstrip("/"), timeout=timeout) as client:
            try:
                with client.stream("POST", path, content=chunks(), headers=headers) as answer:
                    exchange.status = answer.status_code
                    exchange.response_headers = dict(answer.headers)
                    for piece in answer.iter_raw():
                        exchange.response_body.extend(piece)
                        if len(exchange.response_body) >= MAX_EVIDENCE_BYTES:
                            break
            except httpx.TransportError as exc:
                exchange.error = f"{type(exc).__name__}: {exc}"
                if isinstance(exc, httpx.TimeoutException):  # it may still be reading, or parsing
                    self.abandoned = f"POST {path} ({len(body)} bytes; no answer in time)"
                raise
            finally:
                exchange.elapsed = time.monotonic() - started
        return httpx.Response(
            exchange.status or 0,
            headers=exchange.response_headers,
            content=bytes(exchange.response_body),
            request=httpx.Request("POST", exchange.url),
        )

    def settle_abandoned(self) -> tuple[str, float | None] | None:
        """After a request the suite gave up on: wait until the target answers a one-token
        message (behind the abandoned request, on a target that serves one at a time), so that
        the next property does not wait behind it, nor measure it. (what, seconds waited or
        None if no answer came within the timeout); None when nothing was abandoned. Not
        recorded."""
        if self.abandoned is None:
            return None
        what, self.abandoned = self.abandoned, None
        body = {"model": self.model, "max_tokens": 1, "messages": [{"role": "user", "content": "Hi"}]}
        started = time.monotonic()
        try:
            httpx.post(
                f"{self.config.url.rstrip('/')}/v1/messages",
                json=body,
                headers=self.headers(),
                timeout=self.config.timeout,
            )
        except httpx.TransportError:
            return what, None
        return what, time.monotonic() - started

    def settle(self, within: float) -> float | None:
        """Wait until the target answers a cheap request again (after one that loaded it):
        seconds waited, or None if it did not answer within `within`."""
        started = time.monotonic()
        while time.monotonic() - started < within:
            if self.alive(timeout=max(1.0, within - (time.monotonic() - started))):
                return time.monotonic() - started
            time.sleep(0.5)
        return None

    def close(self) -> None:
        self._sdk.close()
        self._http.close()
        self._sdk_http.close()
