"""Fixtures: random-initialised checkpoints written once per session, and small engine factories."""

import json
from pathlib import Path

import pytest

from engine.checkpoint import make_checkpoint

# Small pages and budgets so short prompts exercise chunking, reuse and preemption on the CPU.
SMALL_ENGINE = dict(page_size=4, num_pages=48, max_num_seqs=8, max_num_batched_tokens=64, max_model_len=64)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory) -> Path:
    """Llama-style tiny preset, float32, seed 0."""
    return make_checkpoint("tiny", tmp_path_factory.mktemp("tiny"), seed=0)


@pytest.fixture(scope="session")
def small_dir(tmp_path_factory) -> Path:
    """Qwen2-style small preset (q/k/v biases), float32."""
    return make_checkpoint("small", tmp_path_factory.mktemp("small"), seed=1)


@pytest.fixture(scope="session")
def tiny_llama3_dir(tmp_path_factory) -> Path:
    """The tiny preset with a Llama-3 rope_scaling whose bands cover the tiny head dimension."""
    directory = make_checkpoint("tiny", tmp_path_factory.mktemp("tiny_llama3"), seed=2)
    config = json.loads((directory / "config.json").read_text())
    config["rope_scaling"] = {"rope_type": "llama3", "factor": 4.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 64}
    (directory / "config.json").write_text(json.dumps(config))
    return directory
