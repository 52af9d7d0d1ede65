"""The six Message Batches endpoints in process, on the scripted engine (fast, deterministic):
shapes, statuses, counts, errors, cancellation, refusals. Over time (expiry, restarts,
archiving): test_lifecycle.py. Over a real socket on MLX, through the official SDK:
test_batches_e2e.py."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest

from reference_server.batches import validation
from reference_server.batches.processor import BATCH_PRIORITY
from reference_server.engine.errors import EngineOverloadedError
from reference_server.engine.scripted import ScriptedEngine

from .conftest import (
    MODEL,
    REPLY,
    assert_error,
    batch_body,
    batch_client,
    batches_of,
    params,
    parse_time,
    results_of,
    slow_engine,
    wait_until_ended,
)

BATCH_FIELDS = {
    "id",
    "type",
    "processing_status",
    "request_counts",
    "created_at",
    "expires_at",
    "ended_at",
    "cancel_initiated_at",
    "archived_at",
    "results_url",
}


def test_create_answers_a_new_in_progress_batch(tmp_path):
    with batch_client(tmp_path, slow_engine()) as client:
        response = client.post("/v1/messages/batches", json=batch_body(3))
        assert response.status_code == 200
        assert response.headers["request-id"].startswith("req_")
        batch = response.json()
    assert set(batch) == BATCH_FIELDS
    assert batch["id"].startswith("msgbatch_")
    assert batch["type"] == "message_batch"
    assert batch["processing_status"] == "in_progress"
    assert batch["request_counts"] == {
        "processing": 3,
        "succeeded": 0,
        "errored": 0,
        "canceled": 0,
        "expired": 0,
    }
    assert (batch["ended_at"], batch["cancel_initiated_at"], batch["archived_at"], batch["results_url"]) == (
        None,
        None,
        None,
        None,
    )
    assert parse_time(batch["expires_at"]) - parse_time(batch["created_at"]) == timedelta(hours=24)


def test_a_batch_runs_to_the_end_and_its_results_equal_plain_messages(tmp_path):
    with batch_client(tmp_path) as client:
        body = batch_body(3, temperature=0, max_tokens=5)
        batch_id = client.post("/v1/messages/batches", json=body).json()["id"]
        batch = wait_until_ended(client, batch_id)
        assert batch["request_counts"] == {
            "processing": 0,
            "succeeded": 3,
            "errored": 0,
            "canceled": 0,
            "expired": 0,
        }
        assert parse_time(batch["ended_at"]) >= parse_time(batch["created_at"])
        assert batch["results_url"] == f"http://testserver.local/v1/messages/batches/{batch_id}/results"
        results = results_of(client, batch)
        assert set(results) == {"req-0", "req-1", "req-2"}
        for i in range(3):
            plain = client.post(
                "/v1/messages", json=params(f"Question {i}", temperature=0, max_tokens=5)
            ).json()
            result = results[f"req-{i}"]
            assert result["type"] == "succeeded"
            assert result["message"]["id"].startswith("msg_")
            assert result["message"]["id"] != plain["id"]
            assert {**result["message"], "id": None} == {**plain, "id": None}


def test_counts_stay_processing_until_the_whole_batch_has_ended(tmp_path):
    with batch_client(tmp_path, slow_engine(0.02)) as client:
        batch_id = client.post("/v1/messages/batches", json=batch_body(6)).json()["id"]
        store = batches_of(client).store
        deadline = time.monotonic() + 10
        while store.get(batch_id).done == 0:  # some results are written ...
            assert time.monotonic() < deadline
            time.sleep(0.01)
        stored = store.get(batch_id)
        shown = client.get(f"/v1/messages/batches/{batch_id}").json()
        assert stored.status == "in_progress"  # two of six cannot have finished yet
        # ... but the batch shows none of them yet.
        assert shown["request_counts"]["processing"] == 6
        assert shown["request_counts"]["succeeded"] == 0
        wait_until_ended(client, batch_id)  # checks the same at every poll


def test_an_invalid_request_is_errored_with_the_messages_error_while_the_rest_succeed(tmp_path):
    requests = [
        {"custom_id": "good", "params": params()},
        {
            "custom_id": "no-max-tokens",
            "params": {"model": MODEL, "messages": [{"role": "user", "content": "x"}]},
        },
        {"custom_id": "unknown-model", "params": params(model="no-such-model")},
        {"custom_id": "streamed", "params": params(stream=True)},
        {"custom_id": "prewarm", "params": params(max_tokens=0)},
        {"custom_id": "empty", "params": params(messages=[])},
    ]
    with batch_client(tmp_path) as client:
        batch_id = client.post("/v1/messages/batches", json={"requests": requests}).json()["id"]
        batch = wait_until_ended(client, batch_id)
        assert batch["request_counts"]["succeeded"] == 1
        assert batch["request_counts"]["errored"] == 5
        results = results_of(client, batch)
        plain = client.post("/v1/messages", json=requests[2]["params"])
    assert results["good"]["type"] == "succeeded"
    expected = {
        "no-max-tokens": ("invalid_request_error", "max_tokens: "),
        "unknown-model": ("not_found_error", plain.json()["error"]["message"]),
        "streamed": ("invalid_request_error", "stream: "),
        "prewarm": ("invalid_request_error", "max_tokens: "),
        "empty": ("invalid_request_error", "messages: "),
    }
    for custom_id, (kind, message) in expected.items():
        result = results[custom_id]
        assert set(result) == {"type", "error"}
        assert result["type"] == "errored"
        envelope = result["error"]
        assert set(envelope) == {"type", "error", "request_id"}
        assert envelope["type"] == "error"
        assert envelope["request_id"].startswith("req_")
        assert envelope["error"]["type"] == kind
        assert envelope["error"]["message"].startswith(message)


def test_an_engine_failure_is_an_errored_api_error(tmp_path):
    engine = ScriptedEngine(REPLY, model_id=MODEL, context_window=256, fail_after=3)
    with batch_client(tmp_path, engine) as client:
        batch = wait_until_ended(client, client.post("/v1/messages/batches", json=batch_body(1)).json()["id"])
        result = results_of(client, batch)["req-0"]
    assert result["error"]["error"]["type"] == "api_error"


def test_batch_requests_run_at_background_priority(tmp_path):
    engine = ScriptedEngine(REPLY, model_id=MODEL, context_window=256)
    with batch_client(tmp_path, engine) as client:
        wait_until_ended(client, client.post("/v1/messages/batches", json=batch_body(2)).json()["id"])
        assert [r.priority for r in engine.requests] == [BATCH_PRIORITY] * 2
        client.post("/v1/messages", json=params())
        assert engine.requests[-1].priority == 0
    assert BATCH_PRIORITY < 0


class RefusingEngine(ScriptedEngine):
    """Full (every start is a 529) until `refusing` is cleared; counts its refusals."""

    def __init__(self) -> None:
        super().__init__(REPLY, model_id=MODEL, context_window=256)
        self.refusing, self.refused = True, 0

    async def start(self, request):
        if self.refusing:
            self.refused += 1
            raise EngineOverloadedError(1, retry_after=1)
        return await super().start(request)


def test_an_overloaded_engine_delays_batch_requests_without_failing_them(tmp_path):
    engine = RefusingEngine()
    with batch_client(tmp_path, engine) as client:
        batch_id = client.post("/v1/messages/batches", json=batch_body(2)).json()["id"]
        deadline = time.monotonic() + 5
        while engine.refused < 2:  # both requests were refused ...
            assert time.monotonic() < deadline
            time.sleep(0.01)
        store = batches_of(client).store
        assert store.get(batch_id).done == 0  # ... and neither failed: they wait (retry-after)
        engine.refusing = False
        batch = wait_until_ended(client, batch_id, timeout=10)
    assert batch["request_counts"]["succeeded"] == 2


def test_cancel_interrupts_running_requests_and_cancels_the_rest(tmp_path):
    with batch_client(tmp_path, slow_engine(0.5)) as client:
        batch_id = client.post("/v1/messages/batches", json=batch_body(6)).json()["id"]
        canceled = client.post(f"/v1/messages/batches/{batch_id}/cancel")
        assert canceled.status_code == 200
        assert canceled.json()["processing_status"] == "canceling"
        assert canceled.json()["cancel_initiated_at"] is not None
        batch = wait_until_ended(client, batch_id, timeout=5)
        assert batch["request_counts"] == {
            "processing": 0,
            "succeeded": 0,
            "errored": 0,
            "canceled": 6,
            "expired": 0,
        }
        assert batch["cancel_initiated_at"] == canceled.json()["cancel_initiated_at"]
        assert {r["type"] for r in results_of(client, batch).values()} == {"canceled"}
        # Canceling an ended batch returns it unchanged.
        again = client.post(f"/v1/messages/batches/{batch_id}/cancel?beta=true")
        assert again.status_code == 200
        assert again.json() == batch


def test_delete_only_once_ended(tmp_path):
    with batch_client(tmp_path, slow_engine(0.5)) as client:
        batch_id = client.post("/v1/messages/batches", json=batch_body(1)).json()["id"]
        assert_error(client.delete(f"/v1/messages/batches/{batch_id}"), 400, "invalid_request_error")
        assert_error(client.get(f"/v1/messages/batches/{batch_id}/results"), 400, "invalid_request_error")
        client.post(f"/v1/messages/batches/{batch_id}/cancel")
        wait_until_ended(client, batch_id)
        deleted = client.delete(f"/v1/messages/batches/{batch_id}")
        assert deleted.status_code == 200
        assert deleted.json() == {"id": batch_id, "type": "message_batch_deleted"}
        for method, path in [
            ("GET", ""),
            ("POST", "/cancel"),
            ("GET", "/results"),
            ("DELETE", ""),
        ]:
            assert_error(
                client.request(method, f"/v1/messages/batches/{batch_id}{path}"), 404, "not_found_error"
            )


def test_unknown_ids_are_404_not_found(tmp_path):
    with batch_client(tmp_path) as client:
        for method, path in [("GET", ""), ("POST", "/cancel"), ("GET", "/results"), ("DELETE", "")]:
            response = client.request(method, f"/v1/messages/batches/msgbatch_nope{path}?beta=true")
            assert_error(response, 404, "not_found_error")


def test_the_list_is_newest_first_and_paginates(tmp_path):
    with batch_client(tmp_path) as client:
        ids = [client.post("/v1/messages/batches", json=batch_body(1)).json()["id"] for _ in range(5)]
        newest = ids[::-1]
        page = client.get("/v1/messages/batches").json()
        assert [b["id"] for b in page["data"]] == newest
        assert (page["has_more"], page["first_id"], page["last_id"]) == (False, newest[0], newest[-1])
        page = client.get("/v1/messages/batches", params={"limit": 2}).json()
        assert ([b["id"] for b in page["data"]], page["has_more"]) == (newest[:2], True)
        page = client.get("/v1/messages/batches", params={"limit": 2, "after_id": page["last_id"]}).json()
        assert ([b["id"] for b in page["data"]], page["has_more"]) == (newest[2:4], True)
        page = client.get(
            "/v1/messages/batches?beta=true", params={"limit": 3, "before_id": newest[3]}
        ).json()
        assert ([b["id"] for b in page["data"]], page["has_more"]) == (newest[:3], False)
        for query in ({"limit": 0}, {"limit": 1001}, {"limit": "x"}, {"after_id": "msgbatch_nope"}):
            assert_error(client.get("/v1/messages/batches", params=query), 400, "invalid_request_error")
        both = {"after_id": ids[0], "before_id": ids[1]}
        assert_error(client.get("/v1/messages/batches", params=both), 400, "invalid_request_error")


def test_beta_twins_answer_the_same(tmp_path):
    with batch_client(tmp_path) as client:
        headers = {"anthropic-beta": "message-batches-2024-09-24"}
        created = client.post("/v1/messages/batches?beta=true", json=batch_body(1), headers=headers).json()
        batch = wait_until_ended(client, created["id"])
        assert client.get(f"/v1/messages/batches/{created['id']}?beta=true", headers=headers).json() == batch
        listed = client.get("/v1/messages/batches?beta=true", headers=headers).json()
        assert listed["data"] == [batch]
        plain = client.get(batch["results_url"])
        beta = client.get(batch["results_url"] + "?beta=true", headers=headers)
        assert beta.status_code == 200
        assert beta.text == plain.text
        deleted = client.delete(f"/v1/messages/batches/{created['id']}?beta=true", headers=headers)
        assert deleted.json() == {"id": created["id"], "type": "message_batch_deleted"}


def test_create_refusals(tmp_path):
    with batch_client(tmp_path) as client:
        bad = [
            {"requests": []},
            {"requests": [{"custom_id": "a b", "params": params()}]},
            {"requests": [{"custom_id": "a", "params": params()}, {"custom_id": "a", "params": params()}]},
        ]
        for body in bad:
            assert_error(client.post("/v1/messages/batches", json=body), 400, "invalid_request_error")
        no_version = client.post(
            "/v1/messages/batches", json=batch_body(1), headers={"anthropic-version": ""}
        )
        assert_error(no_version, 400, "invalid_request_error")
        assert client.get("/v1/messages/batches").json()["data"] == []  # nothing was created


def test_the_batch_body_limit_is_its_own(tmp_path, monkeypatch):
    # The app-wide limit (the Messages endpoints' 32 MB) does not bound batches ...
    with batch_client(tmp_path, max_body_bytes=1000) as client:
        large = batch_body(20)
        assert len(str(large)) > 1000
        assert client.post("/v1/messages/batches", json=large).status_code == 200
        # ... their own (256 MB, here made small) does.
        monkeypatch.setattr(validation, "MAX_BATCH_BODY_BYTES", 1000)
        assert_error(client.post("/v1/messages/batches", json=large), 413, "request_too_large")


@pytest.mark.parametrize("suffix", ["", "?beta=true"])
def test_models_say_batches_are_supported(tmp_path, suffix):
    with batch_client(tmp_path) as client:
        info = client.get(f"/v1/models/{MODEL}{suffix}").json()
    assert info["capabilities"]["batch"] == {"supported": True}
