"""Semantic fidelity: engine logits are close to the independent float64 reference (engine/reference.py).

A tolerance claim, separate from determinism. Stated tolerances on the largest absolute logit
difference over every produced position and the whole vocabulary: 1e-5 in float32 and 2e-2 in
bfloat16 (logits of these random models have magnitude below about 1.5). Greedy tokens must
also agree with the reference's argmax wherever its top two logits are separated by more than
twice the tolerance.
"""

import pytest
import torch

from engine.llm_engine import LLM
from engine.reference import ReferenceModel
from engine.sampling_params import SamplingParams
from tests.engine.conftest import SMALL_ENGINE

TOLERANCE = {"float32": 1e-5, "bfloat16": 2e-2}
# The first prompt's history spans four KV pages, so attention runs over several tiles.
PROMPTS = [[1, 5, 9, 200, 3, 7, 7, 7, 12, 44, 45, 46, 100] * 4, [250, 2, 17]]


def max_reference_difference(model_dir, dtype: str, max_tokens: int = 6) -> float:
    llm = LLM(model_dir, dtype=dtype, **SMALL_ENGINE)
    ref = ReferenceModel(model_dir)
    worst = 0.0
    for out in llm.generate(PROMPTS, SamplingParams(max_tokens=max_tokens, ignore_eos=True)):
        history = list(out.prompt_token_ids) + list(out.token_ids)
        expected = ref.logits(history)[len(out.prompt_token_ids) - 1:len(history) - 1]  # [N, V] float64
        got = torch.stack([e.logits for e in out.trace.entries]).double()
        worst = max(worst, float((got - expected).abs().max()))
        top2 = expected.topk(2, dim=-1).values
        clear = (top2[:, 0] - top2[:, 1]) > 2 * TOLERANCE[dtype]
        assert torch.equal(torch.tensor(out.token_ids)[clear], expected.argmax(-1)[clear])
    return worst


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_llama_matches_the_float64_reference(tiny_dir, dtype):
    assert max_reference_difference(tiny_dir, dtype) <= TOLERANCE[dtype]


def test_tied_embeddings_match_the_float64_reference(tiny_tied_dir):
    assert max_reference_difference(tiny_tied_dir, "float32") <= TOLERANCE["float32"]


def test_qwen2_qkv_bias_matches_the_float64_reference(small_dir):
    assert max_reference_difference(small_dir, "float32", max_tokens=3) <= TOLERANCE["float32"]


def test_llama3_rope_scaling_is_honoured(tiny_llama3_dir):
    assert max_reference_difference(tiny_llama3_dir, "float32") <= TOLERANCE["float32"]
    # and it matters: the same weights without scaling give measurably different logits
    scaled = ReferenceModel(tiny_llama3_dir)
    plain = ReferenceModel(tiny_llama3_dir)
    plain.inv_freq = plain._inv_freq(plain.config["rope_theta"], None)
    assert float((scaled.logits(PROMPTS[0]) - plain.logits(PROMPTS[0])).abs().max()) > 100 * TOLERANCE["float32"]
