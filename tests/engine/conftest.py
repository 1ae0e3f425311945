"""Fixtures: random-initialised checkpoints written once per session, and small engine factories."""

import json
import shutil
import sys
from pathlib import Path

import pytest

from engine.checkpoint import make_checkpoint

# The engine's default page size with few pages and small budgets, so prompts of a few pages
# exercise chunking, reuse and preemption on the CPU. Tests state their lengths in pages of P.
P = 16
SMALL_ENGINE = dict(page_size=P, num_pages=48, max_num_seqs=8, max_num_batched_tokens=16 * P, max_model_len=16 * P)


@pytest.fixture(autouse=True, scope="module")
def restore_torch_threads():
    """Engines set torch's process-wide thread count (it is part of D); give other packages theirs back."""
    torch = sys.modules.get("torch")
    before = torch.get_num_threads() if torch else None
    yield
    if torch is not None and before is not None:
        torch.set_num_threads(before)


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


@pytest.fixture(scope="session")
def tiny_tied_dir(tmp_path_factory) -> Path:
    """The tiny preset with tied input and output embeddings (no lm_head.weight stored)."""
    from safetensors.torch import load_file, save_file

    directory = make_checkpoint("tiny", tmp_path_factory.mktemp("tiny_tied"), seed=3)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "tie_word_embeddings": True}))
    tensors = load_file(directory / "model.safetensors")
    del tensors["lm_head.weight"]
    save_file(tensors, directory / "model.safetensors")
    return directory


@pytest.fixture(scope="session")
def qwen3_tiny_dir(tmp_path_factory) -> Path:
    """Qwen3-style tiny preset (per-head q/k norms, head_dim 32 != hidden / heads, tied), float32."""
    return make_checkpoint("qwen3-tiny", tmp_path_factory.mktemp("qwen3_tiny"), seed=0)


@pytest.fixture(scope="session")
def mistral_tiny_dir(tmp_path_factory) -> Path:
    """Mistral-style tiny preset (sliding_window null, 4:1 grouped KV heads), float32."""
    return make_checkpoint("mistral-tiny", tmp_path_factory.mktemp("mistral_tiny"), seed=0)


@pytest.fixture(scope="session")
def gemma3_tiny_dir(tmp_path_factory) -> Path:
    """Gemma3-style tiny preset (3 sliding layers of window 32, then a full one; two RoPE bases), float32."""
    return make_checkpoint("gemma3-tiny", tmp_path_factory.mktemp("gemma3_tiny"), seed=0)


@pytest.fixture(scope="session")
def mistral_window_dir(tmp_path_factory) -> Path:
    """mistral-tiny with sliding_window 32: every layer windowed, so CI prompts cross the window."""
    directory = make_checkpoint("mistral-tiny", tmp_path_factory.mktemp("mistral_window"), seed=0)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "sliding_window": 32}))
    return directory


@pytest.fixture(scope="session")
def gemma3_softcap_dir(gemma3_tiny_dir, tmp_path_factory) -> Path:
    """gemma3-tiny with final_logit_softcapping 0.05, below the random model's largest logits."""
    directory = tmp_path_factory.mktemp("gemma3_softcap") / "m"
    shutil.copytree(gemma3_tiny_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "final_logit_softcapping": 0.05}))
    return directory
