"""Choosing D, the case file and the current subjects (no store needed)."""

import pytest

import assurance.scope as scope
from assurance.cli._common import BitcaseError
from assurance.scope import BUNDLED_CASE, DeploymentChoice, choose_deployment, current_subjects, default_case_path
from evidence_db.views import DeploymentView

A = DeploymentView("sha256:" + "ab" * 32, {"device": "cpu"}, "2026-10-01T00:00:00Z")
B = DeploymentView("sha256:" + "ac" * 32, {"device": "cuda"}, "2026-10-02T00:00:00Z")


def test_latest_is_the_newest_in_the_store():
    assert choose_deployment("latest", [A, B]).digest == B.digest
    assert choose_deployment("latest", [A, B], why="asked").source == "asked: `latest`, the latest in the store"


def test_digest_prefixes_must_be_unique():
    assert choose_deployment("abab", [A, B]).digest == A.digest
    assert choose_deployment("sha256:acac", [A, B]).fields == {"device": "cuda"}
    with pytest.raises(BitcaseError, match="matches 2"):
        choose_deployment("a", [A, B])
    with pytest.raises(BitcaseError, match="no deployment configuration matches"):
        choose_deployment("ffff", [A, B])
    full = "sha256:" + "f" * 64
    assert choose_deployment(full, [A]) == DeploymentChoice(full, None, "--config (not in the store)")
    assert choose_deployment("abab", [A, B], why="pinned by the case").source == "pinned by the case"


def test_current_asks_the_engine_and_prefers_the_stored_fields(monkeypatch):
    engine = DeploymentChoice(A.digest, {"device": "cpu", "fresh": True}, "the engine's current configuration")
    monkeypatch.setattr(scope, "engine_deployment", lambda: (engine, ""))
    chosen = choose_deployment("current", [A, B])
    assert chosen.digest == A.digest and chosen.fields == {"device": "cpu"} and "engine" in chosen.source
    assert choose_deployment("current", [B]) == DeploymentChoice(
        engine.digest, engine.fields, "--config: `current`, the engine's current configuration")
    monkeypatch.setattr(scope, "engine_deployment", lambda: (None, "ImportError: no torch"))
    with pytest.raises(BitcaseError, match="no torch"):
        choose_deployment("current", [A])


def test_default_case_path(tmp_path):
    assert default_case_path(home=tmp_path, environ={}) == BUNDLED_CASE
    (tmp_path / "case.toml").write_text("")
    assert default_case_path(home=tmp_path, environ={}) == tmp_path / "case.toml"
    assert default_case_path(home=tmp_path, environ={"BITCASE_CASE": "/x/c.toml"}).as_posix() == "/x/c.toml"


def test_current_subjects_cover_code_and_the_model(mini_case):
    subjects = current_subjects(mini_case, {"weights_digest": "sha256:" + "9" * 64})
    assert subjects["model"] == "sha256:" + "9" * 64
    assert all(k.startswith("code:kernels/") or k.startswith("code:engine/") for k in subjects if k != "model")
    assert any(k.startswith("code:kernels/") for k in subjects)
