"""Fixtures for the comparison-protocol tests: a checkpoint config the fake engine matches, a D."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evidence_db.bundle import Deployment
from tests.compare.fake_engine import VOCAB_SIZE

FAKE_FACTORY = "tests.compare.fake_engine:open_fake"
WEIGHTS = "sha256:" + "ab" * 32


@pytest.fixture(scope="session")
def fake_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A config.json the engine's reader accepts, with the fake engine's vocabulary (no weights needed)."""
    d = tmp_path_factory.mktemp("fake-model")
    (d / "config.json").write_text(json.dumps({
        "architectures": ["LlamaForCausalLM"], "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": 2048, "rms_norm_eps": 1e-5, "torch_dtype": "float32"}))
    return d


@pytest.fixture(scope="session")
def deployment() -> Deployment:
    return Deployment({"name": "fake deployment for protocol tests", "weights_digest": WEIGHTS})


@pytest.fixture
def run_fake(fake_model_dir: Path, deployment: Deployment):
    """``run_fake(suites, shard="1/1")`` -> records, on the fake engine."""
    from engine.compare.api import run_suites

    def run(suites, shard="1/1", **kwargs):
        return run_suites(fake_model_dir, suites, scale="ci", device="cpu", shard=shard, deployment=deployment,
                          factory=FAKE_FACTORY, command=["test"], runtime=False, **kwargs)
    return run


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny preset checkpoint (float32, seed 0), written once per session."""
    from engine.checkpoint import make_checkpoint

    return make_checkpoint("tiny", tmp_path_factory.mktemp("tiny"), seed=0)
