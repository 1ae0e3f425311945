"""Sliding-window and softcapped attention entries of sealed plans are VERIFIED; the mutant whose
window start is the block's, not the row's, is REFUTED while the plan's kernel at its
configuration is VERIFIED."""

from dataclasses import replace

import pytest

from kernels.plan import plan_for
from kernels.shapes import ModelShape, preset
from proofs.planrun import targets_from_plan, verify_target
from tests.proofs.conftest import MUTANTS, verify_file

# The tiny shape with a window of two pages; with page size 4 and a window below a page; with
# windows that are no multiple of the 128-key tile (one within a tile, one past a segment) and a
# softcap; and Gemma3-1B's attention (head_dim 256: 64-key tiles, 512-key segments and window).
SHAPES = {
    "tiny-w32": replace(preset("tiny"), attention_windows=(0, 32)),
    "tiny-p4-w5": replace(preset("tiny"), page_size=4, attention_windows=(5,)),
    "tiny-w37-w200-cap50": replace(preset("tiny"), attention_windows=(0, 37, 200), attn_softcap=50.0),
    "gemma3-1b-attention": ModelShape(hidden_size=1152, num_layers=26, num_heads=4, num_kv_heads=1, head_dim=256,
                                      intermediate_size=6912, vocab_size=262144, dtype="bfloat16",
                                      attention_windows=(0, 512)),
}
TARGETS = {t.key: t for shape in SHAPES.values() for t in targets_from_plan(plan_for(shape))
           if "_w" in t.key or "_cap" in t.key}


def test_every_shape_contributes_windowed_entries():
    # 5 merges, each with its prefill bucket's entry (4 heads a program), 6 walks, each with its
    # decode bucket's entry, and the one-kernel form of the softcapped full causal layers with its own
    assert len(TARGETS) == 24 and sum(k.endswith(('_q4', '_q8')) for k in TARGETS) == 7, sorted(TARGETS)
    assert sum(k.endswith("_h4") for k in TARGETS) == 5, sorted(TARGETS)


@pytest.mark.parametrize("key", sorted(TARGETS))
def test_windowed_plan_entry_is_verified(key):
    result = verify_target(TARGETS[key])
    assert result.verdict == "VERIFIED", result.reason


def test_the_plan_kernel_verifies_at_the_window_mutant_configuration():
    from kernels.plan import REPO_ROOT

    result = verify_file(REPO_ROOT / "kernels" / "attention.py", "attention_partial_kernel",
                         MUTANTS / "window_start_from_block.toml")
    assert result.verdict == "VERIFIED", result.reason
