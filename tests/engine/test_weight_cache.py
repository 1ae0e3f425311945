"""Engines of one process share loaded weights, never a rewritten checkpoint, and never write them."""

import hashlib
import os

import torch

from engine import weight_cache
from engine.checkpoint import make_checkpoint
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

from tests.engine.conftest import SMALL_ENGINE


def _bytes_digest(weights) -> str:
    h = hashlib.sha256()
    tensors = [weights.embed, weights.final_norm, weights.lm_head]
    for layer in weights.layers:
        tensors += [layer.input_norm, layer.qkv, layer.o_proj, layer.post_norm, layer.gate_up, layer.down]
    for t in tensors:
        h.update(t.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def test_engines_share_one_load_and_running_leaves_the_weights_unchanged(tiny_dir):
    weight_cache.clear()
    loads = weight_cache.num_loads()
    first = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    second = LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    assert weight_cache.num_loads() == loads + 1
    assert first.runner.model.weights.embed.data_ptr() == second.runner.model.weights.embed.data_ptr()
    before = _bytes_digest(first.runner.model.weights)
    first.add_request(list(range(1, 40)), SamplingParams(max_tokens=4))
    first.run()
    assert _bytes_digest(second.runner.model.weights) == before
    assert first.deployment.digest == second.deployment.digest


def test_a_rewritten_checkpoint_is_read_again(tmp_path):
    weight_cache.clear()
    make_checkpoint("tiny", tmp_path, seed=0)
    old = LLMEngine(tmp_path, EngineConfig(**SMALL_ENGINE))
    loads = weight_cache.num_loads()
    for f in tmp_path.glob("*.safetensors"):
        os.unlink(f)  # a new inode even where the clock's resolution hides the rewrite
    make_checkpoint("tiny", tmp_path, seed=1)
    new = LLMEngine(tmp_path, EngineConfig(**SMALL_ENGINE))
    assert weight_cache.num_loads() == loads + 1
    assert new.runner.weights_digest != old.runner.weights_digest
    assert not torch.equal(new.runner.model.weights.embed, old.runner.model.weights.embed)


def test_another_dtype_is_another_entry(tiny_dir):
    weight_cache.clear()
    loads = weight_cache.num_loads()
    LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE))
    LLMEngine(tiny_dir, EngineConfig(**SMALL_ENGINE, dtype="bfloat16"))
    assert weight_cache.num_loads() == loads + 2
