"""Qwen3, Mistral, Gemma3 and windowed Mistral on the engine: fidelity to the float64 reference (a tolerance
claim, separate from determinism) and bitwise batch invariance, chunking and decode == teacher-forced prefill
(CPU). What each Qwen3 feature contributes is here; Gemma3's and the window's, in test_gemma3_engine.py."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.config import EngineConfig
from engine.llm_engine import LLM, LLMEngine
from engine.reference import ReferenceModel
from engine.sampling_params import SamplingParams
from tests.engine.conftest import P, SMALL_ENGINE
from tests.engine.test_determinism import GREEDY, PROMPTS, assert_bitwise_equal, singletons
from tests.engine.test_fidelity import PROMPTS as FIDELITY_PROMPTS
from tests.engine.test_fidelity import TOLERANCE, max_reference_difference

# gemma3-tiny and mistral-window cross their window of 32 keys (test_gemma3_engine.py checks the prompts do)
FAMILIES = ["qwen3_tiny_dir", "mistral_tiny_dir", "gemma3_tiny_dir", "mistral_window_dir"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_matches_the_float64_reference(request, family, dtype):
    assert max_reference_difference(request.getfixturevalue(family), dtype) <= TOLERANCE[dtype]


def test_the_qk_norms_matter(qwen3_tiny_dir):
    """The reference without Qwen3's q/k norms differs from the engine far beyond the tolerance."""
    plain = ReferenceModel(qwen3_tiny_dir)
    plain.architecture = "Qwen3 without q/k norms"
    diff = (ReferenceModel(qwen3_tiny_dir).logits(FIDELITY_PROMPTS[0]) - plain.logits(FIDELITY_PROMPTS[0])).abs()
    assert float(diff.max()) > 100 * TOLERANCE["float32"]


@pytest.fixture(scope="module")
def qwen3_biased_dir(qwen3_tiny_dir, tmp_path_factory):
    """qwen3-tiny with attention_bias=true: random biases on q/k/v and o_proj."""
    directory = tmp_path_factory.mktemp("qwen3_biased") / "m"
    shutil.copytree(qwen3_tiny_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "attention_bias": True}))
    tensors = load_file(directory / "model.safetensors")
    generator = torch.Generator().manual_seed(5)
    for layer in range(config["num_hidden_layers"]):
        for name, width in (("q", 128), ("k", 64), ("v", 64), ("o", 64)):
            tensors[f"model.layers.{layer}.self_attn.{name}_proj.bias"] = 0.1 * torch.randn(width, generator=generator)
    save_file(tensors, directory / "model.safetensors")
    return directory


def test_attention_bias_is_honoured(qwen3_biased_dir):
    assert max_reference_difference(qwen3_biased_dir, "float32") <= TOLERANCE["float32"]
    unbiased = ReferenceModel(qwen3_biased_dir)
    unbiased.w = {k: v for k, v in unbiased.w.items() if not k.endswith("o_proj.bias")}
    diff = ReferenceModel(qwen3_biased_dir).logits(FIDELITY_PROMPTS[1]) - unbiased.logits(FIDELITY_PROMPTS[1])
    assert float(diff.abs().max()) > 100 * TOLERANCE["float32"]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_batch_and_chunked_prefill_match_singletons_bitwise(request, family, dtype):
    directory = request.getfixturevalue(family)
    refs = singletons(directory, [GREEDY] * len(PROMPTS), dtype=dtype)
    outs = LLM(directory, dtype=dtype, **SMALL_ENGINE).generate(PROMPTS[::-1], GREEDY)[::-1]
    assert_bitwise_equal(outs, refs)
    chunked = LLM(directory, dtype=dtype, **{**SMALL_ENGINE, "max_num_batched_tokens": P}).generate(PROMPTS, GREEDY)
    assert any(len(o.prefill_chunk_ends) > 1 for o in chunked), "no prompt was split into chunks"
    assert_bitwise_equal(chunked, refs)


@pytest.mark.parametrize("family", FAMILIES)
def test_decode_rows_equal_teacher_forced_prefill(request, family):
    directory = request.getfixturevalue(family)
    (ref,) = singletons(directory, [GREEDY])
    engine = LLMEngine(directory, EngineConfig(**{**SMALL_ENGINE, "enable_prefix_caching": False}))
    for i in (1, 6, P - 1):
        engine.add_request(list(ref.prompt_token_ids) + list(ref.token_ids[:i]),
                           SamplingParams(max_tokens=1, ignore_eos=True))
        (forced,) = engine.run()
        assert torch.equal(forced.trace.entries[0].logits, ref.trace.entries[i].logits)


@pytest.mark.parametrize("family", FAMILIES + ["gemma3_softcap_dir"])
def test_check_mode_accepts_every_launch_of_the_family(request, family):
    """Check mode counts the launches a forward owes: Qwen3's q/k norms and split RoPE, Gemma's six norms a
    layer, GeGLU, the softcap."""
    directory = request.getfixturevalue(family)
    (ref,) = singletons(directory, [GREEDY])
    (out,) = LLM(directory, check_mode=True, **SMALL_ENGINE).generate([PROMPTS[0]], GREEDY)
    assert_bitwise_equal([out], [ref])
