"""Gemma3 and windowed Mistral on the engine: fidelity to the float64 reference (a tolerance claim,
separate from determinism) and bitwise batch invariance, chunking and decode == teacher-forced prefill (CPU).

The fidelity prompts (52 tokens) and the determinism prompts cross gemma3-tiny's window of 32 keys.
"""

import json
import shutil

import pytest
import torch

from engine.config import EngineConfig
from engine.llm_engine import LLM, LLMEngine
from engine.reference import ReferenceModel
from engine.sampling_params import SamplingParams
from tests.engine.conftest import P, SMALL_ENGINE
from tests.engine.test_determinism import GREEDY, PROMPTS, assert_bitwise_equal, singletons
from tests.engine.test_fidelity import PROMPTS as FIDELITY_PROMPTS
from tests.engine.test_fidelity import TOLERANCE, max_reference_difference
from tests.engine.test_mixed_padding import mixed_runs  # noqa: F401 (a fixture)

FAMILIES = ["gemma3_tiny_dir", "mistral_window_dir"]
LONG = FIDELITY_PROMPTS[0]  # 52 tokens: past the window of 32


def test_the_prompts_cross_the_window():
    assert len(LONG) > 32 and max(len(p) for p in PROMPTS) > 32


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_engine_matches_the_float64_reference(request, family, dtype):
    assert max_reference_difference(request.getfixturevalue(family), dtype) <= TOLERANCE[dtype]


def _reference_logits(directory, change=None):
    ref = ReferenceModel(directory)
    if change is not None:
        change(ref.gemma3 or ref)
    return ref.logits(LONG)


@pytest.mark.parametrize("family, change", [
    ("gemma3_tiny_dir", lambda g: setattr(g, "window", 10**6)),  # every layer full
    ("gemma3_tiny_dir", lambda g: g.inv_freq.update(sliding_attention=g.inv_freq["full_attention"])),  # one base
    ("gemma3_tiny_dir", lambda g: setattr(g, "_norm", lambda x, w: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)
                                                                                    + g.eps) * w)),  # w, not 1 + w
    ("gemma3_tiny_dir", lambda g: setattr(g, "scaling", g.head_dim ** -0.5)),  # head_dim, not the scalar
    ("gemma3_tiny_dir", lambda g: setattr(g, "embed_scale", 1.0)),
    ("mistral_window_dir", lambda m: setattr(m, "window", None)),
])
def test_each_gemma_feature_matters(request, family, change):
    """The reference without one feature differs from the (engine-matching) reference far beyond the tolerance."""
    directory = request.getfixturevalue(family)
    diff = (_reference_logits(directory) - _reference_logits(directory, change)).abs()
    assert float(diff.max()) > 100 * TOLERANCE["float32"]


@pytest.fixture(scope="module")
def gemma3_softcap_dir(gemma3_tiny_dir, tmp_path_factory):
    """gemma3-tiny with final_logit_softcapping 0.05, below the random model's largest logits."""
    directory = tmp_path_factory.mktemp("gemma3_softcap") / "m"
    shutil.copytree(gemma3_tiny_dir, directory)
    config = json.loads((directory / "config.json").read_text())
    (directory / "config.json").write_text(json.dumps({**config, "final_logit_softcapping": 0.05}))
    return directory


def test_final_logit_softcapping_is_honoured(gemma3_softcap_dir, gemma3_tiny_dir):
    assert max_reference_difference(gemma3_softcap_dir, "float32") <= TOLERANCE["float32"]
    (capped,) = LLM(gemma3_softcap_dir, **SMALL_ENGINE).generate([LONG], SamplingParams(max_tokens=1))
    (plain,) = LLM(gemma3_tiny_dir, **SMALL_ENGINE).generate([LONG], SamplingParams(max_tokens=1))
    capped_row, plain_row = capped.trace.entries[0].logits, plain.trace.entries[0].logits
    cap = float(torch.tensor(0.05))  # the cap at float32, which saturated logits reach exactly
    assert float(capped_row.abs().max()) <= cap < float(plain_row.abs().max())
    assert float((capped_row - plain_row).abs().max()) > 100 * TOLERANCE["float32"]


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
    assert len(ref.prompt_token_ids) + len(ref.token_ids) > 32, "decode must run past the window"
    engine = LLMEngine(directory, EngineConfig(**{**SMALL_ENGINE, "enable_prefix_caching": False}))
    for i in (1, 6, P - 1):
        engine.add_request(list(ref.prompt_token_ids) + list(ref.token_ids[:i]),
                           SamplingParams(max_tokens=1, ignore_eos=True))
        (forced,) = engine.run()
        assert torch.equal(forced.trace.entries[0].logits, ref.trace.entries[i].logits)


@pytest.mark.parametrize("family", FAMILIES + ["gemma3_softcap_dir"])
def test_check_mode_accepts_every_launch_of_the_family(request, family):
    """Check mode counts the launches a forward owes: Gemma's six norms a layer, GeGLU, the softcap."""
    directory = request.getfixturevalue(family)
    (ref,) = singletons(directory, [GREEDY])
    (out,) = LLM(directory, check_mode=True, **SMALL_ENGINE).generate([PROMPTS[0]], GREEDY)
    assert_bitwise_equal([out], [ref])


@pytest.mark.parametrize("family", FAMILIES)
def test_padded_graph_steps_equal_eager_bitwise(request, family, mixed_runs):
    """On the CPU cuda_graphs=True runs the padded decode and mixed steps a graph would replay, eagerly."""
    from tests.engine.test_mixed_padding import PROMPTS as MIXED_PROMPTS
    from tests.engine.test_mixed_padding import assert_same_traces, pool_kv, run

    directory = request.getfixturevalue(family)
    long = MIXED_PROMPTS + [list(range(3, 3 + 40))]  # one prompt past the window
    eager, eager_engine = run(directory, long, GREEDY)
    padded, padded_engine = run(directory, long, GREEDY, cuda_graphs=True)
    assert mixed_runs, "no step ran padded"
    assert_same_traces(padded, eager)
    for a, b in zip(pool_kv(padded_engine), pool_kv(eager_engine)):
        assert torch.equal(a, b)  # padding rows wrote no pool page
