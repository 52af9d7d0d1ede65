"""Does the target answer the same request the same way? Asked of the profile, else probed.

The comparison properties (stream ≡ create, generated streams ≡ their plain twins) need a
target that answers the same request the same way. Most users run `--target URL` with no
profile, so when the profile does not say, the run starts by sending the same non-streamed
request twice, greedy where the target takes `temperature: 0` (feature `sampling_parameters`),
else at its default sampling (2026-10-21 removes temperature; a server may still reproduce an
answer by seeding its sampler per request): identical answers make the target deterministic
for this run, at that sampling.
`deterministic = false` in a profile turns the comparisons off without probing.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from conformance.wire.drivers import LONG_ANSWER_PROMPT, message_body
from conformance.wire.target import Target

__all__ = ["Determinism", "probe_determinism"]

PROBE_MAX_TOKENS = 24
# What the run does when the probe cannot tell: the comparisons are not judged, never failed.
ASSUMED = (
    "; the suite assumed the target is not deterministic: the comparison properties (stream ≡ "
    "create, STREAM-012 and its kin) are SKIP; a profile with deterministic = true judges them"
)


@dataclass(frozen=True, slots=True)
class Determinism:
    deterministic: bool
    source: str  # "profile" or "probe"
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"deterministic": self.deterministic, "source": self.source, "detail": self.detail}


def probe_determinism(target: Target) -> Determinism:
    """The profile's word, or the result of sending the same request twice (greedy where the
    target takes it: `message_body`)."""
    declared = target.config.profile.deterministic
    if declared is not None:
        return Determinism(declared, "profile", f"the profile says deterministic = {str(declared).lower()}")
    body = message_body(
        target,
        max_tokens=PROBE_MAX_TOKENS,
        messages=[{"role": "user", "content": LONG_ANSWER_PROMPT}],
    )
    sampled = "greedy" if target.greedy else "default-sampled"
    answers = []
    for _ in range(2):
        try:
            response = target.request("POST", "/v1/messages", json_body=body)
            message = response.json() if response.status_code == 200 else None
        except (httpx.TransportError, ValueError) as exc:
            failed = f"the probe request failed ({type(exc).__name__}: {exc})"
            return Determinism(False, "probe", failed + ASSUMED)
        if not isinstance(message, dict):
            return Determinism(False, "probe", f"the probe request got HTTP {response.status_code}{ASSUMED}")
        answers.append((message.get("content"), message.get("stop_reason"), message.get("stop_sequence")))
    if answers[0] == answers[1]:
        return Determinism(True, "probe", f"the same {sampled} request, sent twice, got identical answers")
    return Determinism(False, "probe", f"the same {sampled} request, sent twice, got different answers")
