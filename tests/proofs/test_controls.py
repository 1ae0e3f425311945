"""Positive controls: correct kernels are VERIFIED, and say what they relied on."""

from tests.proofs.conftest import KERNELS
from tests.proofs.test_mutants import ATTENTION, WINDOW


def test_tiled_matmul_is_verified(verify):
    result = verify(KERNELS / "matmul.py", "matmul_kernel", BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"a_ptr": "index [row, *]", "b_ptr": "equal (identical in both launches)"}
    assert {t.id for t in result.trusted} >= {"dot-position-independence", "triton-compiler", "z3-solver"}
    assert all(o.status == "proved" for o in result.obligations)


def test_causal_tile_attention_needs_identity_steps_and_dead_terms(verify):
    result = verify(KERNELS / "attention.py", "attention_kernel", **ATTENTION)
    assert result.verdict == "VERIFIED", result.reason
    steps = "\n".join(result.steps)
    assert "extra suffix iterations of launch A proved exact identities" in steps
    assert "dot terms with a +0 left operand dropped" in steps
    assert "dot-zero-terms" in {t.id for t in result.trusted}
    assert "attention-finiteness" in {t.id for t in result.trusted}


def test_sliding_window_with_clamp_has_identity_prefix_steps(verify):
    result = verify(KERNELS / "sliding_window.py", "window_attention_kernel", **WINDOW)
    assert result.verdict == "VERIFIED", result.reason
    steps = "\n".join(result.steps)
    assert "iterations paired by value" in steps
    assert "extra prefix iterations" in steps and "extra suffix iterations" in steps


def test_unfused_accumulation_is_unknown_not_verified(verify):
    result = verify(KERNELS / "attention_unfused.py", "attention_kernel", **ATTENTION)
    assert result.verdict == "UNKNOWN"
    assert "not an exact identity on 'acc'" in result.reason


def test_an_unseen_kernel_log_softmax_is_verified(verify):
    result = verify(KERNELS / "log_softmax.py", "log_softmax_kernel", BLOCK_SIZE=1024)
    assert result.verdict == "VERIFIED", result.reason
    assert result.demand == {"input_ptr": "index [row, *]"}


def test_an_unseen_kernel_layer_norm_with_three_outputs_is_verified(verify):
    result = verify(KERNELS / "layer_norm.py", "_layer_norm_fwd_fused", BLOCK_SIZE=1024)
    assert result.verdict == "VERIFIED", result.reason
    assert set(result.demand) == {"X", "W", "B"}
