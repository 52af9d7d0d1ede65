from __future__ import annotations

import json
import shlex
import subprocess
import sys
from typing import Any

import anthropic
import pytest

from conformance.profile import load_profile
from conformance.wire.target import Exchange, Target, TargetConfig


def exchange() -> Exchange:
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "it's"}]}).encode()
    return Exchange(
        method="POST",
        url="http://127.0.0.1:8000/v1/messages",
        request_headers={
            "x-api-key": "sk-secret",
            "authorization": "Bearer sk-secret",
            "content-type": "application/json",
            "content-length": "9",
        },
        request_body=body,
    )


def test_evidence_redacts_credentials():
    evidence = exchange().as_evidence()
    dumped = json.dumps(evidence)
    assert "sk-secret" not in dumped
    assert evidence["request"]["headers"]["authorization"] == "Bearer <redacted>"
    assert evidence["request"]["body"]["model"] == "m"


def test_curl_line_replays_the_request_without_the_secret():
    line = exchange().curl()
    assert "sk-secret" not in line
    assert "$PLUMBLINE_API_KEY" in line
    words = shlex.split(line.replace("$PLUMBLINE_API_KEY", "KEY"))
    assert words[:6] == ["curl", "-sS", "-N", "-X", "POST", "http://127.0.0.1:8000/v1/messages"]
    body = json.loads(words[words.index("--data-binary") + 1])
    assert body["messages"][0]["content"] == "it's"
    assert "content-length: 9" not in line


def test_slug_and_auth_headers():
    config = TargetConfig(url="http://127.0.0.1:8123", model="m", api_key="k", auth_header="bearer")
    assert config.slug == "127.0.0.1-8123"
    assert config.auth_headers() == {"authorization": "Bearer k"}
    assert TargetConfig(url="http://h:1", model="m").auth_headers() == {}


def test_profile_loading(tmp_path):
    path = tmp_path / "p.toml"
    path.write_text(
        'name = "x"\ndeterministic = true\nbaseline = "b.toml"\n[features]\ntools = true\nimages = false\n'
    )
    profile = load_profile(path)
    assert (profile.name, profile.deterministic, profile.features) == ("x", True, frozenset({"tools"}))
    assert profile.absent == frozenset({"images"})
    assert [profile.declares(f) for f in ("tools", "images", "thinking")] == [True, False, None]
    assert profile.baseline == (tmp_path / "b.toml").resolve()
    path.write_text("deterministic = false\ngenerated_budget_seconds = 5\n")
    assert (load_profile(path).deterministic, load_profile(path).generated_budget_seconds) == (False, 5.0)
    path.write_text('name = "y"\n')
    assert load_profile(path).deterministic is None  # not said: the run probes
    path.write_text("colour = 1\n")
    with pytest.raises(ValueError, match="colour"):
        load_profile(path)


def test_list_prints_the_catalogue_without_a_target():
    done = subprocess.run(
        [sys.executable, "-m", "conformance", "--list"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        env={"COLUMNS": "250", "PATH": ""},
    )
    assert "STREAM-002" in done.stdout
    assert "MUST" in done.stdout
    assert "^[a-zA-Z0-9_-]{1,128}$" in done.stdout  # requirement text is not read as markup


def test_an_exchange_comes_back_from_its_evidence():
    made = Exchange(
        "POST",
        "http://t/v1/messages",
        {"x-api-key": "secret", "content-type": "application/json"},
        b'{"model": "m"}',
        status=500,
        response_headers={"content-type": "application/json"},
        response_body=bytearray(b'{"error": {"message": "boom"}}'),
        elapsed=0.25,
    )
    again = Exchange.from_evidence(made.as_evidence())
    assert again.as_evidence() == made.as_evidence()
    assert "secret" not in json.dumps(again.as_evidence())


@pytest.mark.parametrize("version", ["2023-06-01", "2026-10-21"])
def test_the_raw_client_and_the_sdk_send_the_version_judged(version):
    """One version per run: the SDK's own default header gives way to `--api-version`."""
    from conformance.wire.target import Target

    from .fault_proxy import running_proxy

    seen: list[str | None] = []

    async def app(scope, receive, send):
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        seen.append(dict(scope["headers"]).get(b"anthropic-version", b"").decode() or None)
        body = json.dumps({"type": "error", "error": {"type": "api_error", "message": "x"}}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 500,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    with running_proxy(app) as url:
        target = Target(TargetConfig(url=url, model="m", api_version=version))
        target.request("POST", "/v1/messages", json_body={})
        with pytest.raises(anthropic.InternalServerError):
            target.sdk().messages.create(model="m", max_tokens=1, messages=[{"role": "user", "content": "x"}])
        target.close()
    assert seen == [version, version]


def test_bodies_are_asked_for_uncompressed_and_recorded_decoded():
    """What the suite judges after the fact (ERR-031, evidence) is what it read: it asks for
    bodies as they are, and a target that gzips them anyway is recorded decoded (LiteLLM's
    gzipped 500s read as 'not JSON' to ERR-031 before)."""
    import gzip

    from .fault_proxy import read_body, running_proxy

    seen: list[dict[str, str]] = []

    async def gzipping(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        await read_body(receive)
        seen.append({k.decode(): v.decode() for k, v in scope["headers"]})
        body = gzip.compress(
            json.dumps({"type": "error", "error": {"type": "api_error", "message": "x"}}).encode()
        )
        headers = [(b"content-type", b"application/json"), (b"content-encoding", b"gzip")]
        await send({"type": "http.response.start", "status": 500, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    with running_proxy(gzipping) as url:
        target = Target(TargetConfig(url=url, model="m"))
        response = target.request("POST", "/v1/messages", json_body={})
        target.close()
    assert response.json()["error"]["type"] == "api_error"
    assert json.loads(bytes(target.recorder.exchanges[-1].response_body))["error"]["message"] == "x"
    assert seen[0]["accept-encoding"] == "identity"
