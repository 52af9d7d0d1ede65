"""Thinking signatures: sealed under the server's key, bound to the model, kept across restarts."""

from __future__ import annotations

import base64
import stat

import pytest

from reference_server.thinking import KEY_FILE, Sealed, ThinkingSigner


def test_a_signature_opens_to_what_was_sealed(tmp_path):
    signer = ThinkingSigner.in_directory(tmp_path)
    signature = signer.seal("m", "Let me think. 2 + 2 = 4.")
    assert signer.open("m", signature) == Sealed("summarized", "Let me think. 2 + 2 = 4.")
    assert signer.open("m", signer.seal("m", "hidden", "omitted")) == Sealed("omitted", "hidden")


def test_a_changed_signature_or_another_model_does_not_verify(tmp_path):
    signer = ThinkingSigner.in_directory(tmp_path)
    signature = signer.seal("m", "reasoning")
    raw = bytearray(base64.b64decode(signature))
    raw[-1] ^= 1
    assert signer.open("m", base64.b64encode(bytes(raw)).decode()) is None
    assert signer.open("other-model", signature) is None
    for junk in ("", "not base64!", base64.b64encode(b"\x01short").decode(), "AAAA"):
        assert signer.open("m", junk) is None


def test_another_key_does_not_verify(tmp_path):
    signature = ThinkingSigner.in_directory(tmp_path / "a").seal("m", "reasoning")
    assert ThinkingSigner.in_directory(tmp_path / "b").open("m", signature) is None


def test_the_key_is_created_once_private_and_survives_a_restart(tmp_path):
    signature = ThinkingSigner.in_directory(tmp_path).seal("m", "reasoning")
    key = tmp_path / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600
    assert len(key.read_bytes()) == 32
    assert ThinkingSigner.in_directory(tmp_path).open("m", signature) == Sealed("summarized", "reasoning")


def test_a_key_file_of_the_wrong_size_is_refused(tmp_path):
    (tmp_path / KEY_FILE).write_bytes(b"short")
    with pytest.raises(ValueError, match="32 bytes"):
        ThinkingSigner.in_directory(tmp_path)
