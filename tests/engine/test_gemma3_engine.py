"""Gemma3 and windowed Mistral on the engine: what each Gemma3 feature and the window contribute, the
final logit softcap, and padded graph steps past the window (CPU). Fidelity, batch invariance, chunking
and decode == teacher-forced prefill of both are test_families_engine.py's, over every family.

The fidelity prompts (52 tokens) and the determinism prompts cross gemma3-tiny's window of 32 keys.
"""

import pytest
import torch

from engine.llm_engine import LLM
from engine.reference import ReferenceModel
from engine.sampling_params import SamplingParams
from tests.engine.conftest import SMALL_ENGINE
from tests.engine.test_determinism import GREEDY, PROMPTS
from tests.engine.test_fidelity import PROMPTS as FIDELITY_PROMPTS
from tests.engine.test_fidelity import TOLERANCE, max_reference_difference
from tests.engine.test_mixed_padding import mixed_runs  # noqa: F401 (a fixture)

WINDOWED = ["gemma3_tiny_dir", "mistral_window_dir"]
LONG = FIDELITY_PROMPTS[0]  # 52 tokens: past the window of 32


def test_the_prompts_cross_the_window():
    # PROMPTS[0] is also the prompt test_families_engine.py decodes after: every decoded row is past the window
    assert len(LONG) > 32 and len(PROMPTS[0]) > 32


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


def test_final_logit_softcapping_is_honoured(gemma3_softcap_dir, gemma3_tiny_dir):
    assert max_reference_difference(gemma3_softcap_dir, "float32") <= TOLERANCE["float32"]
    (capped,) = LLM(gemma3_softcap_dir, **SMALL_ENGINE).generate([LONG], SamplingParams(max_tokens=1))
    (plain,) = LLM(gemma3_tiny_dir, **SMALL_ENGINE).generate([LONG], SamplingParams(max_tokens=1))
    capped_row, plain_row = capped.trace.entries[0].logits, plain.trace.entries[0].logits
    cap = float(torch.tensor(0.05))  # the cap at float32, which saturated logits reach exactly
    assert float(capped_row.abs().max()) <= cap < float(plain_row.abs().max())
    assert float((capped_row - plain_row).abs().max()) > 100 * TOLERANCE["float32"]


@pytest.mark.parametrize("family", WINDOWED)
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
